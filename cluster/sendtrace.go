package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/raftlog"
)

// sendTraces samples sends for the per-stage latency breakdown: one send
// in every is traced (0: none), decided when the send is received, and
// the last sendTraceKeep answered traces are kept for /debug/sendtrace.
// While every is 0 a send costs one atomic load.
type sendTraces struct {
	every atomic.Uint64
	count atomic.Uint64

	mu   sync.Mutex
	ring []*raftlog.Trace
	next int
	full bool
}

// sendTraceKeep is how many answered traces a broker keeps.
const sendTraceKeep = 8192

// sample returns a new trace for a send received at start if it is one
// of the sampled, else nil.
func (s *sendTraces) sample(start time.Time) *raftlog.Trace {
	n := s.every.Load()
	if n == 0 || s.count.Add(1)%n != 0 {
		return nil
	}
	return raftlog.NewTrace(start)
}

// answered stamps tr answered and keeps it.
func (s *sendTraces) answered(tr *raftlog.Trace) {
	tr.Stamp(raftlog.StageAnswered, time.Now())
	s.mu.Lock()
	if s.ring == nil {
		s.ring = make([]*raftlog.Trace, sendTraceKeep)
	}
	s.ring[s.next] = tr
	s.next = (s.next + 1) % len(s.ring)
	s.full = s.full || s.next == 0
	s.mu.Unlock()
}

// reset sets the sampling to one send in every (0: off) and forgets the
// traces kept.
func (s *sendTraces) reset(every uint64) {
	s.mu.Lock()
	s.ring, s.next, s.full = nil, 0, false
	s.every.Store(every)
	s.count.Store(0)
	s.mu.Unlock()
}

// SendTraceReport is what /debug/sendtrace answers: the sampling and the
// kept traces, oldest first.
type SendTraceReport struct {
	Every  uint64   `json:"every"`
	Stages []string `json:"stages"`
	// Samples hold, per complete trace, the microseconds spent between
	// consecutive stages (Stages[i] to Stages[i+1]), which add up to
	// TotalUS, and when the second follower acknowledged (-1: not yet).
	Samples []SendTraceSample `json:"samples"`
}

// SendTraceSample is one traced send.
type SendTraceSample struct {
	StagesUS  []float64 `json:"stagesUs"`
	TotalUS   float64   `json:"totalUs"`
	SecondAck float64   `json:"secondAckUs"`
}

func (s *sendTraces) report() SendTraceReport {
	s.mu.Lock()
	var trs []*raftlog.Trace
	if s.full {
		trs = append(trs, s.ring[s.next:]...)
	}
	if s.ring != nil {
		trs = append(trs, s.ring[:s.next]...)
	}
	s.mu.Unlock()
	r := SendTraceReport{Every: s.every.Load(), Stages: raftlog.StageNames[:], Samples: []SendTraceSample{}}
	for _, tr := range trs {
		d, ok := tr.Stages()
		if !ok {
			continue
		}
		smp := SendTraceSample{StagesUS: make([]float64, len(d)), SecondAck: -1}
		for i, v := range d {
			smp.StagesUS[i] = float64(v.Nanoseconds()) / 1e3
		}
		total, _ := tr.At(raftlog.StageAnswered)
		smp.TotalUS = float64(total.Nanoseconds()) / 1e3
		if a, ok := tr.SecondAck(); ok {
			smp.SecondAck = float64(a.Nanoseconds()) / 1e3
		}
		r.Samples = append(r.Samples, smp)
	}
	return r
}

// serveSendTrace answers GET with the report and POST ?every=N by
// setting the sampling (and forgetting the traces kept).
func (b *Broker) serveSendTrace(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(b.traces.report())
	case http.MethodPost:
		n, err := strconv.ParseUint(r.URL.Query().Get("every"), 10, 64)
		if err != nil {
			http.Error(w, fmt.Sprintf("every: want a count of sends (0: off): %v", err), http.StatusBadRequest)
			return
		}
		b.traces.reset(n)
		b.log.Info("cluster: send tracing set", "every", n)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "GET or POST ?every=N", http.StatusMethodNotAllowed)
	}
}
