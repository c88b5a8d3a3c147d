package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/store"
)

func newStoreCmd(logger func() *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{Use: "store", Short: "Work on a node's store directory"}
	var asJSON bool
	inspect := &cobra.Command{
		Use:   "inspect DIR",
		Short: "Print segments, queues, index files and bbolt contents; verify every CRC",
		Long: "inspect reads a store directory (e.g. raftmq-data/n1) without changing it, verifies the\n" +
			"CRC of every commitlog entry and message, and exits 1 if it finds corruption.\n" +
			"Stop the broker first: the store is locked while open. A scan longer than a few\n" +
			"seconds prints its progress on stderr.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prog := newScanProgress(cmd.ErrOrStderr(), 2*time.Second)
			rep, err := store.InspectDir(vfs.Default(), args[0], prog.update)
			prog.done()
			if rep != nil {
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					if jerr := enc.Encode(rep); jerr != nil {
						return jerr
					}
				} else {
					rep.Write(cmd.OutOrStdout())
				}
			}
			if errors.Is(err, store.ErrInspectFailed) {
				return &exitError{code: 1, err: err}
			}
			return err
		},
	}
	inspect.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (problems in \"problems\", \"ok\" true when none)")
	cmd.AddCommand(inspect)
	cmd.AddCommand(newStoreDemoCmd(logger))
	return cmd
}

// scanProgress prints a line every interval while a scan runs: entries
// scanned, bytes of log reached and the rate.
type scanProgress struct {
	w         io.Writer
	every     time.Duration
	start     time.Time
	last      time.Time
	printed   bool
	entries   int
	pos, pos0 int64
}

func newScanProgress(w io.Writer, every time.Duration) *scanProgress {
	now := time.Now()
	return &scanProgress{w: w, every: every, start: now, last: now, pos0: -1}
}

func (p *scanProgress) update(entries int, pos int64) {
	if p.pos0 < 0 {
		p.pos0 = pos
	}
	p.entries, p.pos = entries, pos
	if entries%1024 != 0 {
		return // time.Now once per 1,024 entries
	}
	if now := time.Now(); now.Sub(p.last) >= p.every {
		p.last, p.printed = now, true
		p.print(now)
	}
}

func (p *scanProgress) print(now time.Time) {
	mb := float64(p.pos-p.pos0) / (1 << 20)
	fmt.Fprintf(p.w, "inspect: commitlog %d entries, %.0f MiB scanned, %.0f MiB/s\n", p.entries, mb, mb/now.Sub(p.start).Seconds())
}

// done prints the final figures if any progress line was printed.
func (p *scanProgress) done() {
	if p.printed {
		p.print(time.Now())
	}
}
