package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/jepsen"
	"github.com/raftmq/raftmq/jepsen/checker"
	"github.com/raftmq/raftmq/jepsen/history"
	"github.com/raftmq/raftmq/jepsen/netfault"
	"github.com/raftmq/raftmq/jepsen/report"
)

// Exit statuses of `raftmq jepsen run|check|campaign|selftest`.
const (
	exitValid     = 0
	exitViolation = 1
	exitHarness   = 2
)

func newJepsenCmd(logger func() *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jepsen",
		Short: "Chaos campaigns: run a group under faults, record histories, check them",
		Long: "Chaos campaigns: run a group of real broker processes under faults, record histories, check them.\n\n" +
			"Builds. The brokers are this binary (--binary to start another). The known-bad behaviours\n" +
			"(mutants) and the brokers' fault endpoint, which the clock nemesis needs, exist only in a binary\n" +
			"built with -tags mutant:\n\n" +
			"  go build -tags mutant -o raftmq-mutant ./cmd/raftmq\n\n" +
			"Runs with a mutant or the clock nemesis start that binary as brokers: --mutant-binary names it;\n" +
			"without the flag a binary built with the tag uses itself, and one built without builds it from\n" +
			"the source tree holding the working directory (go build -tags mutant into the user cache\n" +
			"directory, e.g. ~/.cache/raftmq). `selftest` and `run --mutant` run inside the mutant binary\n" +
			"(a default binary starts it with the same flags), while runs of the correct build keep --binary.",
	}
	cmd.AddCommand(newJepsenRunCmd(logger), newJepsenCheckCmd(), newJepsenServeCmd(logger),
		newJepsenCampaignCmd(logger), newJepsenSelftestCmd(logger))
	return cmd
}

// runFlags are the settings shared by run, campaign and selftest.
type runFlags struct {
	timeLimit time.Duration
	rate      float64
	seed      int64
	out       string
	net       string
	interval  time.Duration
	queues    int
	basePort  int
	// binary and mutantBinary: jepsen.Options' Binary and MutantBinary.
	binary, mutantBinary string
}

func (f *runFlags) register(cmd *cobra.Command, defaultLimit time.Duration, defaultOut string) {
	fl := cmd.Flags()
	fl.DurationVar(&f.timeLimit, "time-limit", defaultLimit, "how long the workload runs (faults stop a quiet period before the end)")
	fl.Float64Var(&f.rate, "rate", 200, "target operations per second, all clients together")
	fl.Int64Var(&f.seed, "seed", 1, "seed of every random choice (faults, targets, operations)")
	fl.StringVar(&f.out, "out", defaultOut, "output directory")
	fl.StringVar(&f.net, "net", netfault.Auto, "network mode: auto (a private network namespace if possible, else proxies), netns or proxy")
	fl.DurationVar(&f.interval, "interval", 4*time.Second, "mean time between faults (each fault lasts about as long)")
	fl.IntVar(&f.queues, "queues", 4, "queues of the test topic")
	fl.IntVar(&f.basePort, "base-port", 27000, "first port of the nodes' listeners")
	fl.StringVar(&f.binary, "binary", "", "raftmq executable to start as brokers in runs that need no mutant build (default: this one)")
	fl.StringVar(&f.mutantBinary, "mutant-binary", "", "raftmq executable built with -tags mutant, started as brokers in runs with a mutant or the clock nemesis\n"+
		"(default: this one if built with the tag, else built from the source tree: see raftmq jepsen --help)")
}

// enterNet re-executes the command inside a private network namespace when
// asked and possible. done is true when the child ran the command (the
// caller returns code).
func (f *runFlags) enterNet() (mode netfault.Mode, done bool, err error) {
	handled, code, err := netfault.Reexec(f.net, nil)
	if err != nil {
		return mode, true, &exitError{code: exitHarness, err: err}
	}
	if handled {
		if code != 0 {
			return mode, true, &exitError{code: code, err: fmt.Errorf("exit status %d", code)}
		}
		return mode, true, nil
	}
	mode, err = netfault.Enter(f.net)
	if err != nil {
		return mode, true, &exitError{code: exitHarness, err: err}
	}
	return mode, false, nil
}

func (f *runFlags) options(mode netfault.Mode, log *slog.Logger) jepsen.Options {
	// The brokers run in their own directories: relative paths would not
	// name the same files there.
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil && p != "" {
			return a
		}
		return p
	}
	return jepsen.Options{Binary: abs(f.binary), MutantBinary: abs(f.mutantBinary), TimeLimit: f.timeLimit, Rate: f.rate, Seed: f.seed, Out: f.out, Mode: mode,
		Interval: f.interval, Queues: f.queues, BasePort: f.basePort, Progress: os.Stdout, Logger: log,
		Env: testMainEnv(), Watchdog: f.timeLimit + 5*time.Minute}
}

// testMainEnv keeps a test binary acting as raftmq in the brokers it
// starts (see main_test.go).
func testMainEnv() []string {
	if v := os.Getenv("RAFTMQ_TEST_MAIN"); v != "" {
		return []string{"RAFTMQ_TEST_MAIN=" + v}
	}
	return nil
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// verdict maps results to the command contract's exit status.
func verdict(res history.Results, err error) error {
	if err != nil {
		return &exitError{code: exitHarness, err: err}
	}
	fmt.Print(checker.Summary(res))
	if !res.Valid {
		return &exitError{code: exitViolation, err: errors.New("the history is NOT valid (see results.json and report.html)")}
	}
	return nil
}

func newJepsenRunCmd(logger func() *slog.Logger) *cobra.Command {
	var f runFlags
	var nemesis, workload, mut string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one test: start a group, run a workload under faults, check the history",
		Long: "Starts three broker processes (this binary), each on its own loopback address inside a private\n" +
			"network namespace when the machine allows it (per-link TCP proxies otherwise), runs the workload\n" +
			"while the nemesis injects faults, heals, drains every queue from every node and checks the history.\n" +
			"Exit status: 0 valid, 1 a checker found a violation, 2 the harness failed.",
		Example: "  raftmq jepsen run --nemesis partition,kill --workload queue --time-limit 60s --rate 200 --seed 7 --out runs/t1",
		RunE: func(cmd *cobra.Command, _ []string) error {
			nems, err := jepsen.ParseNemeses(nemesis)
			if err != nil {
				return &exitError{code: exitHarness, err: err}
			}
			if !failpoint.Built && mut != "" {
				return runInMutantBuild(cmd, f.mutantBinary)
			}
			if _, err := failpoint.Parse(mut); err != nil {
				return &exitError{code: exitHarness, err: err}
			}
			mode, done, err := f.enterNet()
			if done {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			o := f.options(mode, logger())
			o.Workload, o.Nemesis, o.Mutant = workload, nems, mut
			res, err := jepsen.Run(ctx, o)
			fmt.Printf("report: %s\n", filepath.Join(f.out, history.ReportFile))
			return verdict(res, err)
		},
	}
	f.register(cmd, 60*time.Second, "jepsen-runs/"+time.Now().Format("20060102-150405"))
	cmd.Flags().StringVar(&nemesis, "nemesis", "partition,kill", "faults: comma-separated from "+strings.Join(jepsen.Nemeses(), ", ")+", all, none")
	cmd.Flags().StringVar(&workload, "workload", jepsen.WorkloadQueue, "workload: "+strings.Join(jepsen.Workloads(), ", "))
	cmd.Flags().StringVar(&mut, "mutant", "", mutantFlagHelp("run known-bad brokers"))
	_ = cmd.Flags().MarkHidden("mutant")
	return cmd
}

func newJepsenCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check DIR",
		Short: "Check a recorded run again (offline) and rewrite results.json and report.html",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if _, err := os.Stat(filepath.Join(args[0], history.HistoryFile)); err != nil {
				return &exitError{code: exitHarness, err: fmt.Errorf("%s is not a run directory: %w", args[0], err)}
			}
			res, err := jepsen.Check(args[0], nil)
			return verdict(res, err)
		},
	}
}

func newJepsenServeCmd(logger func() *slog.Logger) *cobra.Command {
	var addr, dir string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Browse the reports of past runs in a web browser",
		RunE: func(_ *cobra.Command, _ []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			fmt.Printf("serving runs under %s at http://%s/ (Ctrl-C stops)\n", dir, addr)
			return report.Serve(ctx, addr, dir, logger())
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8088", "listen address")
	cmd.Flags().StringVar(&dir, "dir", "jepsen-runs", "directory holding run directories")
	return cmd
}

func newJepsenCampaignCmd(logger func() *slog.Logger) *cobra.Command {
	var f runFlags
	var set string
	cmd := &cobra.Command{
		Use:   "campaign",
		Short: "Run a set of scenarios (workload × nemesis) one after another and summarise them",
		Long: "Scenario sets: ci (a few short scenarios, what .ci/run runs), standard (every nemesis alone and\n" +
			"combined, every workload) and soak (standard with longer runs). Exit status as for run: 1 if any\n" +
			"scenario found a violation, 2 if the harness failed.",
		RunE: func(_ *cobra.Command, _ []string) error {
			scs, err := jepsen.Scenarios(set)
			if err != nil {
				return &exitError{code: exitHarness, err: err}
			}
			mode, done, err := f.enterNet()
			if done {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			o := f.options(mode, logger())
			sum, err := jepsen.RunCampaign(ctx, o, scs)
			jepsen.WriteCampaignTable(os.Stdout, sum)
			if err != nil {
				return &exitError{code: exitHarness, err: err}
			}
			if !sum.Valid() {
				return &exitError{code: exitViolation, err: errors.New("a scenario found a violation")}
			}
			return nil
		},
	}
	f.register(cmd, 30*time.Second, "jepsen-runs/campaign-"+time.Now().Format("20060102-150405"))
	cmd.Flags().StringVar(&set, "scenarios", "standard", "scenario set: ci, standard, soak")
	return cmd
}

// splitList splits a comma-separated list, without blanks.
func splitList(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func newJepsenSelftestCmd(logger func() *slog.Logger) *cobra.Command {
	var f runFlags
	var seeds int
	var only, except string
	var skipCorrect, skipMutants bool
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Prove the harness catches known-bad brokers: every mutant in >= 9 of 10 seeds, the correct build never",
		Long: "Runs, for every mutant, the campaign meant to expose it against the mutant (--mutant-binary) and\n" +
			"against the correct build (--binary), over --seeds seeds. It passes when every mutant is flagged in\n" +
			"at least 9 runs of 10 and the correct build is never flagged. A binary built without -tags mutant\n" +
			"runs the self-test inside the mutant binary (see raftmq jepsen --help).\n" +
			"Exit status: 0 passed, 1 a mutant escaped or the correct build was flagged, 2 the harness failed.",
		Example: "  raftmq jepsen selftest --seeds 1 --time-limit 12s      # one seed per mutant\n" +
			"  raftmq jepsen selftest --seeds 10 --time-limit 12s     # the long run",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !failpoint.Built {
				return runInMutantBuild(cmd, f.mutantBinary)
			}
			for _, list := range []string{only, except} {
				if _, err := failpoint.Parse(list); err != nil {
					return &exitError{code: exitHarness, err: err}
				}
			}
			mutants := splitList(only)
			if except != "" {
				if len(mutants) == 0 {
					mutants = failpoint.Names()
				}
				mutants = slices.DeleteFunc(mutants, func(m string) bool { return slices.Contains(splitList(except), m) })
				if len(mutants) == 0 {
					return &exitError{code: exitHarness, err: errors.New("selftest: --except leaves no mutant")}
				}
			}
			mode, done, err := f.enterNet()
			if done {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			start := time.Now()
			o := f.options(mode, logger())
			rows, err := jepsen.Selftest(ctx, jepsen.SelftestOptions{Base: o, Seeds: seeds, FirstSeed: f.seed, Mutants: mutants, SkipCorrect: skipCorrect, SkipMutants: skipMutants})
			jepsen.WriteSelftestTable(os.Stdout, rows, time.Since(start))
			if err != nil {
				return &exitError{code: exitHarness, err: err}
			}
			if !jepsen.SelftestPassed(rows) {
				return &exitError{code: exitViolation, err: errors.New("selftest failed: a mutant escaped or the correct build was flagged")}
			}
			return nil
		},
	}
	f.register(cmd, 20*time.Second, "jepsen-runs/selftest-"+time.Now().Format("20060102-150405"))
	cmd.Flags().IntVar(&seeds, "seeds", 10, "seeds per mutant (and per correct-build campaign)")
	cmd.Flags().StringVar(&only, "mutant", "", "only these mutants (comma-separated; default all)")
	cmd.Flags().StringVar(&except, "except", "", "leave these mutants out (comma-separated)")
	cmd.Flags().BoolVar(&skipCorrect, "skip-correct", false, "do not run the correct build under the mutants' campaigns")
	cmd.Flags().BoolVar(&skipMutants, "skip-mutants", false, "run only the correct build under the mutants' campaigns")
	return cmd
}
