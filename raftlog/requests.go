package raftlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Request is one caller's share of a replicated entry, queued with
// Node.Submit. The node's owner goroutine (run) packs queued requests into
// entries, proposes them, learns each entry's index from the Ready that
// persists it here and hands it, with the commit that covers it, to the
// applier, where StateMachine.Apply answers its requests. So a request
// crosses two goroutines: the owner's and the applier's.
type Request struct {
	// Kind is the kind of the entry that carries the request: requests of
	// Framing.Merge share an entry (their Data concatenated, up to
	// Config.MaxBatchBytes); any other kind is an entry of its own.
	Kind byte
	// Data is the request's part of the entry body, after the header;
	// with Headroom, it starts with Framing.HeaderSize bytes kept free for
	// the header, so that an entry of this request alone is built in place
	// rather than copied.
	Data     []byte
	Headroom bool
	// Waiter learns of the failures the node decides (Fail); success is
	// the state machine's to report, from Apply.
	Waiter Waiter
	// Expires makes the node fail the request with an error wrapping
	// context.DeadlineExceeded once it has waited Config.WaitTimeout, for
	// callers that do not wait with a context of their own.
	Expires bool
	// Trace, if set, records when the request reaches each stage (a
	// sampled send); nil costs nothing.
	Trace *Trace
}

// Waiter is told of a request's failure. Fail may be called more than once
// and from the owner or the applier goroutine (a timeout, then the apply);
// only the first outcome counts, and Fail must not block.
type Waiter interface {
	Fail(err error)
}

// Batch is one entry this node proposed and the requests it carries, in
// order. ID is in the entry's header (Framing), so that the applier can
// tell the entry from another written at the same index.
type Batch struct {
	ID uint64
	// Index is the entry's raft index, set by the owner goroutine when the
	// entry is persisted here and before the batch reaches the applier.
	Index    uint64
	Requests []*Request
	// Proposed is when the owner proposed it (Config.Clock).
	Proposed time.Time

	timedOut bool // its expiring requests were failed
	traced   bool // a request carries a Trace
	settled  bool // failed as a whole: no longer tracked
}

// Fail fails every request of the batch with err.
func (b *Batch) Fail(err error) {
	for _, q := range b.Requests {
		q.Waiter.Fail(err)
	}
}

// Framing is what the owner needs of the state machine's entry format to
// pack requests and find them in the log: the header that starts each
// entry and names its kind and batch id, and the kind whose requests share
// entries.
type Framing struct {
	// AppendHeader appends the header of an entry of kind with id to b.
	AppendHeader func(b []byte, kind byte, id uint64) []byte
	// BatchID returns the batch id in an entry's data (0 if none).
	BatchID func(data []byte) uint64
	// HeaderSize is the length of a header.
	HeaderSize int
	// Merge is the kind whose requests are packed together.
	Merge byte
}

// Errors of requests. ErrDropped and ErrLost are definite: the entry is not
// and will never be in the committed log. ErrOutcomeUnknown is not: the
// entry may have committed.
var (
	ErrDropped = errors.New("raftlog: proposal dropped")
	ErrLost    = errors.New("raftlog: entry overwritten by a new leader")
	// ErrOutcomeUnknown wraps context.DeadlineExceeded: the caller must
	// treat it like a timeout.
	ErrOutcomeUnknown = fmt.Errorf("raftlog: outcome unknown: %w", context.DeadlineExceeded)
)

// unindexedExpiry is how long a batch may go without an index before the
// owner decides raft discarded it (proposed as a leader, then truncated
// from the unstable log by a new leader's entries before any Ready
// carried it: it was never persisted or sent).
const unindexedExpiry = 30 * time.Second

// batchTable is the owner goroutine's table of the batches it proposed, from
// proposal until they are answered (their index applied) or failed. Only
// the owner goroutine touches it; a batch's fields are written by the owner
// before the batch is handed to the applier and only read afterwards.
type batchTable struct {
	framing  Framing
	maxBatch int
	wait     time.Duration
	epoch    uint64
	seq      uint64
	// byID holds proposed batches until their entry is persisted here
	// (by this node as the leader, or by another to which raft forwarded
	// the proposal and which replicated it back).
	byID map[uint64]*Batch
	// indexed holds persisted batches until a commit covers their index.
	indexed []*Batch
	// live holds every batch not yet settled, for timeouts and stop.
	live      []*Batch
	lastSweep time.Time
	timedOut  error

	// tracing counts the traced batches in byID: while it is 0 the owner
	// reads no clock for traces. readyAt and sentAt are when the Ready in
	// progress started and sent its early messages, set only while
	// tracing; acking holds traced batches persisted here until every
	// follower acknowledged them (at most maxTraceAcks).
	tracing         int
	readyAt, sentAt time.Time
	acking          []*Batch
}

func newBatchTable(f Framing, maxBatch int, wait time.Duration, epoch uint64) *batchTable {
	return &batchTable{
		framing: f, maxBatch: maxBatch, wait: wait, epoch: epoch &^ 0xFFFFFFFF,
		byID:     map[uint64]*Batch{},
		timedOut: fmt.Errorf("not applied within %v: %w", wait, context.DeadlineExceeded),
	}
}

func (t *batchTable) nextID() uint64 {
	t.seq++
	return t.epoch | (t.seq & 0xFFFFFFFF)
}

// pack turns reqs, in order, into entries: each run of Merge requests into
// entries of up to maxBatch bytes of data, every other request into an
// entry of its own. It returns the entries and their batches, which it
// tracks from now on.
func (t *batchTable) pack(reqs []*Request, now time.Time) ([]*pb.Entry, []*Batch) {
	var ents []*pb.Entry
	var bs []*Batch
	for i := 0; i < len(reqs); {
		j, size := i+1, len(t.payload(reqs[i]))
		if reqs[i].Kind == t.framing.Merge {
			for j < len(reqs) && reqs[j].Kind == t.framing.Merge && size+len(t.payload(reqs[j])) <= t.maxBatch {
				size += len(t.payload(reqs[j]))
				j++
			}
		}
		b := &Batch{ID: t.nextID(), Requests: reqs[i:j:j], Proposed: now}
		var body []byte
		if q := reqs[i]; j == i+1 && q.Headroom {
			// In place: the header goes into the room kept for it.
			t.framing.AppendHeader(q.Data[:0], q.Kind, b.ID)
			body = q.Data
		} else {
			body = t.framing.AppendHeader(make([]byte, 0, t.framing.HeaderSize+size), q.Kind, b.ID)
			for _, q := range b.Requests {
				body = append(body, t.payload(q)...)
			}
		}
		for _, q := range b.Requests {
			q.Data = nil // the entry holds it now
			if q.Trace != nil {
				b.traced = true
			}
		}
		if b.traced {
			t.tracing++
			b.stampAll(StageProposed, time.Now())
		}
		t.byID[b.ID] = b
		t.live = append(t.live, b)
		ents = append(ents, &pb.Entry{Data: body})
		bs = append(bs, b)
		i = j
	}
	return ents, bs
}

// payload is q's part of an entry body.
func (t *batchTable) payload(q *Request) []byte {
	if q.Headroom {
		return q.Data[t.framing.HeaderSize:]
	}
	return q.Data
}

// dropped fails batches raft refused.
func (t *batchTable) dropped(bs []*Batch, err error) {
	err = fmt.Errorf("%w: %w", ErrDropped, err)
	for _, b := range bs {
		t.forget(b)
		t.settle(b, err)
	}
}

func (t *batchTable) settle(b *Batch, err error) {
	b.settled = true
	b.Fail(err)
}

// appended learns the indexes of our entries among ents, now persisted.
func (t *batchTable) appended(ents []*pb.Entry) {
	if len(t.byID) == 0 {
		return
	}
	for _, e := range ents {
		if e.GetType() != pb.EntryType_EntryNormal {
			continue
		}
		if id := t.framing.BatchID(e.GetData()); id != 0 {
			if b := t.byID[id]; b != nil {
				t.forget(b)
				b.Index = e.GetIndex()
				t.indexed = append(t.indexed, b)
				if b.traced {
					t.persistedTraced(b)
				}
			}
		}
	}
}

// take removes and returns the persisted batches whose index is at most
// upTo, for the applier (a commit) or to fail them (a snapshot).
func (t *batchTable) take(upTo uint64) []*Batch {
	var out []*Batch
	keep := t.indexed[:0]
	for _, b := range t.indexed {
		if b.Index <= upTo {
			out = append(out, b)
		} else {
			keep = append(keep, b)
		}
	}
	clear(t.indexed[len(keep):])
	t.indexed = keep
	return out
}

// snapshotted fails the persisted batches a snapshot up to index replaced:
// whether their entries committed is unknown here.
func (t *batchTable) snapshotted(index uint64) {
	for _, b := range t.take(index) {
		t.settle(b, fmt.Errorf("replaced by a snapshot up to index %d: %w", index, ErrOutcomeUnknown))
	}
}

// sweep, at most every tenth of the wait, forgets the batches the applier
// has answered (index at most applied), fails the expiring requests of
// batches older than the wait, and fails batches that went
// unindexedExpiry without an index.
func (t *batchTable) sweep(now time.Time, applied uint64) {
	if now.Sub(t.lastSweep) < t.wait/10 {
		return
	}
	t.lastSweep = now
	keep := t.live[:0]
	for _, b := range t.live {
		switch {
		case b.settled, b.Index != 0 && b.Index <= applied:
			continue
		case b.Index == 0 && now.Sub(b.Proposed) >= unindexedExpiry:
			t.forget(b)
			t.settle(b, ErrLost)
			continue
		}
		if !b.timedOut && now.Sub(b.Proposed) >= t.wait {
			b.timedOut = true
			for _, q := range b.Requests {
				if q.Expires {
					q.Waiter.Fail(t.timedOut)
				}
			}
		}
		keep = append(keep, b)
	}
	clear(t.live[len(keep):])
	t.live = keep
}

// stop fails every batch not yet answered (its index above applied) and
// forgets them all: one never persisted here with ErrStopped, one
// persisted but not applied with ErrOutcomeUnknown (it may commit on
// another node).
func (t *batchTable) stop(applied uint64) {
	for _, b := range t.live {
		switch {
		case b.settled, b.Index != 0 && b.Index <= applied:
		case b.Index == 0:
			b.Fail(ErrStopped)
		default:
			b.Fail(fmt.Errorf("node stopped before applying entry %d: %w", b.Index, ErrOutcomeUnknown))
		}
	}
	t.live, t.indexed, t.acking, t.tracing = nil, nil, nil, 0
	clear(t.byID)
}

// forget removes b from byID.
func (t *batchTable) forget(b *Batch) {
	delete(t.byID, b.ID)
	if b.traced {
		t.tracing--
	}
}

// persistedTraced stamps a traced batch just persisted here: its Ready's
// start, its early messages and the fsync just done; its followers' acks
// come later (acked).
func (t *batchTable) persistedTraced(b *Batch) {
	now := time.Now()
	ready, sent := t.readyAt, t.sentAt
	if ready.IsZero() {
		ready = now // traced since the Ready started: no earlier stamp
	}
	if sent.IsZero() {
		sent = ready // no messages to send (a group of one)
	}
	b.stampAll(StageReady, ready)
	b.stampAll(StageSent, sent)
	b.stampAll(StageFsynced, now)
	if len(t.acking) == maxTraceAcks {
		t.acking = append(t.acking[:0], t.acking[1:]...)
	}
	t.acking = append(t.acking, b)
}

// The plain framing, for state machines that do not set Config.Framing:
// a kind byte and the batch id, big-endian; requests of kind 0 merge.
const plainHeaderSize = 9

func appendPlainHeader(b []byte, kind byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, kind), id)
}

func plainBatchID(data []byte) uint64 {
	if len(data) < plainHeaderSize {
		return 0
	}
	return binary.BigEndian.Uint64(data[1:plainHeaderSize])
}
