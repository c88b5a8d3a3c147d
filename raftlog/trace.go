package raftlog

import (
	"sync/atomic"
	"time"
)

// The stages of a traced send, in the order a send passes them on the
// leader. Each stamp is the time since StageReceived on the monotonic
// clock; the stages of one send never decrease, so the durations between
// consecutive stages add up to the send's total (received to answered).
const (
	// StageReceived: the request's frame was read on its connection's
	// reader, before the send is decoded and encoded as records.
	StageReceived = iota
	// StageProposed: the owner goroutine packed it into an entry and
	// proposed it to raft.
	StageProposed
	// StageReady: the Ready carrying its entry started on the owner.
	StageReady
	// StageSent: that Ready's early messages (the MsgApps to the
	// followers) were handed to the transport, before the leader's fsync.
	StageSent
	// StageFsynced: the leader's append and fdatasync of the entry
	// returned.
	StageFsynced
	// StageFirstAck: the first follower's MsgAppResp covering the entry
	// was stepped on the leader.
	StageFirstAck
	// StageCommitted: a Ready carried a commit index covering the entry
	// and the owner handed it to the applier.
	StageCommitted
	// StageApplied: the store applied the entry (queues, index).
	StageApplied
	// StageAnswered: the answer was queued on the client's connection.
	StageAnswered
	// NumStages is the number of stages.
	NumStages
)

// StageNames are the stages' short names, by stage.
var StageNames = [NumStages]string{"received", "proposed", "ready", "sent", "fsynced", "ack1", "committed", "applied", "answered"}

// Trace is the record of one sampled send: when it reached each stage. It
// travels with its Request through the owner goroutine and the applier;
// a stamp is written once (the first wins) and may be read by any
// goroutine. A send that is not sampled has no Trace, and costs nothing.
type Trace struct {
	start time.Time
	at    [NumStages]atomic.Int64 // nanoseconds since start, +1 (0: not reached)
	// ack2 is the second follower's ack, which may come after the
	// commit; it is not one of the stages that add up to the total.
	ack2 atomic.Int64
	// firstPeer is the follower whose ack was the first (owner only).
	firstPeer uint64
}

// NewTrace starts a trace of a send received at start.
func NewTrace(start time.Time) *Trace {
	t := &Trace{start: start}
	t.at[StageReceived].Store(1)
	return t
}

// Stamp records that the send reached stage at now, unless it was
// recorded before.
func (t *Trace) Stamp(stage int, now time.Time) {
	t.at[stage].CompareAndSwap(0, int64(now.Sub(t.start))+1)
}

// At returns when the send reached stage, since it was received, and
// whether it did.
func (t *Trace) At(stage int) (time.Duration, bool) {
	v := t.at[stage].Load()
	return time.Duration(v - 1), v != 0
}

// SecondAck returns when the second follower acknowledged the entry,
// since the send was received, and whether it did yet.
func (t *Trace) SecondAck() (time.Duration, bool) {
	v := t.ack2.Load()
	return time.Duration(v - 1), v != 0
}

// Complete reports whether the send reached every stage.
func (t *Trace) Complete() bool {
	for i := range t.at {
		if t.at[i].Load() == 0 {
			return false
		}
	}
	return true
}

// Stages returns the durations spent between consecutive stages: element
// i-1 is the time from stage i-1 to stage i, for i from 1. They add up to
// the time from received to answered. ok is false if a stage is missing.
func (t *Trace) Stages() (d [NumStages - 1]time.Duration, ok bool) {
	if !t.Complete() {
		return d, false
	}
	for i := 1; i < NumStages; i++ {
		d[i-1] = time.Duration(t.at[i].Load() - t.at[i-1].Load())
	}
	return d, true
}

// stampAll stamps stage on every traced request of b.
func (b *Batch) stampAll(stage int, now time.Time) {
	for _, q := range b.Requests {
		if q.Trace != nil {
			q.Trace.Stamp(stage, now)
		}
	}
}

// Traced reports whether a request of b carries a Trace.
func (b *Batch) Traced() bool { return b.traced }

// StampTraced stamps stage at now on the traced requests of b (for the
// state machine: applied, answered).
func (b *Batch) StampTraced(stage int, now time.Time) {
	if b.traced {
		b.stampAll(stage, now)
	}
}

// traceAcks is the owner's record of the traced batches persisted here
// whose followers have not all acknowledged them yet.
const maxTraceAcks = 256

// acked stamps the acks of peer, whose log matches up to index, on the
// traced batches waiting for them.
func (t *batchTable) acked(peer, index uint64) {
	var now time.Time
	keep := t.acking[:0]
	for _, b := range t.acking {
		if b.Index > index {
			keep = append(keep, b)
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		done := true
		for _, q := range b.Requests {
			tr := q.Trace
			if tr == nil {
				continue
			}
			switch {
			case tr.firstPeer == 0:
				tr.firstPeer = peer
				tr.Stamp(StageFirstAck, now)
				done = false
			case tr.firstPeer != peer:
				tr.ack2.CompareAndSwap(0, int64(now.Sub(tr.start))+1)
			default:
				done = false
			}
		}
		if !done {
			keep = append(keep, b)
		}
	}
	clear(t.acking[len(keep):])
	t.acking = keep
}
