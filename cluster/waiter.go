package cluster

import (
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/pop"
)

// Errors a proposer sees. ErrNotLeader, ErrDropped and ErrLost are
// definite: the entry is not and will never be in the committed log
// (ErrLost: it was overwritten by a new leader's). A context error while
// waiting is indeterminate: the entry may still commit.
var (
	ErrNotLeader = errors.New("cluster: not the leader")
	ErrDropped   = raftlog.ErrDropped
	ErrLost      = raftlog.ErrLost
	ErrStopping  = raftlog.ErrStopped
)

// waiter receives the outcome of one request: for a send, its count
// messages' results; for a command, its error. The outcome goes to ch, or
// to cb for a request answered asynchronously; only the first outcome
// counts. It is the request's raftlog.Waiter.
type waiter struct {
	count int
	ch    chan outcome
	cb    func(outcome)
	done  atomic.Bool
}

type outcome struct {
	msgs []store.MessageResult
	pops []pop.Result // a pop entry's results
	err  error
}

func newWaiter(count int) *waiter { return &waiter{count: count, ch: make(chan outcome, 1)} }

// newAsyncWaiter returns a waiter that calls cb with the outcome. cb runs
// on whichever goroutine finishes the request (the node's applier, or its
// owner goroutine for a failure) and must not block.
func newAsyncWaiter(count int, cb func(outcome)) *waiter { return &waiter{count: count, cb: cb} }

// Fail implements raftlog.Waiter.
func (w *waiter) Fail(err error) { w.finish(outcome{err: err}) }

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

// answerBatches answers the requests of batches, this node's entries up to
// the index just applied, from rs, the results of that apply (in index
// order): a batch whose index holds an entry with its id gets the entry's
// result (and answered is called with it); one whose index holds another
// entry was overwritten (ErrLost). The store returns a result for every
// entry it applies, so a batch with no result is either beyond an apply
// that stopped early (complete false: the node stops and fails it) or was
// applied before this call, which only a mutant does: its outcome is
// unknown.
func answerBatches(batches []*raftlog.Batch, rs []store.Result, complete bool, answered func(*raftlog.Batch)) {
	for _, b := range batches {
		i := sort.Search(len(rs), func(i int) bool { return rs[i].Index >= b.Index })
		switch {
		case i < len(rs) && rs[i].Index == b.Index && rs[i].BatchID == b.ID:
			answered(b)
			answer(b, &rs[i])
		case i < len(rs) && rs[i].Index == b.Index:
			b.Fail(ErrLost)
		case complete:
			// Outside what this apply covered (applied before): unknown.
			b.Fail(fmt.Errorf("entry %d was not among the entries applied: %w", b.Index, raftlog.ErrOutcomeUnknown))
		}
	}
}

// answer finishes a batch's requests with its entry's result: for entries
// of records (messages, schedule, transaction), each request's share of
// the entry's messages, in order.
func answer(b *raftlog.Batch, r *store.Result) {
	if r.Kind == store.KindCommand || r.Err != nil {
		b.Fail(r.Err) // a command's outcome is its apply-time error
		return
	}
	if r.Kind == store.KindPop {
		// A pop entry holds one request (its kind is never merged).
		for _, q := range b.Requests {
			q.Waiter.(*waiter).finish(outcome{msgs: r.Messages, pops: r.Pop})
		}
		return
	}
	msgs := r.Messages
	for _, q := range b.Requests {
		w := q.Waiter.(*waiter)
		if len(msgs) < w.count {
			w.finish(outcome{err: fmt.Errorf("%w: entry %d holds fewer messages than proposed", store.ErrBadEntry, r.Index)})
			msgs = nil
			continue
		}
		w.finish(outcome{msgs: msgs[:w.count:w.count]})
		msgs = msgs[w.count:]
	}
}
