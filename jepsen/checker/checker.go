// Package checker judges a recorded chaos run offline. Check runs every
// checker on a history.Run and returns the history.Results written to
// results.json:
//
//   - final-log: the drain reads of every node agree, giving the
//     authoritative final content of each queue;
//   - linearizable: porcupine on a per-queue log model (and a last-writer-
//     wins register per consumer group and queue), after indeterminate
//     sends were patched against the final log;
//   - total-queue: Jepsen's "what goes in must come out" counts (lost,
//     unexpected, duplicated, recovered) on the final log;
//   - read-consistency: every read and every acknowledged offset agrees
//     with the final log (inconsistent offsets, reads of uncommitted data,
//     G1a);
//   - consumer: consumers never skip (poll-skip, nonmonotonic-poll,
//     int-poll-skip) and committed offsets are durable;
//   - replica-agreement: the committed raft log prefix is identical on all
//     nodes;
//   - availability: the cluster accepts writes soon after the faults heal;
//   - consumer-group: push consumers of consumer groups get every
//     acknowledged send, orderly groups in queue order with one owner per
//     queue, committed offsets never go back, and nodes keep their member
//     lists (groups.go);
//   - delay (delay workload): every acknowledged delayed or timer message
//     is in the drained final log of its topic, none is stored twice
//     (except values the client sent again), and no poll saw one before
//     its send's invocation plus its delay, minus DelayTolerance (not
//     judged with the clock nemesis) (delay.go);
//   - transaction (transaction workload): a transaction committed by its
//     producer or by a check-back is in the final log exactly once; a
//     rolled-back one, or one nothing decided (unknown and never checked
//     back, or a half message whose send failed), is in no poll and not in
//     the final log (transaction.go);
//   - retry (retry workload): a value a push consumer fails N times is
//     consumed after exactly N failures (reconsume count N) if N is at
//     most the consumer's MaxReconsumeTimes, and is otherwise in the
//     group's %DLQ% topic and never consumed; never lost, never both
//     (retry.go);
//   - pop (pop workload): every acknowledged send is acked by each
//     SimpleConsumer group, no message is handed out while an earlier
//     delivery still hides it (unless a fault explains it), none is
//     delivered again after an ok ack, and orderly groups receive each
//     queue in order (pop.go).
//
// The delay, transaction, retry and pop workloads' ops (history.DelaySend,
// TopicPoll, TxnSend, TxnCheck, RetrySend, RetryDeliver, Pop*) name topics of
// their own; the checkers of the main topic ignore them, and the
// workloads' own checkers build their topics' final logs from the
// TopicPoll drains as final-log does.
//
// Every checker tolerates empty or missing inputs: it then reports a Note
// rather than failing or panicking.
package checker

import (
	"fmt"
	"math"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// Checker names, the keys of history.Results.Checkers.
const (
	FinalLogChecker         = "final-log"
	LinearizableChecker     = "linearizable"
	TotalQueueChecker       = "total-queue"
	ReadConsistencyChecker  = "read-consistency"
	ConsumerChecker         = "consumer"
	ReplicaAgreementChecker = "replica-agreement"
	AvailabilityChecker     = "availability"
)

// Defaults of Options.
const (
	DefaultTimeout            = 60 * time.Second
	DefaultMaxErrors          = 20
	DefaultAvailabilityWindow = 15 * time.Second
)

// Options configures Check. The zero value selects every default.
type Options struct {
	// Timeout bounds porcupine's search (0: DefaultTimeout; negative: no
	// limit). A search that runs out of time makes linearizable invalid.
	Timeout time.Duration
	// MaxErrors is how many errors each checker lists at most (0:
	// DefaultMaxErrors). Further violations are only counted.
	MaxErrors int
	// VisualizePath, if set, is where porcupine's HTML visualization of
	// the linearizability check is written (with every nemesis event as an
	// annotation tagged "nemesis").
	VisualizePath string
	// AvailabilityWindow is how soon after Meta.Healed an acknowledged send
	// must complete (0: DefaultAvailabilityWindow).
	AvailabilityWindow time.Duration
}

// withDefaults fills the zero fields of o.
func (o Options) withDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		o.Timeout = 0 // porcupine: no limit
	}
	if o.MaxErrors <= 0 {
		o.MaxErrors = DefaultMaxErrors
	}
	if o.AvailabilityWindow <= 0 {
		o.AvailabilityWindow = DefaultAvailabilityWindow
	}
	return o
}

// Check runs every checker on run and returns their verdicts. Results.Valid
// is true only if every checker found the history valid. A nil run is
// treated as an empty one.
func Check(run *history.Run, opts Options) history.Results {
	opts = opts.withDefaults()
	if run == nil {
		run = &history.Run{}
	}
	res := history.Results{
		Checkers: make(map[string]history.CheckerResult),
		Ops:      countOps(run.Ops),
		Faults:   countFaults(run.Events),
	}

	var final *FinalLog
	res.Checkers[FinalLogChecker] = guard(func() history.CheckerResult {
		var r history.CheckerResult
		final, r = checkFinalLog(run, opts)
		return r
	})
	res.Checkers[LinearizableChecker] = guard(func() history.CheckerResult {
		return checkLinearizable(run, final, opts)
	})
	res.Checkers[TotalQueueChecker] = guard(func() history.CheckerResult {
		return checkTotalQueue(run, final, opts)
	})
	res.Checkers[ReadConsistencyChecker] = guard(func() history.CheckerResult {
		return checkReadConsistency(run, final, opts)
	})
	res.Checkers[ConsumerChecker] = guard(func() history.CheckerResult {
		return checkConsumer(run, final, opts)
	})
	res.Checkers[ReplicaAgreementChecker] = guard(func() history.CheckerResult {
		return checkReplicaAgreement(run, opts)
	})
	res.Checkers[AvailabilityChecker] = guard(func() history.CheckerResult {
		return checkAvailability(run, opts)
	})
	res.Checkers[ConsumerGroupChecker] = guard(func() history.CheckerResult {
		return checkConsumerGroups(run, opts)
	})
	res.Checkers[DelayChecker] = guard(func() history.CheckerResult {
		return checkDelay(run, opts)
	})
	res.Checkers[TransactionChecker] = guard(func() history.CheckerResult {
		return checkTransaction(run, opts)
	})
	res.Checkers[RetryChecker] = guard(func() history.CheckerResult {
		return checkRetry(run, opts)
	})
	res.Checkers[PopChecker] = guard(func() history.CheckerResult {
		return checkPop(run, opts)
	})

	res.Valid = true
	for _, c := range res.Checkers {
		res.Valid = res.Valid && c.Valid
	}
	return res
}

// guard runs one checker and turns a panic into an invalid result, so one
// broken checker does not hide the verdicts of the others.
func guard(f func() history.CheckerResult) (r history.CheckerResult) {
	defer func() {
		if p := recover(); p != nil {
			r = history.CheckerResult{
				Valid:  false,
				Errors: []string{fmt.Sprintf("checker panicked: %v", p)},
				Note:   "internal error: " + firstLines(string(debug.Stack()), 12),
			}
		}
	}()
	return f()
}

// firstLines returns at most n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// countOps counts operations by "kind.outcome".
func countOps(ops []history.Op) map[string]int64 {
	m := make(map[string]int64)
	for i := range ops {
		m[string(ops[i].Kind)+"."+string(ops[i].Outcome)]++
	}
	return m
}

// countFaults counts nemesis events by kind, leaving out "heal" events and the "crash" events the harness records when a node exits on its own.
func countFaults(events []history.Event) map[string]int64 {
	m := make(map[string]int64)
	for _, e := range events {
		if e.Kind == "heal" || e.Kind == "crash" {
			continue
		}
		m[e.Kind]++
	}
	return m
}

// report accumulates one checker's verdict: counts, errors (at most max of
// them listed) and notes.
type report struct {
	res     history.CheckerResult
	max     int
	omitted int
	notes   []string
}

// newReport starts a valid result listing at most max errors.
func newReport(max int) *report {
	return &report{res: history.CheckerResult{Valid: true, Counts: make(map[string]int64)}, max: max}
}

// errorf records a violation: the result becomes invalid and the message is
// listed if there is room.
func (r *report) errorf(format string, args ...any) {
	r.res.Valid = false
	if len(r.res.Errors) < r.max {
		r.res.Errors = append(r.res.Errors, fmt.Sprintf(format, args...))
		return
	}
	r.omitted++
}

// notef adds a sentence to the result's Note.
func (r *report) notef(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// add adds n to the count named k.
func (r *report) add(k string, n int64) { r.res.Counts[k] += n }

// set sets the count named k.
func (r *report) set(k string, n int64) { r.res.Counts[k] = n }

// done returns the finished result.
func (r *report) done() history.CheckerResult {
	if r.omitted > 0 {
		r.notef("%d more errors not listed", r.omitted)
	}
	r.res.Note = strings.Join(r.notes, "; ")
	if len(r.res.Counts) == 0 {
		r.res.Counts = nil
	}
	return r.res
}

// secs formats a time in nanoseconds as seconds ("12.345s"; "+inf" for
// math.MaxInt64).
func secs(ns int64) string {
	if ns == math.MaxInt64 {
		return "+inf"
	}
	return fmt.Sprintf("%.3fs", float64(ns)/1e9)
}

// maxTime is the latest time mentioned by the run (its duration if known).
func maxTime(run *history.Run) int64 {
	t := run.Meta.Duration
	for i := range run.Ops {
		if c := run.Ops[i].Complete; c > t && c != math.MaxInt64 {
			t = c
		}
		if c := run.Ops[i].Invoke; c > t {
			t = c
		}
	}
	for _, e := range run.Events {
		if e.End > t {
			t = e.End
		}
		if e.Start > t {
			t = e.Start
		}
	}
	return t
}

// Summary renders results as a few lines of text for the CLI: the verdict,
// operation and fault counts, then one line per checker with its counts,
// followed by its note and errors when it has any.
// summaryErrors is how many errors per checker Summary prints.
const summaryErrors = 5

func Summary(r history.Results) string {
	var b strings.Builder
	verdict := "VALID"
	if !r.Valid {
		verdict = "INVALID"
	}
	fmt.Fprintf(&b, "verdict: %s\n", verdict)
	if r.Error != "" {
		fmt.Fprintf(&b, "harness error: %s\n", r.Error)
	}
	if len(r.Ops) > 0 {
		fmt.Fprintf(&b, "ops: %s\n", formatCounts(r.Ops))
	}
	if len(r.Faults) > 0 {
		fmt.Fprintf(&b, "faults: %s\n", formatCounts(r.Faults))
	}
	names := make([]string, 0, len(r.Checkers))
	width := 0
	for n := range r.Checkers {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	for _, n := range names {
		c := r.Checkers[n]
		v := "ok"
		if !c.Valid {
			v = "FAIL"
		}
		fmt.Fprintf(&b, "  %-*s %-4s %s\n", width, n, v, formatCounts(c.Counts))
		if c.Note != "" {
			fmt.Fprintf(&b, "  %-*s      note: %s\n", width, "", c.Note)
		}
		for i, e := range c.Errors {
			if i == summaryErrors {
				fmt.Fprintf(&b, "  %-*s      … %d more in results.json\n", width, "", len(c.Errors)-i)
				break
			}
			fmt.Fprintf(&b, "  %-*s      - %s\n", width, "", e)
		}
	}
	return b.String()
}

// formatCounts renders counts as "a=1 b=2", sorted by name.
func formatCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// queuesOf lists the queues of the run: 0..Meta.Queues-1 and every queue
// an operation names, sorted.
func queuesOf(run *history.Run) []int {
	set := make(map[int]bool)
	for q := 0; q < run.Meta.Queues; q++ {
		set[q] = true
	}
	for i := range run.Ops {
		set[run.Ops[i].Queue] = true
	}
	qs := make([]int, 0, len(set))
	for q := range set {
		qs = append(qs, q)
	}
	sort.Ints(qs)
	return qs
}
