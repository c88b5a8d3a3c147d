package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/store"
)

// Errors a proposer sees. ErrNotLeader and ErrDropped are definite: the
// entry is not and will never be in the log. ErrLost is definite too: the
// entry was overwritten by a new leader's. A context error while waiting is
// indeterminate: the entry may still commit.
var (
	ErrNotLeader = errors.New("cluster: not the leader")
	ErrDropped   = errors.New("cluster: proposal dropped")
	ErrLost      = errors.New("cluster: entry overwritten by a new leader")
	ErrStopping  = errors.New("cluster: node stopping")
)

// waiter receives the outcome of one proposed request: for a send, its
// count messages' results; for a command, its error. The outcome goes to
// ch, or to cb for a request answered asynchronously; only the first
// outcome counts.
type waiter struct {
	count int
	ch    chan outcome
	cb    func(outcome)
	done  atomic.Bool
}

type outcome struct {
	msgs []store.MessageResult
	err  error
}

func newWaiter(count int) *waiter { return &waiter{count: count, ch: make(chan outcome, 1)} }

// newAsyncWaiter returns a waiter that calls cb with the outcome. cb runs
// on whichever goroutine finishes the request (the applier, the raft
// goroutine for a dropped proposal, the janitor on timeout) and must not
// block.
func newAsyncWaiter(count int, cb func(outcome)) *waiter { return &waiter{count: count, cb: cb} }

func (w *waiter) finish(o outcome) {
	if !w.done.CompareAndSwap(false, true) {
		return // already finished
	}
	if w.cb != nil {
		w.cb(o)
		return
	}
	w.ch <- o
}

// batch is one proposed entry and the requests it carries, in order.
type batch struct {
	id      uint64
	index   uint64 // raft index once appended, 0 before
	waiters []*waiter
	created time.Time
}

// pending tracks proposed entries until they are applied or known lost.
// A result is matched to a batch only when both its raft index (learned
// when the entry became durable here) and its batch id agree, so entries
// re-applied after a restart or written by another leader never answer a
// request they do not belong to.
type pending struct {
	mu      sync.Mutex
	byID    map[uint64]*batch
	byIndex map[uint64]*batch
	// onCommit, if set, observes each answered batch's time from its
	// proposal to the start of the apply that answered it.
	onCommit func(time.Duration)
}

func newPending() *pending {
	return &pending{byID: map[uint64]*batch{}, byIndex: map[uint64]*batch{}}
}

func (p *pending) add(b *batch) {
	p.mu.Lock()
	p.byID[b.id] = b
	p.mu.Unlock()
}

// drop fails a batch raft refused.
func (p *pending) drop(id uint64, err error) {
	p.mu.Lock()
	b := p.byID[id]
	delete(p.byID, id)
	p.mu.Unlock()
	if b != nil {
		b.fail(err)
	}
}

// batchIDOf returns the batch id of an entry body, or 0.
func batchIDOf(data []byte) uint64 {
	if len(data) < store.BodyHeaderSize {
		return 0
	}
	return binary.BigEndian.Uint64(data[1:store.BodyHeaderSize])
}

// appended records the raft index of our entries once durable.
func (p *pending) appended(ents []*pb.Entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.byID) == 0 {
		return
	}
	for _, e := range ents {
		if id := batchIDOf(e.GetData()); id != 0 {
			if b := p.byID[id]; b != nil && b.index == 0 {
				b.index = e.GetIndex()
				p.byIndex[b.index] = b
			}
		}
	}
}

// applied answers the batches the results belong to, and fails batches
// whose index was applied with someone else's entry; start is when their
// apply began.
func (p *pending) applied(rs []store.Result, start time.Time) {
	if len(rs) == 0 {
		return
	}
	p.mu.Lock()
	if len(p.byIndex) == 0 {
		p.mu.Unlock()
		return
	}
	type done struct {
		b *batch
		r *store.Result
	}
	var ds []done
	for i := range rs {
		r := &rs[i]
		b := p.byIndex[r.Index]
		if b == nil {
			continue
		}
		delete(p.byIndex, r.Index)
		if r.BatchID == b.id {
			delete(p.byID, b.id)
			ds = append(ds, done{b, r})
		} else if p.byID[b.id] == b {
			delete(p.byID, b.id)
			ds = append(ds, done{b, nil})
		}
	}
	p.mu.Unlock()
	for _, d := range ds {
		if d.r == nil {
			d.b.fail(ErrLost)
			continue
		}
		if p.onCommit != nil {
			p.onCommit(start.Sub(d.b.created))
		}
		d.b.answer(d.r)
	}
}

// fail finishes every request of the batch with err (nil for a command
// that applied without error).
func (b *batch) fail(err error) {
	for _, w := range b.waiters {
		w.finish(outcome{err: err})
	}
}

func (b *batch) answer(r *store.Result) {
	if r.Kind == store.KindCommand || r.Err != nil {
		b.fail(r.Err)
		return
	}
	msgs := r.Messages
	for _, w := range b.waiters {
		if len(msgs) < w.count {
			w.finish(outcome{err: fmt.Errorf("%w: entry %d holds fewer messages than proposed", store.ErrBadEntry, r.Index)})
			msgs = nil
			continue
		}
		w.finish(outcome{msgs: msgs[:w.count:w.count]})
		msgs = msgs[w.count:]
	}
}

// failAll fails every outstanding batch (node stopping).
func (p *pending) failAll(err error) {
	p.mu.Lock()
	bs := p.byID
	p.byID, p.byIndex = map[uint64]*batch{}, map[uint64]*batch{}
	p.mu.Unlock()
	for _, b := range bs {
		b.fail(err)
	}
}

// timeout finishes the asynchronous waiters of batches created before
// cutoff with err. The batches stay: their entries may still commit, and
// apply must still match them.
func (p *pending) timeout(cutoff time.Time, err error) {
	p.mu.Lock()
	var ws []*waiter
	for _, b := range p.byID {
		if b.created.Before(cutoff) {
			for _, w := range b.waiters {
				if w.cb != nil && !w.done.Load() {
					ws = append(ws, w)
				}
			}
		}
	}
	p.mu.Unlock()
	for _, w := range ws {
		w.finish(outcome{err: err})
	}
}

// expire fails batches created before cutoff that never got an index.
func (p *pending) expire(cutoff time.Time, err error) {
	p.mu.Lock()
	var bs []*batch
	for id, b := range p.byID {
		if b.index == 0 && b.created.Before(cutoff) {
			delete(p.byID, id)
			bs = append(bs, b)
		}
	}
	p.mu.Unlock()
	for _, b := range bs {
		b.fail(err)
	}
}
