package jepsen

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// recorder owns the run's clock and its history files. Every operation and
// fault goes through it, so all times come from one monotonic clock.
type recorder struct {
	start time.Time

	mu   sync.Mutex
	hist *history.Writer
	nem  *history.Writer
	err  error

	nextID      atomic.Int64
	nextProcess atomic.Int64

	// live counters for the progress line
	okSends, infoOps, failOps atomic.Int64
	fault                     atomic.Pointer[string]
}

func newRecorder(hist, nem *history.Writer) *recorder {
	return &recorder{start: time.Now(), hist: hist, nem: nem}
}

// now is the time since the run started, in nanoseconds.
func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

// process hands out a fresh logical process id.
func (r *recorder) process() int { return int(r.nextProcess.Add(1)) }

// op records a completed operation.
func (r *recorder) op(o history.Op) {
	o.ID = r.nextID.Add(1)
	switch o.Outcome {
	case history.OK:
		if o.Kind == history.Send {
			r.okSends.Add(1)
		}
	case history.Info:
		r.infoOps.Add(1)
	case history.Fail:
		r.failOps.Add(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.hist.Write(o); err != nil && r.err == nil {
		r.err = err
	}
}

// event records a fault once it ended.
func (r *recorder) event(e history.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.nem.Write(e); err != nil && r.err == nil {
		r.err = err
	}
	_ = r.nem.Flush()
}

func (r *recorder) setFault(s string) { r.fault.Store(&s) }

func (r *recorder) currentFault() string {
	if p := r.fault.Load(); p != nil {
		return *p
	}
	return ""
}
