// Package jepsen is raftmq's chaos harness: it starts a three-node group of
// real broker processes (the raftmq binary itself), drives a workload
// through the Go client while a seeded nemesis injects faults, records
// every operation, and checks the history (jepsen/checker) and writes a
// report (jepsen/report). See Run and docs/chaos.md.
package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/jepsen/checker"
	"github.com/raftmq/raftmq/jepsen/history"
	"github.com/raftmq/raftmq/jepsen/netfault"
	"github.com/raftmq/raftmq/jepsen/report"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Options configure one run.
type Options struct {
	// Binary is the raftmq executable started as brokers (default: this
	// process's executable), except in runs that need a build with -tags
	// mutant (NeedsMutantBuild), which start MutantBinary.
	Binary string
	// MutantBinary is a raftmq executable built with -tags mutant, for the
	// runs that need one: a Mutant, or the clock nemesis (the brokers'
	// fault endpoint). Default: this process's executable if it was built
	// with the tag, else one BuildMutantBinary builds from the source tree
	// when a run first needs it.
	MutantBinary string
	// Env is added to the brokers' environment.
	Env []string
	// Out is the run directory (created; must not hold another run).
	Out       string
	Workload  string
	Nemesis   []string
	TimeLimit time.Duration
	// Rate is the target of operations per second, all clients together.
	Rate float64
	Seed int64
	// Mode is the network mode already entered (netfault.Enter).
	Mode netfault.Mode
	// Mutant is passed to the brokers (MutantBinary) as --mutant
	// (self-tests).
	Mutant string
	// Queues of the test topic (default 4).
	Queues int
	// Interval between faults (default 5 s); each fault lasts about as long.
	Interval time.Duration
	// BasePort for the nodes' listeners (default 27000).
	BasePort int
	// Timeout of one client request (default 1.5 s).
	Timeout  time.Duration
	Progress io.Writer
	Logger   *slog.Logger
	// Watchdog, if set, ends the process (exit status 2, goroutine stacks
	// in the run directory) when a run takes longer than TimeLimit plus
	// this. It sleeps with the nanosleep system call, not Go timers, so it
	// fires even if the run's own timers were to stall.
	Watchdog time.Duration
}

func (o *Options) fill() error {
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("jepsen: find the raftmq binary: %w", err)
		}
		o.Binary = exe
	}
	if o.MutantBinary == "" {
		o.MutantBinary = mutantSelf()
	}
	if o.Workload == "" {
		o.Workload = WorkloadQueue
	}
	if !slices.Contains(Workloads(), o.Workload) {
		return fmt.Errorf("jepsen: unknown workload %q (known: %s)", o.Workload, strings.Join(Workloads(), ", "))
	}
	if o.TimeLimit <= 0 {
		o.TimeLimit = 60 * time.Second
	}
	if o.Rate <= 0 {
		o.Rate = 200
	}
	if o.Queues <= 0 {
		o.Queues = 4
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.BasePort <= 0 {
		o.BasePort = 27000
	}
	if o.Timeout <= 0 {
		o.Timeout = 1500 * time.Millisecond
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Mode.Kind == "" {
		o.Mode = netfault.ProxyMode("no namespace entered")
	}
	if o.Out == "" {
		return errors.New("jepsen: no output directory")
	}
	return nil
}

// HarnessError marks a failure of the harness itself (exit status 2), as
// opposed to a violation found in the history.
type HarnessError struct{ Err error }

func (e *HarnessError) Error() string { return "jepsen: harness failure: " + e.Err.Error() }
func (e *HarnessError) Unwrap() error { return e.Err }

func harness(err error) error {
	if err == nil {
		return nil
	}
	var he *HarnessError
	if errors.As(err, &he) {
		return err
	}
	return &HarnessError{Err: err}
}

// Run runs one test and returns the checked results. The error is a
// *HarnessError when the harness could not run or check the test; results
// are still written as far as they go.
func Run(ctx context.Context, o Options) (history.Results, error) {
	if err := o.fill(); err != nil {
		return history.Results{}, harness(err)
	}
	if err := os.MkdirAll(filepath.Join(o.Out, "nodes"), 0o755); err != nil {
		return history.Results{}, harness(err)
	}
	if _, err := os.Stat(filepath.Join(o.Out, history.HistoryFile)); err == nil {
		return history.Results{}, harness(fmt.Errorf("%s already holds a run", o.Out))
	}
	meta := history.Meta{
		Workload: o.Workload, Nemesis: o.Nemesis, Seed: o.Seed, TimeLimit: o.TimeLimit.String(), Rate: o.Rate,
		Queues: o.Queues, Nodes: 3, NetMode: o.Mode.String(), Mutant: o.Mutant, Started: time.Now().UTC().Format(time.RFC3339),
		Dedupe: true,
	}
	if err := history.WriteJSON(filepath.Join(o.Out, history.RunFile), meta); err != nil {
		return history.Results{}, harness(err)
	}
	hw, err := history.Create(filepath.Join(o.Out, history.HistoryFile))
	if err != nil {
		return history.Results{}, harness(err)
	}
	nw, err := history.Create(filepath.Join(o.Out, history.NemesisFile))
	if err != nil {
		hw.Close()
		return history.Results{}, harness(err)
	}
	rec := newRecorder(hw, nw)
	t := &test{o: o, rec: rec, log: o.Logger}
	// Before the watchdog starts: this may build the mutant binary.
	if t.bin, t.faults, err = o.brokerBinary(ctx); err != nil {
		hw.Close()
		nw.Close()
		return history.Results{}, harness(err)
	}
	if o.Watchdog > 0 {
		stop := watchdog(o.Out, o.TimeLimit+o.Watchdog, o.Progress)
		defer stop()
	}
	runErr := t.run(ctx, &meta)
	hw.Close()
	nw.Close()
	meta.Duration = rec.now()
	if err := history.WriteJSON(filepath.Join(o.Out, history.RunFile), meta); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		res := history.Results{Error: runErr.Error()}
		_ = history.WriteJSON(filepath.Join(o.Out, history.ResultsFile), res)
		return res, harness(runErr)
	}
	res, err := Check(o.Out, t.health())
	return res, harness(err)
}

// Check checks a recorded run directory (again) and rewrites results.json
// and report.html. extra adds checkers computed while the run was live.
func Check(dir string, extra map[string]history.CheckerResult) (history.Results, error) {
	run, err := history.Load(dir)
	if err != nil {
		return history.Results{}, err
	}
	if extra == nil {
		// Keep the live checkers of an earlier check.
		var old history.Results
		if b, err := os.ReadFile(filepath.Join(dir, history.ResultsFile)); err == nil {
			_ = json.Unmarshal(b, &old)
			for name, r := range old.Checkers {
				if name == healthChecker {
					extra = map[string]history.CheckerResult{name: r}
				}
			}
		}
	}
	res := checker.Check(run, checker.Options{VisualizePath: filepath.Join(dir, "linearizability.html")})
	for name, r := range extra {
		res.Checkers[name] = r
		res.Valid = res.Valid && r.Valid
	}
	if err := history.WriteJSON(filepath.Join(dir, history.ResultsFile), res); err != nil {
		return res, err
	}
	if err := report.Write(dir, run, res); err != nil {
		return res, err
	}
	return res, nil
}

const healthChecker = "cluster-health"

// afterHeal is the least time the workload runs after the final heal.
const afterHeal = 8 * time.Second

// test is one run in progress.
type test struct {
	o      Options
	bin    string // the brokers' executable
	faults bool   // the brokers have the fault endpoint
	rec    *recorder
	log    *slog.Logger
	net    *netfault.Net
	g      *localgroup.Group
	env    *env
}

func (t *test) run(ctx context.Context, meta *history.Meta) (err error) {
	o := t.o
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x9e3779b97f4a7c15))
	t.net, err = netfault.New(o.Mode, 3, t.log)
	if err != nil {
		return err
	}
	defer t.net.Close()
	nodeIP := func(id uint64) string { return t.net.NodeIP(int(id)) }
	routes := map[int][]string{}
	args := []string{"--segment-size", "16777216", "--auto-create-topics=false"}
	if t.faults {
		args = append(args, "--fault-endpoint")
	}
	if powerLossMode(o.Nemesis) {
		args = append(args, "--power-loss")
	}
	if o.Mutant != "" {
		args = append(args, "--mutant", o.Mutant)
	}
	if slices.Contains(o.Nemesis, NemHostile) {
		// A frame must arrive within a fault's time once started, so the
		// checker can see the node close what stalls mid-frame.
		args = append(args, "--client-read-timeout", hostileReadTimeout.String())
	}
	if o.Workload == WorkloadTransaction {
		// Check-backs within a short run.
		args = append(args, "--transaction-timeout", txnTimeout.String(), "--transaction-check-interval", txnCheckInterval.String())
	}
	t.env = &env{rec: t.rec, rng: rng, stopped: map[int]bool{}, corrupted: map[int]bool{}, joinArgs: map[int]bool{},
		powerLoss: powerLossMode(o.Nemesis),
		log:       func(msg string, a ...any) { t.log.Info("jepsen: "+msg, a...) }}
	t.g = localgroup.New(localgroup.Config{
		Binary: t.bin, Env: o.Env, Dir: filepath.Join(o.Out, "nodes"), BasePort: o.BasePort, Nodes: 3,
		Args: args, Host: nodeIP,
		NodeArgs: func(id uint64) []string {
			out := append([]string(nil), routes[int(id)]...)
			t.env.mu.Lock()
			if t.env.joinArgs[int(id)] {
				out = append(out, "--join")
			}
			t.env.mu.Unlock()
			return out
		},
	})
	// Every directed link goes through its own proxy.
	for _, from := range t.g.Nodes {
		for _, to := range t.g.Nodes {
			if from.ID == to.ID {
				continue
			}
			c, err := t.net.AddLink("client", int(from.ID), int(to.ID), to.Client)
			if err != nil {
				return err
			}
			r, err := t.net.AddLink("raft", int(from.ID), int(to.ID), to.Raft)
			if err != nil {
				return err
			}
			routes[int(from.ID)] = append(routes[int(from.ID)], "--route", fmt.Sprintf("%d=%s/%s", to.ID, c, r))
		}
	}
	t.env.g, t.env.net = t.g, t.net
	fmt.Fprintf(o.Progress, "jepsen: network mode %s; nodes %s; run dir %s; brokers %s\n", o.Mode, strings.Join(t.g.Addrs(), " "), o.Out, t.bin)
	if slices.Contains(o.Nemesis, NemDiskFull) && DiskFullAvailable() {
		undo, err := mountDiskFull(t.g)
		if err != nil {
			return err
		}
		defer undo() // after StopAll, deferred below
		t.env.diskTmpfs = true
	}
	if err := t.g.Start(); err != nil {
		return err
	}
	defer t.g.StopAll()
	if _, err := t.g.WaitLeader(30 * time.Second); err != nil {
		return err
	}
	t.env.admin, err = client.New(client.Options{Addrs: t.g.Addrs(), RequestTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer t.env.admin.Close()
	t.env.members = t.env.admin
	if err := retry(ctx, 20*time.Second, func(ctx context.Context) error {
		return t.env.admin.CreateTopic(ctx, topic, o.Queues)
	}); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	for _, et := range extraTopics(o.Workload, o.Queues) {
		if et.missingOK {
			continue
		}
		if err := retry(ctx, 20*time.Second, func(ctx context.Context) error {
			return t.env.admin.CreateTopic(ctx, et.name, et.queues)
		}); err != nil {
			return fmt.Errorf("create topic %s: %w", et.name, err)
		}
	}

	// The workload runs for the whole time limit; faults stop a quiet
	// period before its end so availability after healing is measured.
	quiet := min(10*time.Second, o.TimeLimit/4)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w := &workload{name: o.Workload, rec: t.rec, addrs: t.g.Addrs(), queues: o.Queues, seed: o.Seed, timeout: o.Timeout, log: t.log,
		tokens: limiter(wctx, o.Rate)}
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() { defer wg.Done(); werr = w.run(wctx) }()
	stopProgress := t.progress(wctx)
	stopWatch := t.watch()
	defer stopWatch()
	nctx, ncancel := context.WithTimeout(ctx, o.TimeLimit-quiet)
	nemErr := t.nemesis(nctx, rng)
	ncancel()
	meta.Healed = t.rec.now()
	t.rec.setFault("healed")
	healErr := t.healAll(ctx)
	// The workload runs to the time limit, and on for at least
	// afterHeal once everything is healed (restarting every node after a
	// power cut can take seconds), so availability is always measured.
	end := max(o.TimeLimit, time.Duration(t.rec.now())+afterHeal)
	select {
	case <-time.After(end - time.Duration(t.rec.now())):
	case <-ctx.Done():
	}
	wcancel()
	wg.Wait()
	stopProgress()
	if err := errors.Join(nemErr, healErr, werr); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if due := w.pendingUntil(); due > 0 {
		// Delayed messages still waiting: drain once all are due.
		if wait := time.Duration(due-t.rec.now()) + delayMargin; wait > 0 {
			fmt.Fprintf(o.Progress, "jepsen: waiting %v for the last delayed messages to be due\n", wait.Round(100*time.Millisecond))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	fmt.Fprintf(o.Progress, "jepsen: workload done; waiting for every node to catch up, then draining\n")
	if err := t.drain(ctx); err != nil {
		return err
	}
	return t.replicas()
}

func retry(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var err error
	for {
		if err = f(rctx); err == nil {
			return nil
		}
		select {
		case <-rctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// nemesis injects faults of the enabled kinds, one at a time: wait about
// Interval, inject, hold about Interval, heal. It returns when ctx ends
// (after healing the current fault).
func (t *test) nemesis(ctx context.Context, rng *rand.Rand) error {
	if len(t.o.Nemesis) == 0 {
		<-ctx.Done()
		return nil
	}
	jitter := func() time.Duration {
		return t.o.Interval/2 + time.Duration(rng.Int64N(int64(t.o.Interval)))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(jitter()):
		}
		kind := t.o.Nemesis[rng.IntN(len(t.o.Nemesis))]
		// Heals run after ctx ends too: give the fault a context that
		// outlives the schedule.
		f, err := t.env.inject(context.WithoutCancel(ctx), kind)
		if err != nil {
			t.log.Warn("jepsen: inject failed", "kind", kind, "err", err)
			t.rec.event(history.Event{Kind: kind, Start: t.rec.now(), End: t.rec.now(), Error: err.Error(), Description: "injection failed"})
			continue
		}
		t.rec.setFault(f.ev.Description)
		t.log.Info("jepsen: fault", "kind", kind, "what", f.ev.Description)
		select {
		case <-ctx.Done():
		case <-time.After(jitter()):
		}
		if err := f.heal(); err != nil {
			f.ev.Error = err.Error()
			t.log.Warn("jepsen: heal failed", "kind", kind, "err", err)
		}
		f.ev.End = t.rec.now()
		t.rec.event(f.ev)
		t.rec.setFault("")
	}
}

// healAll undoes every fault: links, pauses, skews, stopped nodes.
func (t *test) healAll(ctx context.Context) error {
	var errs []error
	errs = append(errs, t.net.Heal())
	t.net.ClearLinkFaults()
	for _, n := range t.g.Nodes {
		if n.Running() {
			_ = t.g.Resume(n.ID)
		} else if err := t.env.restart(ctx, int(n.ID)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range t.g.Nodes {
		if t.faults && n.Running() {
			_ = t.env.faultReq(ctx, int(n.ID), cluster.FaultRequest{Reset: true})
		}
	}
	t.rec.event(history.Event{Kind: "heal", Start: t.rec.now(), End: t.rec.now(), Description: "heal every fault"})
	return errors.Join(errs...)
}

// progress prints a line every 5 s until the returned stop is called.
func (t *test) progress(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(5 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			el := time.Duration(t.rec.now()).Truncate(time.Second)
			f := t.rec.currentFault()
			if f == "" {
				f = "none"
			}
			fmt.Fprintf(t.o.Progress, "jepsen: %v/%v  acked sends %d  indeterminate %d  failed %d  fault: %s\n",
				el, t.o.TimeLimit, t.rec.okSends.Load(), t.rec.infoOps.Load(), t.rec.failOps.Load(), f)
		}
	}()
	return func() { close(done); wg.Wait() }
}

// health is the cluster-health checker: nodes that exited without the
// harness stopping them, and nodes that did not come back.
func (t *test) health() map[string]history.CheckerResult {
	t.env.mu.Lock()
	defer t.env.mu.Unlock()
	r := history.CheckerResult{Valid: len(t.env.crashes) == 0, Errors: t.env.crashes,
		Counts: map[string]int64{"crashes": int64(len(t.env.crashes)), "corrupt-refusals": int64(t.env.refusals)}}
	return map[string]history.CheckerResult{healthChecker: r}
}

// watch reports every broker process that exits without the harness
// stopping it on purpose (env.stopping), until the returned stop is
// called. It reads each node's log of ended processes, so a crash is
// counted even when the harness restarts the node before the watcher
// looks (the closing heal restarts every node that is down).
func (t *test) watch() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		seen := map[uint64]int{} // node -> its exits looked at
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			for _, n := range t.g.Nodes {
				for _, x := range n.Exits(seen[n.ID]) {
					// The harness marks a process before signalling it,
					// and a restarted corrupted node's process right
					// after starting it: give a fresh exit a moment.
					if time.Since(x.At) < 50*time.Millisecond {
						break
					}
					seen[n.ID]++
					if t.env.expectedExit(x.PID) {
						continue
					}
					t.crashed(n, x)
					t.rec.event(history.Event{Kind: "crash", Start: t.rec.now(), End: t.rec.now(), Nodes: []int{int(n.ID)},
						Description: fmt.Sprintf("n%d exited on its own (%s)", n.ID, x.How)})
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// unhealthy notes a cluster-health violation.
func (t *test) unhealthy(msg string) {
	t.env.mu.Lock()
	defer t.env.mu.Unlock()
	t.env.crashes = append(t.env.crashes, msg)
}

// crashed notes a node's process that exited on its own.
func (t *test) crashed(n *localgroup.Node, x localgroup.Exit) {
	t.unhealthy(fmt.Sprintf("n%d exited on its own at %.1fs (%s); last log lines:\n%s", n.ID,
		float64(t.rec.now())/1e9, x.How, localgroup.Tail(n.LogPath, 5)))
}

// drain waits until every node has applied what the leader committed, then
// reads every queue from every node to its end.
func (t *test) drain(ctx context.Context) error {
	var leader uint64
	err := retry(ctx, 30*time.Second, func(context.Context) error {
		for _, n := range t.g.Nodes {
			if !n.Running() {
				return fmt.Errorf("n%d is not running after healing: %s", n.ID, n.Exited())
			}
		}
		sts := t.g.Statuses()
		var commit uint64
		leader = 0
		for _, st := range sts {
			if st != nil && st.LeaderReady {
				leader, commit = st.Status.ID, st.Status.Commit
			}
		}
		if leader == 0 {
			return errors.New("no ready leader")
		}
		for i, st := range sts {
			if st == nil || st.Status.Applied < commit {
				return fmt.Errorf("n%d has not applied %d yet", i+1, commit)
			}
		}
		return nil
	})
	if err != nil {
		// Not fatal to the harness: the drain shows what each node has,
		// and the checkers judge it.
		t.unhealthy(fmt.Sprintf("the group did not converge within 30 s of healing: %v", err))
	}
	c, err := client.New(client.Options{Addrs: t.g.Addrs(), RequestTimeout: 3 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	pc := c.NewPullConsumer("jepsen-drain")
	proc := t.rec.process()
	topics := append([]extraTopic{{name: topic, queues: t.o.Queues}}, extraTopics(t.o.Workload, t.o.Queues)...)
	for i, n := range t.g.Nodes {
		if !n.Running() {
			continue // reported by cluster-health; its drain is missing
		}
		for _, tp := range topics {
			t.drainTopic(ctx, pc, proc, i+1, n.Client, tp)
		}
	}
	return nil
}

// drainTopic reads every queue of tp from one node to its end: Poll ops of
// the main topic, TopicPoll ops of others, all marked Drain.
func (t *test) drainTopic(ctx context.Context, pc *client.PullConsumer, proc, node int, addr string, tp extraTopic) {
	kind, name := history.Poll, ""
	if tp.name != topic {
		kind, name = history.TopicPoll, tp.name
	}
	for q := 0; q < tp.queues; q++ {
		var from int64
		for tries := 0; tries < 20; {
			o := history.Op{Process: proc, Kind: kind, Topic: name, Queue: q, Offset: from, Node: node, Drain: true, Invoke: t.rec.now()}
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			res, err := pc.PullWith(pctx, client.PullRequest{Addr: addr, Topic: tp.name, Queue: int32(q), Offset: from, Max: 256})
			cancel()
			o.Complete, o.Outcome = t.rec.now(), history.OK
			if err != nil && tp.missingOK && topicMissing(err) {
				// Never created on this node: empty.
				t.rec.op(o)
				break
			}
			if err != nil {
				o.Outcome, o.Error = history.Fail, errString(err)
				t.rec.op(o)
				tries++
				time.Sleep(100 * time.Millisecond)
				continue
			}
			o.Next = res.NextBeginOffset
			for _, m := range res.Messages {
				o.Msgs = append(o.Msgs, history.Msg{Offset: m.QueueOffset, Value: string(m.Body)})
			}
			t.rec.op(o)
			if len(res.Messages) == 0 {
				break
			}
			from = res.NextBeginOffset
		}
	}
}

// replicas records each node's commit index, stops the group and
// summarises every node's log into replicas.json.
func (t *test) replicas() error {
	commits := map[uint64]uint64{}
	for i, st := range t.g.Statuses() {
		if st != nil {
			commits[uint64(i+1)] = st.Status.Commit
		}
	}
	for _, n := range t.g.Nodes {
		t.env.stopping(int(n.ID))
	}
	if err := t.g.StopAll(); err != nil {
		t.log.Warn("jepsen: stop", "err", err)
	}
	var out []history.Replica
	crc := crc32.MakeTable(crc32.Castagnoli)
	for _, n := range t.g.Nodes {
		r := history.Replica{Node: int(n.ID), Commit: commits[n.ID]}
		rep, err := commitlog.Inspect(vfs.ReadOnly(vfs.Default()), filepath.Join(n.Dir, "commitlog"), func(e commitlog.EntryRef) error {
			if r.First == 0 {
				r.First = e.Index
			}
			r.Entries = append(r.Entries, history.Entry{Index: e.Index, Term: e.Term, Sum: sum(crc, e.Type, e.Body)})
			return nil
		})
		switch {
		case err != nil:
			r.Problem = err.Error()
		case rep.Problem != nil:
			r.Problem = rep.Problem.Error()
		}
		out = append(out, r)
	}
	return history.WriteJSON(filepath.Join(t.o.Out, history.ReplicasFile), out)
}

// watchdog exits the process with status 2 if it is not stopped within d,
// after writing every goroutine's stack to dir/harness-stacks.txt.
func watchdog(dir string, d time.Duration, progress io.Writer) (stop func()) {
	var stopped atomic.Bool
	go func() {
		runtime.LockOSThread()
		for left := d; left > 0; left -= time.Second {
			ts := unix.NsecToTimespec(int64(time.Second))
			_ = unix.Nanosleep(&ts, nil)
			if stopped.Load() {
				return
			}
		}
		buf := make([]byte, 16<<20)
		buf = buf[:runtime.Stack(buf, true)]
		path := filepath.Join(dir, "harness-stacks.txt")
		_ = os.WriteFile(path, buf, 0o644)
		fmt.Fprintf(progress, "jepsen: HARNESS HUNG: run exceeded %v; goroutine stacks in %s\n", d, path)
		os.Exit(2)
	}()
	return func() { stopped.Store(true) }
}

// topicMissing reports whether a broker answered TOPIC_NOT_EXIST.
func topicMissing(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Code == remoting.TopicNotExist
}
