package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
}

func (t *popTrace) stamp(s int, now time.Time) {
	t.at[s].CompareAndSwap(0, int64(now.Sub(t.start))+1)
}

// batched stamps t batched into the entry traced by e, unless an earlier
// entry took one of its ops.
func (t *popTrace) batched(now time.Time, e *raftlog.Trace) {
	if t.entry.CompareAndSwap(nil, e) {
		t.stamp(popBatched, now)
	}
}

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
	return &popTrace{ack: ack, start: start}
}

// answered stamps t answered and keeps it (t nil: nothing).
func (s *popTraces) answered(t *popTrace) {
	if t == nil {
		return
	}
	t.stamp(popAnswered, time.Now())
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
// microseconds.
type PopTraceReport struct {
	Every  uint64                   `json:"every"`
	Stages []string                 `json:"stages"`
	Kinds  map[string]PopTraceStats `json:"kinds"`
}

// PopTraceStats summarizes the traces of one kind.
type PopTraceStats struct {
	Count    int       `json:"count"`
	P50US    []float64 `json:"p50Us"`
	P99US    []float64 `json:"p99Us"`
	TotalP50 float64   `json:"totalP50Us"`
	TotalP99 float64   `json:"totalP99Us"`
}

func (s *popTraces) report() PopTraceReport {
	s.mu.Lock()
	kept := slices.Clone(s.kept)
	s.mu.Unlock()
	r := PopTraceReport{Every: s.every.Load(), Stages: popTraceStages, Kinds: map[string]PopTraceStats{}}
	byKind := map[string][][]time.Duration{}
	for _, t := range kept {
		d, ok := t.durations()
		if !ok {
			continue
		}
		k := "pop"
		if t.ack {
			k = "ack"
		}
		byKind[k] = append(byKind[k], d)
	}
	q := func(v []time.Duration, p float64) float64 {
		slices.Sort(v)
		return float64(v[int(p*float64(len(v)-1))].Nanoseconds()) / 1e3
	}
	for k, ds := range byKind {
		st := PopTraceStats{Count: len(ds)}
		col := make([]time.Duration, len(ds))
		for i := range popTraceStages {
			for j, d := range ds {
				col[j] = d[i]
			}
			st.P50US, st.P99US = append(st.P50US, q(col, 0.5)), append(st.P99US, q(col, 0.99))
		}
		for j, d := range ds {
			col[j] = 0
			for _, x := range d {
				col[j] += x
			}
		}
		st.TotalP50, st.TotalP99 = q(col, 0.5), q(col, 0.99)
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
		_ = json.NewEncoder(w).Encode(b.pop.traces.report())
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
