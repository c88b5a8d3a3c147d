package netfault

import (
	"math/rand/v2"
	"sync"
	"time"
)

// pairFaults are the faults on one directed pair of nodes.
type pairFaults struct {
	// cut stalls every byte from the pair's source to its destination.
	cut bool
	// delay is added to every chunk, plus a uniform draw in ±jitter.
	delay, jitter time.Duration
	// loss is the probability that a chunk resets its connection.
	loss float64
}

// faultTable holds the faults of every directed pair of nodes 1..n and
// wakes waiters when they change. It is safe for concurrent use.
type faultTable struct {
	n  int
	mu struct {
		sync.Mutex
		// pairs is indexed by from*(n+1)+to.
		pairs []pairFaults
		// changed is closed, and replaced, on every change.
		changed chan struct{}
		// rng draws jitter and loss.
		rng *rand.Rand
	}
}

// newFaultTable returns a table for nodes 1..n without faults.
func newFaultTable(n int, rng *rand.Rand) *faultTable {
	t := &faultTable{n: n}
	t.mu.pairs = make([]pairFaults, (n+1)*(n+1))
	t.mu.changed = make(chan struct{})
	t.mu.rng = rng
	return t
}

// get returns the faults of (from, to) and a channel closed at the next
// change of any pair.
func (t *faultTable) get(from, to int) (pairFaults, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.pairs[from*(t.n+1)+to], t.mu.changed
}

// update applies fn to every pair under the lock and wakes waiters.
func (t *faultTable) update(fn func(from, to int, f *pairFaults)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for from := 1; from <= t.n; from++ {
		for to := 1; to <= t.n; to++ {
			fn(from, to, &t.mu.pairs[from*(t.n+1)+to])
		}
	}
	close(t.mu.changed)
	t.mu.changed = make(chan struct{})
}

// waitOpen blocks while (from, to) is cut. It returns false if done is
// closed first.
func (t *faultTable) waitOpen(from, to int, done <-chan struct{}) bool {
	for {
		f, changed := t.get(from, to)
		if !f.cut {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}

// waitBothOpen blocks while (a, b) or (b, a) is cut. It returns false if
// done is closed first.
func (t *faultTable) waitBothOpen(a, b int, done <-chan struct{}) bool {
	for {
		ab, changed := t.get(a, b)
		ba, _ := t.get(b, a)
		if !ab.cut && !ba.cut {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}

// sampleDelay draws the latency of one chunk: delay plus a uniform draw in
// [-jitter, +jitter], never negative.
func (t *faultTable) sampleDelay(f pairFaults) time.Duration {
	if f.jitter <= 0 {
		return f.delay
	}
	t.mu.Lock()
	j := time.Duration(t.mu.rng.Int64N(int64(2*f.jitter)+1)) - f.jitter
	t.mu.Unlock()
	return max(f.delay+j, 0)
}

// roll returns true with probability p.
func (t *faultTable) roll(p float64) bool {
	if p <= 0 {
		return false
	}
	if p >= 1 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.rng.Float64() < p
}
