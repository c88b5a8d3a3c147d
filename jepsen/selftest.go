package jepsen

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/jepsen/history"
)

// Campaign is a workload and the faults that should expose one mutant.
type Campaign struct {
	Mutant   string
	Workload string
	Nemesis  []string
	// Why says how the mutant is expected to show.
	Why string
}

// SelftestOptions configure a self-test.
type SelftestOptions struct {
	Base      Options // Out is the parent directory of all runs
	Seeds     int     // seeds per mutant (default 10)
	FirstSeed int64
	// Mutants restricts the self-test to these (default: all).
	Mutants []string
	// SkipCorrect skips the correct build's runs; SkipMutants the
	// mutants' (to spread a self-test over several invocations).
	SkipCorrect, SkipMutants bool
}

// SelftestRow is one line of the table: one mutant (or the correct build
// under that mutant's campaign) over all seeds.
type SelftestRow struct {
	Campaign Campaign
	Mutant   string // "" for the correct build
	Runs     int
	Flagged  int
	Errors   int // harness failures
	// Checkers counts which checkers flagged the runs.
	Checkers map[string]int
	Dirs     []string
}

// Selftest runs every mutant's campaign against the mutant and the correct
// build over Seeds seeds and returns the table. The campaigns exist only
// in a harness built with -tags mutant; the mutants run as
// Base.MutantBinary, the correct build as Base.Binary.
func Selftest(ctx context.Context, o SelftestOptions) ([]SelftestRow, error) {
	if !failpoint.Built {
		return nil, fmt.Errorf("jepsen: the self-test's campaigns: %w", failpoint.ErrNotBuilt)
	}
	if o.Seeds <= 0 {
		o.Seeds = 10
	}
	if o.FirstSeed == 0 {
		o.FirstSeed = 1
	}
	var rows []SelftestRow
	for _, c := range Campaigns() {
		if len(o.Mutants) > 0 && !slices.Contains(o.Mutants, c.Mutant) {
			continue
		}
		var builds []string
		if !o.SkipMutants {
			builds = append(builds, c.Mutant)
		}
		if !o.SkipCorrect {
			builds = append(builds, "")
		}
		for _, m := range builds {
			row := SelftestRow{Campaign: c, Mutant: m, Checkers: map[string]int{}}
			for s := 0; s < o.Seeds; s++ {
				if ctx.Err() != nil {
					return rows, ctx.Err()
				}
				ro := o.Base
				ro.Workload, ro.Nemesis, ro.Mutant, ro.Seed = c.Workload, c.Nemesis, m, o.FirstSeed+int64(s)
				name := m
				if name == "" {
					name = "correct-" + c.Mutant
				}
				ro.Out = filepath.Join(o.Base.Out, fmt.Sprintf("%s-seed%d", name, ro.Seed))
				fmt.Fprintf(o.Base.Progress, "selftest: %s seed %d (%s, nemesis %s)\n", name, ro.Seed, c.Workload, strings.Join(c.Nemesis, ","))
				ro.Progress = io.Discard
				res, err := Run(ctx, ro)
				row.Runs++
				row.Dirs = append(row.Dirs, ro.Out)
				switch {
				case err != nil:
					row.Errors++
					fmt.Fprintf(o.Base.Progress, "selftest:   harness failure: %v\n", err)
				case !res.Valid:
					row.Flagged++
					var names []string
					for n, r := range res.Checkers {
						if !r.Valid {
							row.Checkers[n]++
							names = append(names, n)
						}
					}
					sort.Strings(names)
					fmt.Fprintf(o.Base.Progress, "selftest:   flagged by %s\n", strings.Join(names, ", "))
				default:
					fmt.Fprintf(o.Base.Progress, "selftest:   valid (%d ops)\n", totalOps(res))
				}
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func totalOps(r history.Results) int64 { return sumMap(r.Ops) }

// SelftestPassed reports whether every mutant was caught in at least 9 of
// 10 runs (the same fraction for other seed counts) and the correct build
// never flagged nor failed.
func SelftestPassed(rows []SelftestRow) bool {
	for _, r := range rows {
		if r.Mutant == "" {
			if r.Flagged > 0 || r.Errors > 0 {
				return false
			}
		} else if r.Flagged*10 < r.Runs*9 {
			return false
		}
	}
	return len(rows) > 0
}

// WriteSelftestTable prints the table as Markdown.
func WriteSelftestTable(w io.Writer, rows []SelftestRow, took time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| build\t| workload\t| nemesis\t| flagged\t| harness errors\t| flagged by\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, r := range rows {
		name := r.Mutant
		if name == "" {
			name = "correct (" + r.Campaign.Mutant + " campaign)"
		}
		var by []string
		for n, k := range r.Checkers {
			by = append(by, fmt.Sprintf("%s %d", n, k))
		}
		sort.Strings(by)
		fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %d/%d\t| %d\t| %s\t|\n", name, r.Campaign.Workload, strings.Join(r.Campaign.Nemesis, ","),
			r.Flagged, r.Runs, r.Errors, strings.Join(by, ", "))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nselftest took %v; %s\n", took.Round(time.Second), map[bool]string{true: "PASSED", false: "FAILED"}[SelftestPassed(rows)])
}
