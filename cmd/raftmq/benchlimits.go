package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/harness/bench"
)

// newBenchLimitsCmd is `raftmq bench limits`: the machine's own limits
// (fdatasync latency, synced sequential bandwidth, loopback round trip)
// and the floors they put under a group's figures, optionally with runs
// of `bench produce --json` stated as fractions of them.
func newBenchLimitsCmd() *cobra.Command {
	var cfg bench.LimitsConfig
	var asJSON bool
	var from, against string
	var echo bool
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Measure this machine's limits: fdatasync latency, synced write bandwidth, loopback round trip; the floors under a group",
		Long: "Three probes, --duration each, on the file system of --dir (the brokers' data directory's): --sync-size appends each\n" +
			"followed by fdatasync (p50, p99), --seq-size appends each followed by fdatasync (MB/s), and --rtt-size requests over\n" +
			"a loopback TCP connection answered with 64 bytes (p50, p99). From them: the floor of one send at a time acknowledged\n" +
			"after a quorum's fsync (fdatasync p50 + 2 round trips p50) and the ceiling of pipelined sends (the bandwidth shared\n" +
			"by --replicas writing every message of --msg-bytes). --limits FILE reads an earlier --json measurement instead of\n" +
			"measuring; --against FILE states each `raftmq bench produce --json` result in FILE as a fraction of its limit.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if echo {
				return serveEcho(cfg.RTTSize)
			}
			cfg.Echo = echoProcess
			var l bench.Limits
			if from != "" {
				f, err := os.Open(from)
				if err != nil {
					return err
				}
				l, err = bench.ReadLimits(f, cfg.Replicas, cfg.MsgBytes)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", from, err)
				}
			} else {
				var err error
				if l, err = bench.MeasureLimits(c.Context(), cfg); err != nil {
					return err
				}
			}
			var runs []bench.Result
			if against != "" {
				f, err := os.Open(against)
				if err != nil {
					return err
				}
				runs, err = bench.ReadResults(f)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", against, err)
				}
			}
			if asJSON {
				b, err := json.Marshal(l)
				if err != nil {
					return err
				}
				fmt.Println(string(b))
			} else {
				fmt.Println(l.String())
			}
			for _, r := range runs {
				fmt.Println(l.Against(r))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "dir", ".", "a directory on the file system to measure (the brokers' data directory's); a temporary file is written and removed")
	f.DurationVar(&cfg.Duration, "duration", 3*time.Second, "how long each of the three probes runs")
	f.IntVar(&cfg.SyncSize, "sync-size", 4096, "bytes of each append of the fdatasync latency probe")
	f.IntVar(&cfg.SeqSize, "seq-size", 1<<20, "bytes of each append of the bandwidth probe")
	f.Int64Var(&cfg.SeqMax, "seq-max", 1<<30, "most bytes the bandwidth probe writes")
	f.IntVar(&cfg.RTTSize, "rtt-size", 1024, "bytes of each request of the loopback round-trip probe")
	f.IntVar(&cfg.Replicas, "replicas", 3, "replicas sharing the disk (the local group: 3)")
	f.IntVar(&cfg.MsgBytes, "msg-bytes", 1024, "bytes one message writes to each replica's log (the benchmarks' body size)")
	f.StringVar(&from, "limits", "", "read the limits from this file (an earlier --json line) instead of measuring")
	f.StringVar(&against, "against", "", "a file of the JSON lines of raftmq bench produce --json, each stated as a fraction of its limit")
	f.BoolVar(&asJSON, "json", false, "print the measurement as one JSON line")
	f.BoolVar(&echo, "echo", false, "be the far end of the round-trip probe: print the address listened on, answer one connection")
	_ = f.MarkHidden("echo")
	return cmd
}

// serveEcho is `bench limits --echo`: the round-trip probe's far end, a
// process of its own as a broker's peer is.
func serveEcho(rttSize int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr().String())
	return bench.ServeEcho(ln, rttSize)
}

// echoProcess starts `raftmq bench limits --echo` and returns the address
// it listens on; stop waits for it to end once the probe has closed its
// connection.
func echoProcess(rttSize int) (string, func() error, error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self, "bench", "limits", "--echo", "--rtt-size", strconv.Itoa(rttSize))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	addr = strings.TrimSpace(addr)
	if err != nil || addr == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", nil, errors.Join(errors.New("the echo process printed no address"), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return addr, func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			return fmt.Errorf("the echo process did not end: %w", <-done)
		}
	}, nil
}
