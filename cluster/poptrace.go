package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/raftlog"
)

// Pop tracing: a sampled breakdown of a pop's or a batch ack's time on
// the leader, from its attempt's start to its answer, like the send
// path's (sendtrace.go): the handler's own stages, then its entry's
// stages in raft (a raftlog.Trace on the pop entry), then the handler
// again. One pop attempt or batch ack in every is traced (0: none; while
// it is 0 a request costs one atomic load); the last popTraceKeep answered
// traces are kept for /debug/poptrace.

// The handler's stamps of a pop trace.
const (
	popBuilt    = iota // checks, read barrier, queue locks and ops built; the ops are queued next
	popBatched         // the batcher packed the first of its ops into an entry (a slot was free)
	popWoken           // the handler had its ops' results
	popAnswered        // the answer was built (messages re-encoded with their receipts)
	popStamps
)

// popTraceStages names the durations a report gives, in order: each is
// the time from the stage before (the request's start for the first).
var popTraceStages = []string{
	"build",   // start to ops built
	"queue",   // built to batched: the batcher's hop and a slot's wait
	"propose", // batched to proposed by the raft owner goroutine
	// The entry's raftlog stages (raftlog/trace.go).
	"ready", "sent", "fsync", "ack1", "commit", "apply",
	"wake",   // applied to the handler having its results
	"answer", // woken to answered
}

// popTrace is one sampled pop attempt or batch ack.
type popTrace struct {
	ack   bool
	start time.Time
	at    [popStamps]atomic.Int64 // ns since start, +1 (0: not reached); the first stamp wins
	entry atomic.Pointer[raftlog.Trace]
	// ops and pops count the ops, and of them the pop ops, of the entry
	// the first of its ops went into (set with entry).
	ops, pops atomic.Int32
	// What ran beside it on this node: the GC cycles begun by its start
	// and by its answer, the store's checkpoints ended by its start and
	// begun by its answer (popTraces.beside).
	gc0, gc1, cpDone0, cpStarted1 uint64
}

func (t *popTrace) stamp(s int, now time.Time) {
	t.at[s].CompareAndSwap(0, int64(now.Sub(t.start))+1)
}

// batched stamps t batched into the entry traced by e, of ops ops (pops
// of them pop ops), unless an earlier entry took one of its ops.
func (t *popTrace) batched(now time.Time, e *raftlog.Trace, ops, pops int) {
	if t.entry.CompareAndSwap(nil, e) {
		t.ops.Store(int32(ops))
		t.pops.Store(int32(pops))
		t.stamp(popBatched, now)
	}
}

// gcOverlap reports whether a GC cycle ran while t was under way.
func (t *popTrace) gcOverlap() bool { return t.gc1 > t.gc0 }

// checkpointOverlap reports whether a checkpoint of the store ran while
// t was under way: one begun by its answer and not ended by its start.
func (t *popTrace) checkpointOverlap() bool { return t.cpStarted1 > t.cpDone0 }

// durations returns the stages' durations (popTraceStages), ok false if
// the trace is incomplete.
func (t *popTrace) durations() ([]time.Duration, bool) {
	var at [popStamps]time.Duration
	for i := range at {
		v := t.at[i].Load()
		if v == 0 {
			return nil, false
		}
		at[i] = time.Duration(v - 1)
	}
	e := t.entry.Load()
	if e == nil {
		return nil, false
	}
	abs := []time.Duration{0, at[popBuilt], at[popBatched]}
	for s := raftlog.StageProposed; s <= raftlog.StageApplied; s++ {
		d, ok := e.At(s)
		if !ok {
			return nil, false
		}
		abs = append(abs, at[popBatched]+d)
	}
	abs = append(abs, at[popWoken], at[popAnswered])
	out := make([]time.Duration, len(abs)-1)
	for i := range out {
		out[i] = abs[i+1] - abs[i]
	}
	return out, true
}

type popTraceKey struct{}

// withPopTrace carries t (nil: not traced) to the pop's ops.
func withPopTrace(ctx context.Context, t *popTrace) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, popTraceKey{}, t)
}

func popTraceOf(ctx context.Context) *popTrace {
	t, _ := ctx.Value(popTraceKey{}).(*popTrace)
	return t
}

// popTraceKeep is how many answered traces a broker keeps.
const popTraceKeep = 4096

// popTraces samples pop attempts and batch acks.
type popTraces struct {
	every atomic.Uint64
	count atomic.Uint64
	// checkpoints, if set, counts the store's checkpoints begun and
	// ended (store.Store.Checkpoints).
	checkpoints func() (started, done uint64)

	mu   sync.Mutex
	kept []*popTrace
	next int
}

// sample returns a new trace of a request started at start if it is one
// of the sampled, else nil.
func (s *popTraces) sample(ack bool, start time.Time) *popTrace {
	n := s.every.Load()
	if n == 0 || s.count.Add(1)%n != 0 {
		return nil
	}
	t := &popTrace{ack: ack, start: start}
	t.gc0 = gcCycles()
	if s.checkpoints != nil {
		_, t.cpDone0 = s.checkpoints()
	}
	return t
}

// gcCycles returns the GC cycles begun since the process started.
func gcCycles() uint64 {
	m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return m[0].Value.Uint64()
}

// answered stamps t answered and keeps it (t nil: nothing).
func (s *popTraces) answered(t *popTrace) {
	if t == nil {
		return
	}
	t.stamp(popAnswered, time.Now())
	t.gc1 = gcCycles()
	if s.checkpoints != nil {
		t.cpStarted1, _ = s.checkpoints()
	}
	s.mu.Lock()
	if len(s.kept) < popTraceKeep {
		s.kept = append(s.kept, t)
	} else {
		s.kept[s.next] = t
		s.next = (s.next + 1) % popTraceKeep
	}
	s.mu.Unlock()
}

func (s *popTraces) reset(every uint64) {
	s.mu.Lock()
	s.kept, s.next = nil, 0
	s.every.Store(every)
	s.count.Store(0)
	s.mu.Unlock()
}

// PopTraceReport is what /debug/poptrace answers: per kind (pop, ack),
// the traces' count and each stage's (and the total's) p50 and p99 in
// microseconds, and what the slowest of them spent their time on.
type PopTraceReport struct {
	Every  uint64                   `json:"every"`
	Stages []string                 `json:"stages"`
	Kinds  map[string]PopTraceStats `json:"kinds"`
	// InlineAcks counts, since the node started, the batch acks it took
	// on a connection's reader and answered from the applier
	// (inlineBatchAck), traced or not.
	InlineAcks uint64 `json:"inlineAcks"`
}

// PopTraceStats summarizes the traces of one kind.
type PopTraceStats struct {
	Count    int       `json:"count"`
	P50US    []float64 `json:"p50Us"`
	P99US    []float64 `json:"p99Us"`
	TotalP50 float64   `json:"totalP50Us"`
	TotalP99 float64   `json:"totalP99Us"`
	// All is what every trace of the kind ran beside, for comparison
	// with Tail's.
	All PopTraceBeside `json:"all"`
	// Tail is the traces whose total is at or above the kind's p95.
	Tail PopTraceTail `json:"tail"`
}

// PopTraceTail describes the slowest traces of a kind.
type PopTraceTail struct {
	// FromUS is the kind's p95 total, the tail's lower bound.
	FromUS float64 `json:"fromUs"`
	Count  int     `json:"count"`
	// MeanUS is each stage's mean over the tail, in microseconds.
	MeanUS []float64 `json:"meanUs"`
	// Largest counts, by stage, the tail's traces in which that stage
	// took the most time.
	Largest map[string]int `json:"largest"`
	Beside  PopTraceBeside `json:"beside"`
}

// PopTraceBeside is what traces ran beside on the node, as fractions of
// them, and the mean size of their entries.
type PopTraceBeside struct {
	// GC: a garbage collection cycle began or ran during the request.
	GC float64 `json:"gc"`
	// Checkpoint: a checkpoint of the store (its syncs and bbolt commit)
	// ran during the request.
	Checkpoint float64 `json:"checkpoint"`
	// WithPop: the request's entry carried a pop op (a batch ack sharing
	// an entry with a pop, or a pop).
	WithPop float64 `json:"withPop"`
	// Ops is the mean count of ops in the request's entry.
	Ops float64 `json:"ops"`
}

// besideOf summarizes what ts ran beside.
func besideOf(ts []*popTrace) PopTraceBeside {
	var b PopTraceBeside
	if len(ts) == 0 {
		return b
	}
	for _, t := range ts {
		if t.gcOverlap() {
			b.GC++
		}
		if t.checkpointOverlap() {
			b.Checkpoint++
		}
		if t.pops.Load() > 0 {
			b.WithPop++
		}
		b.Ops += float64(t.ops.Load())
	}
	n := float64(len(ts))
	b.GC, b.Checkpoint, b.WithPop, b.Ops = b.GC/n, b.Checkpoint/n, b.WithPop/n, b.Ops/n
	return b
}

// popTraceTail is the share of a kind's traces, the slowest, that its
// tail describes.
const popTraceTail = 0.95

func (s *popTraces) report() PopTraceReport {
	s.mu.Lock()
	kept := slices.Clone(s.kept)
	s.mu.Unlock()
	r := PopTraceReport{Every: s.every.Load(), Stages: popTraceStages, Kinds: map[string]PopTraceStats{}}
	type traced struct {
		t     *popTrace
		d     []time.Duration
		total time.Duration
	}
	byKind := map[string][]traced{}
	for _, t := range kept {
		d, ok := t.durations()
		if !ok {
			continue
		}
		k := "pop"
		if t.ack {
			k = "ack"
		}
		var total time.Duration
		for _, x := range d {
			total += x
		}
		byKind[k] = append(byKind[k], traced{t, d, total})
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	q := func(v []time.Duration, p float64) float64 {
		slices.Sort(v)
		return us(v[int(p*float64(len(v)-1))])
	}
	for k, ts := range byKind {
		st := PopTraceStats{Count: len(ts)}
		col := make([]time.Duration, len(ts))
		for i := range popTraceStages {
			for j, x := range ts {
				col[j] = x.d[i]
			}
			st.P50US, st.P99US = append(st.P50US, q(col, 0.5)), append(st.P99US, q(col, 0.99))
		}
		all := make([]*popTrace, len(ts))
		for j, x := range ts {
			col[j], all[j] = x.total, x.t
		}
		st.TotalP50, st.TotalP99 = q(col, 0.5), q(col, 0.99)
		st.All = besideOf(all)
		from := col[int(popTraceTail*float64(len(col)-1))] // col is sorted
		tail := PopTraceTail{FromUS: us(from), MeanUS: make([]float64, len(popTraceStages)), Largest: map[string]int{}}
		var slow []*popTrace
		for _, x := range ts {
			if x.total < from {
				continue
			}
			slow = append(slow, x.t)
			for i, d := range x.d {
				tail.MeanUS[i] += us(d)
			}
			tail.Largest[popTraceStages[slices.Index(x.d, slices.Max(x.d))]]++
		}
		tail.Count = len(slow)
		for i := range tail.MeanUS {
			tail.MeanUS[i] /= float64(len(slow))
		}
		tail.Beside = besideOf(slow)
		st.Tail = tail
		r.Kinds[k] = st
	}
	return r
}

// servePopTrace answers GET with the report and POST ?every=N by setting
// the sampling (and forgetting the traces kept).
func (b *Broker) servePopTrace(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		r := b.pop.traces.report()
		r.InlineAcks = b.pop.inlineAcks.Load()
		_ = json.NewEncoder(w).Encode(r)
	case http.MethodPost:
		n, err := strconv.ParseUint(r.URL.Query().Get("every"), 10, 64)
		if err != nil {
			http.Error(w, fmt.Sprintf("every: want a count of pops and batch acks (0: off): %v", err), http.StatusBadRequest)
			return
		}
		b.pop.traces.reset(n)
		b.log.Info("cluster: pop tracing set", "every", n)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "GET or POST ?every=N", http.StatusMethodNotAllowed)
	}
}
