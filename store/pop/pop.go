// Package pop holds the rules of pop consumption (RocketMQ 5's
// SimpleConsumer model) as replicated state: for each consumer group's
// view of a queue, a cursor and the in-flight records, and the entry that
// changes them.
//
// A pop hides messages from the group for an invisible time: each popped
// queue offset gets an in-flight Record (its pop time, when it becomes
// visible again, how many times it was delivered). An ack removes the
// record; a change of invisible time gives it a new pop time and a new
// visible-again time; a revive, proposed by the leader once the
// visible-again time has passed, marks it visible, so that the next pop
// hands it out again (attempt + 1), or, past the group's maximum, removes
// it as the message goes to the dead-letter topic in the same entry.
//
// The cursor (Queue.Next) is the first offset never popped; offsets below
// it that have no record were acked (or dead-lettered), or skipped by the
// popping consumer's filter.
//
// Every change is an Op of a Batch, one raft entry; the times in it are
// the proposing leader's clock (Batch.Now). Apply checks each op against
// the state, so an op proposed twice, or built by a leader from a state
// that moved since, takes effect at most once and fails the same way on
// every replica. A receipt (what a consumer acks with) names the record
// by queue offset and pop time; a pop of a record is allowed only at a
// time later than its last pop time, so a receipt is never reused.
package pop

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Key is one consumer group's view of one queue.
type Key struct {
	Group string
	Topic string
	Queue int32
}

// Record is one in-flight message of a queue.
type Record struct {
	Offset int64
	// PopTime is the leader's time (ms) of the pop or of the last change
	// of invisible time: with Offset, the receipt.
	PopTime int64
	// VisibleAt is when the message may be revived (ms).
	VisibleAt int64
	// Attempt counts deliveries, from 1 at the first pop.
	Attempt int32
	// Revived: the invisible time passed and a revive entry applied; the
	// next pop hands the message out again.
	Revived bool
	// AttemptID is the orderly pop's attempt id that handed the message
	// out (RocketMQ's attemptId): a pop repeating it while the message is
	// hidden gets the same delivery again.
	AttemptID string
}

// Queue is a queue's pop state for one group.
type Queue struct {
	// Next is the first queue offset never popped.
	Next int64
	// InFlight holds the records by offset.
	InFlight map[int64]*Record

	// order lists the offsets of the records, ascending, from order[head]
	// on; offsets acked, dropped or dead-lettered since stay until
	// trimOrder passes them. A new record's offset is above every other
	// (it comes from the cursor), so appending keeps the order. It makes
	// LowWater cost the removed offsets not yet trimmed, not the records.
	// Valid when ordered; a Queue built by hand gets it on its first op.
	order   []int64
	head    int
	ordered bool
	// revived counts the records with Revived set (valid when ordered),
	// so that a pop learns whether the queue is busy, and whether it has
	// revived records, without walking them.
	revived int
	// key is the queue's key in State.Queues, for the due index's
	// entries, which point at the queue; set by State.pop when it makes
	// the queue and by the index's build.
	key Key
}

// LowWater is the group's consumed position in the queue: the lowest
// offset still in flight, or Next.
func (q *Queue) LowWater() int64 {
	if !q.ordered {
		low := q.Next
		for off := range q.InFlight {
			low = min(low, off)
		}
		return low
	}
	for _, off := range q.order[q.head:] {
		if _, ok := q.InFlight[off]; ok {
			return off
		}
	}
	return q.Next
}

// buildOrder lists the records' offsets in order.
func (q *Queue) buildOrder() {
	q.order = q.order[:0]
	for off := range q.InFlight {
		q.order = append(q.order, off)
	}
	slices.Sort(q.order)
	q.head, q.ordered = 0, true
	q.revived = 0
	for _, r := range q.InFlight {
		if r.Revived {
			q.revived++
		}
	}
}

// setRevived sets r.Revived, keeping the count.
func (q *Queue) setRevived(r *Record, v bool) {
	if r.Revived == v {
		return
	}
	r.Revived = v
	if v {
		q.revived++
	} else {
		q.revived--
	}
}

// remove removes the record at off, keeping the count.
func (q *Queue) remove(off int64) {
	if r := q.InFlight[off]; r != nil && r.Revived {
		q.revived--
	}
	delete(q.InFlight, off)
}

// trimOrder passes the removed offsets at the head of the order, and
// compacts it once the head is past half of it.
func (q *Queue) trimOrder() {
	for q.head < len(q.order) {
		if _, ok := q.InFlight[q.order[q.head]]; ok {
			break
		}
		q.head++
	}
	if q.head > 64 && q.head > len(q.order)/2 {
		q.order = append(q.order[:0], q.order[q.head:]...)
		q.head = 0
	}
}

// Busy reports whether a record is hidden (popped, not acked, not revived):
// an orderly pop waits for it.
func (q *Queue) Busy() bool {
	if q.ordered {
		return len(q.InFlight) > q.revived
	}
	for _, r := range q.InFlight {
		if !r.Revived {
			return true
		}
	}
	return false
}

// RevivedBefore returns, by offset, up to n revived records popped before
// now (what a pop at now hands out again).
func (q *Queue) RevivedBefore(n int, now int64) []Record {
	var out []Record
	if q.ordered {
		if q.revived == 0 {
			return nil
		}
		for _, off := range q.order[q.head:] {
			if len(out) >= n {
				break
			}
			if r := q.InFlight[off]; r != nil && r.Revived && r.PopTime < now {
				out = append(out, *r)
			}
		}
		return out
	}
	for _, r := range q.InFlight {
		if r.Revived && r.PopTime < now {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Offset, b.Offset) })
	return out[:min(len(out), n)]
}

// Hidden returns the hidden records (not revived) by offset.
func (q *Queue) Hidden() []Record {
	var out []Record
	if q.ordered {
		for _, off := range q.order[q.head:] {
			if r := q.InFlight[off]; r != nil && !r.Revived {
				out = append(out, *r)
			}
		}
		return out
	}
	for _, r := range q.InFlight {
		if !r.Revived {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// Sorted returns the records by offset.
func (q *Queue) Sorted() []Record {
	out := make([]Record, 0, len(q.InFlight))
	for _, r := range q.InFlight {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Record) int { return int(min(max(a.Offset-b.Offset, -1), 1)) })
	return out
}

// Clone returns a deep copy.
func (q *Queue) Clone() *Queue {
	c := &Queue{Next: q.Next, InFlight: make(map[int64]*Record, len(q.InFlight)), key: q.key}
	for off, r := range q.InFlight {
		rc := *r
		c.InFlight[off] = &rc
	}
	c.buildOrder()
	return c
}

// Op types.
const (
	OpPop    = "pop"
	OpAck    = "ack"
	OpChange = "change"
	OpRevive = "revive"
	// OpDrop removes a record whose message retention deleted: it can be
	// delivered no more, as in RocketMQ, where a message gone from the
	// log is gone. The leader proposes it; every replica applies it alike.
	OpDrop = "drop"
	// OpDeadLetter: the consumer that holds the receipt gives up on the
	// message; it goes to the group's dead-letter topic and its record is
	// removed, in one entry (DLQ must be set: the entry carries the copy).
	OpDeadLetter = "dead"
	// OpAcks acks several records of one queue that share a pop time
	// (the messages of one pop, which a batch ack names together):
	// Offsets at PopTime, each as an OpAck of its own would, in one op.
	// One op instead of one per message keeps a batch ack's entry small
	// and its apply to one queue lookup. Builds before it refuse the
	// entry (an unknown op code) rather than misread it.
	OpAcks = "acks"
)

// Op is one change of a queue's pop state.
type Op struct {
	Type  string `json:"t"`
	Group string `json:"g"`
	Topic string `json:"tp"`
	Queue int32  `json:"q"`

	// A pop hides Offsets (ascending) for Invisible ms: revived records,
	// and offsets of [From, To), which the cursor then passes, only if it
	// is at From (or the queue has no state yet and Init is set: From is
	// then the start the leader chose). Offsets of [From, To) not listed
	// were skipped by the consumer's filter.
	From      int64   `json:"f,omitempty"`
	To        int64   `json:"to,omitempty"`
	Init      bool    `json:"i,omitempty"`
	Offsets   []int64 `json:"o,omitempty"`
	Invisible int64   `json:"iv,omitempty"`
	// Order: an orderly pop, refused while a record of the queue is hidden.
	Order bool `json:"ord,omitempty"`
	// AttemptID is recorded on the records an orderly pop hands out.
	AttemptID string `json:"aid,omitempty"`

	// Offset and PopTime name a record (ack, change, revive, drop, dead
	// letter); a change also sets Invisible. OpAcks names its records by
	// Offsets and PopTime.
	Offset  int64 `json:"off,omitempty"`
	PopTime int64 `json:"pt,omitempty"`
	// DLQ: a revive (or a dead letter) that moves the message to the
	// group's dead-letter topic; the entry carries the copy to store, one
	// record per such op, in op order.
	DLQ bool `json:"dlq,omitempty"`
}

// Key returns the op's queue.
func (o *Op) Key() Key { return Key{o.Group, o.Topic, o.Queue} }

// Batch is the head of a pop entry.
type Batch struct {
	// Now is the proposing leader's clock, ms.
	Now int64 `json:"now"`
	Ops []Op  `json:"ops"`
}

// Errors of an op's result. They are deterministic: every replica reaches
// the same.
var (
	// ErrBadOp is an op that makes no sense on its own.
	ErrBadOp = errors.New("pop: malformed op")
	// ErrMoved: the pop's cursor part was built from a cursor that moved
	// since (another pop got there first); nothing of it was taken.
	ErrMoved = errors.New("pop: queue cursor moved")
	// ErrBusy: an orderly pop while a message of the queue is hidden.
	ErrBusy = errors.New("pop: queue has a message in flight")
	// ErrStale: the receipt names a record that was popped again or had
	// its invisible time changed since: another receipt holds it.
	ErrStale = errors.New("pop: receipt handle is expired")
	// ErrNotPopped: the offset was never popped by the group.
	ErrNotPopped = errors.New("pop: offset was never popped")
	// ErrNotDue: a revive before the record's visible-again time, or of a
	// record already revived.
	ErrNotDue = errors.New("pop: record not due for revival")
)

// Result is what one op did.
type Result struct {
	Err error
	// Popped lists, for a pop, the records handed out (in offset order).
	Popped []Record
	// PopTime is a change's new pop time.
	PopTime int64
	// Done: an ack of an offset already acked (or dead-lettered): nothing
	// to do, and not an error.
	Done bool
	// DLQ: a revive or a dead letter that removed the record; its record
	// in the entry is stored in the dead-letter topic.
	DLQ bool
	// Dropped: a drop that removed the record.
	Dropped bool
	// LowWater is the queue's LowWater after the op.
	LowWater int64
	// Errs holds an OpAcks' outcome by offset (Offsets' index): nil when
	// no offset failed, else each failed offset's error, as Err of an
	// OpAck (nil for the others).
	Errs []error
	// Acked counts the records an OpAcks removed (not those acked
	// before).
	Acked int
}

// State is every queue's pop state. It is not safe for concurrent use;
// Due only reads, so it may run beside other readers.
type State struct {
	Queues map[Key]*Queue
	// due indexes the hidden records by visible-again time (dueIndex),
	// so that Due costs the due records, not every record in flight.
	// Built on the first ApplyOp (or by Reindex) from Queues; until then
	// Due walks every record.
	due dueIndex
}

// NewState returns an empty state.
func NewState() *State { return &State{Queues: map[Key]*Queue{}} }

// Reindex rebuilds the index of hidden records by visible-again time from
// Queues. Call it after filling Queues directly (loading a saved state).
func (s *State) Reindex() { s.due.build(s) }

// Apply applies a batch's ops in order and returns one result per op.
func (s *State) Apply(b *Batch) []Result {
	out := make([]Result, len(b.Ops))
	for i := range b.Ops {
		out[i] = s.ApplyOp(b.Now, &b.Ops[i])
	}
	return out
}

// ApplyOp applies one op of a batch whose time is now.
func (s *State) ApplyOp(now int64, o *Op) Result {
	if !s.due.built {
		s.due.build(s)
	}
	k := o.Key()
	q := s.Queues[k]
	if q != nil && !q.ordered {
		q.buildOrder()
	}
	var r Result
	switch o.Type {
	case OpPop:
		r = s.pop(now, k, q, o)
		q = s.Queues[k]
		for _, rec := range r.Popped {
			s.due.add(q, &rec)
		}
	case OpAck:
		r = ack(q, o.Offset, o.PopTime)
	case OpAcks:
		r = acks(q, o)
	case OpChange:
		r = change(now, q, o)
		if r.Err == nil && q != nil {
			if rec := q.InFlight[o.Offset]; rec != nil {
				s.due.add(q, rec)
			}
		}
	case OpRevive:
		r = revive(now, q, o)
	case OpDrop:
		r = drop(q, o)
	case OpDeadLetter:
		r = deadLetter(q, o)
	default:
		r.Err = fmt.Errorf("%w: type %q", ErrBadOp, o.Type)
	}
	if q != nil {
		q.trimOrder()
		r.LowWater = q.LowWater()
	}
	s.due.trim(s)
	return r
}

func (s *State) pop(now int64, k Key, q *Queue, o *Op) Result {
	switch {
	case o.Invisible <= 0:
		return Result{Err: fmt.Errorf("%w: invisible time %d", ErrBadOp, o.Invisible)}
	case o.From < 0 || o.To < o.From:
		return Result{Err: fmt.Errorf("%w: cursor range [%d, %d)", ErrBadOp, o.From, o.To)}
	case !slices.IsSorted(o.Offsets):
		return Result{Err: fmt.Errorf("%w: offsets not ascending", ErrBadOp)}
	}
	if q != nil && o.Order && q.Busy() {
		return Result{Err: ErrBusy}
	}
	cursorOK := (q != nil && q.Next == o.From) || (q == nil && o.Init)
	if q == nil {
		if !cursorOK && o.To > o.From {
			return Result{Err: ErrMoved}
		}
		q = &Queue{Next: o.From, InFlight: map[int64]*Record{}, ordered: true, key: k}
		s.Queues[k] = q
	}
	r := Result{Popped: make([]Record, 0, len(o.Offsets))}
	// The new records share one allocation: a pop's records are mostly
	// acked together, and then the whole goes.
	var slab []Record
	for i, off := range o.Offsets {
		if i > 0 && off == o.Offsets[i-1] {
			continue
		}
		rec := q.InFlight[off]
		switch {
		case off < o.From:
			if rec == nil || !rec.Revived || rec.PopTime >= now {
				continue // acked, popped again, or changed since the leader looked
			}
			rec.PopTime, rec.VisibleAt = now, now+o.Invisible
			q.setRevived(rec, false)
			rec.Attempt++
			rec.AttemptID = o.AttemptID
		case off < o.To && cursorOK && rec == nil:
			if slab == nil {
				slab = make([]Record, 0, len(o.Offsets)-i)
			}
			slab = append(slab, Record{Offset: off, PopTime: now, VisibleAt: now + o.Invisible, Attempt: 1, AttemptID: o.AttemptID})
			rec = &slab[len(slab)-1]
			q.InFlight[off] = rec
			q.order = append(q.order, off)
		default:
			continue
		}
		r.Popped = append(r.Popped, *rec)
	}
	if cursorOK {
		q.Next = max(q.Next, o.To)
	} else if o.To > o.From {
		r.Err = ErrMoved // the revived records it took stand
	}
	return r
}

// find returns the record an ack, change or revive names, or the error.
func find(q *Queue, o *Op) (*Record, Result) { return findAt(q, o.Offset, o.PopTime) }

// findAt returns the record at off with a receipt of popTime, or the error.
func findAt(q *Queue, off, popTime int64) (*Record, Result) {
	if q == nil || off >= q.Next || off < 0 {
		return nil, Result{Err: ErrNotPopped}
	}
	rec := q.InFlight[off]
	if rec == nil {
		return nil, Result{Done: true}
	}
	if rec.PopTime != popTime {
		return nil, Result{Err: ErrStale}
	}
	return rec, Result{}
}

func ack(q *Queue, off, popTime int64) Result {
	rec, r := findAt(q, off, popTime)
	if rec == nil {
		return r
	}
	q.remove(off)
	return r
}

// acks acks each of o.Offsets at o.PopTime, in order.
func acks(q *Queue, o *Op) Result {
	if len(o.Offsets) == 0 {
		return Result{Err: fmt.Errorf("%w: acks without offsets", ErrBadOp)}
	}
	var out Result
	for i, off := range o.Offsets {
		r := ack(q, off, o.PopTime)
		switch {
		case r.Err != nil:
			if out.Errs == nil {
				out.Errs = make([]error, len(o.Offsets))
			}
			out.Errs[i] = r.Err
		case !r.Done:
			out.Acked++
		}
	}
	return out
}

func change(now int64, q *Queue, o *Op) Result {
	if o.Invisible < 0 {
		return Result{Err: fmt.Errorf("%w: invisible time %d", ErrBadOp, o.Invisible)}
	}
	rec, r := find(q, o)
	if rec == nil {
		if r.Done {
			// The message was acked: there is nothing to keep hidden.
			return Result{Err: ErrStale}
		}
		return r
	}
	// A new pop time, later than the last, so the old receipt dies.
	rec.PopTime = max(now, rec.PopTime+1)
	rec.VisibleAt = rec.PopTime + o.Invisible
	q.setRevived(rec, false)
	return Result{PopTime: rec.PopTime}
}

func revive(now int64, q *Queue, o *Op) Result {
	rec, r := find(q, o)
	if rec == nil {
		return r
	}
	if rec.Revived || rec.VisibleAt > now {
		return Result{Err: ErrNotDue}
	}
	if o.DLQ {
		q.remove(o.Offset)
		return Result{DLQ: true}
	}
	q.setRevived(rec, true)
	return Result{}
}

// drop removes the record o names, whatever its state: its message is
// gone from the queue. A record popped again or changed since the leader
// looked is still removed only if the receipt matches, so a drop built from
// an old state never removes a delivery it did not see.
func drop(q *Queue, o *Op) Result {
	rec, r := find(q, o)
	if rec == nil {
		return r
	}
	q.remove(o.Offset)
	return Result{Dropped: true}
}

// deadLetter removes the record a receipt names, whether hidden or
// revived (as an ack does), so that its copy is stored in the dead-letter
// topic. A message acked (or dead-lettered) before has no copy to store:
// the receipt is stale.
func deadLetter(q *Queue, o *Op) Result {
	if !o.DLQ {
		return Result{Err: fmt.Errorf("%w: dead letter without its copy", ErrBadOp)}
	}
	rec, r := find(q, o)
	if rec == nil {
		if r.Done {
			return Result{Err: ErrStale}
		}
		return r
	}
	q.remove(o.Offset)
	return Result{DLQ: true}
}

// Due returns, in offset order, the records of q that are hidden and whose
// visible-again time is at or before now.
func (q *Queue) Due(now int64) []Record {
	var out []Record
	for _, r := range q.InFlight {
		if !r.Revived && r.VisibleAt <= now {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return int(min(max(a.Offset-b.Offset, -1), 1)) })
	return out
}

// Due returns the records hidden past their visible-again time at now,
// by queue and in offset order, at most limit in all: what the leader
// revives next. With the index it costs the due records (and index
// entries of records acked or changed since, which trim drops once they
// reach the top).
func (s *State) Due(now int64, limit int) map[Key][]Record {
	out := map[Key][]Record{}
	if !s.due.built {
		n := 0
		for k, q := range s.Queues {
			if n >= limit {
				break
			}
			if due := q.Due(now); len(due) > 0 {
				if len(due) > limit-n {
					due = due[:limit-n]
				}
				out[k] = due
				n += len(due)
			}
		}
		return out
	}
	s.due.walk(now, limit, func(e *dueEntry) {
		out[e.q.key] = append(out[e.q.key], *e.q.InFlight[e.off])
	}, s)
	for _, recs := range out {
		slices.SortFunc(recs, func(a, b Record) int { return cmp.Compare(a.Offset, b.Offset) })
	}
	return out
}

// dueIndex is a min-heap of hidden records by visible-again time. An entry
// is added whenever a record gets a visible-again time (a pop, a change
// of invisible time) and is never updated: an entry whose record was
// acked, revived or changed since is stale (live reports it) and is
// dropped when it reaches the top (trim), or when the heap, grown to
// twice its live size, is rebuilt from the state. The index is derived
// from the state alone, so every replica, and a replica restarted or
// restored from a snapshot, finds the same due records. An entry points
// at its queue rather than holding its key: a queue stays in
// State.Queues once made (and filling Queues by hand is followed by a
// Reindex), so an entry tells whether it is live without hashing a
// group and a topic (a follower's profile during bench pop had the
// index's trim at 5 % of the node's CPU, all of it in that lookup).
type dueIndex struct {
	built bool
	h     []dueEntry
	// rebuildAt is the heap size past which build runs again.
	rebuildAt int
}

type dueEntry struct {
	at      int64 // VisibleAt
	popTime int64
	off     int64
	q       *Queue
}

// live reports whether e still describes a hidden record.
func (s *State) live(e *dueEntry) bool {
	r := e.q.InFlight[e.off]
	return r != nil && !r.Revived && r.PopTime == e.popTime && r.VisibleAt == e.at
}

func (d *dueIndex) build(s *State) {
	d.h = d.h[:0]
	for k, q := range s.Queues {
		q.key = k
		for _, r := range q.InFlight {
			if !r.Revived {
				d.h = append(d.h, dueEntry{at: r.VisibleAt, popTime: r.PopTime, off: r.Offset, q: q})
			}
		}
	}
	for i := len(d.h)/2 - 1; i >= 0; i-- {
		d.down(i)
	}
	d.built = true
	d.rebuildAt = 2*len(d.h) + 1024
}

func (d *dueIndex) add(q *Queue, r *Record) {
	d.h = append(d.h, dueEntry{at: r.VisibleAt, popTime: r.PopTime, off: r.Offset, q: q})
	d.up(len(d.h) - 1)
}

// trim drops the stale entries at the top, and rebuilds the heap when
// stale entries make up half of it.
func (d *dueIndex) trim(s *State) {
	for len(d.h) > 0 && !s.live(&d.h[0]) {
		last := len(d.h) - 1
		d.h[0] = d.h[last]
		d.h = d.h[:last]
		if last > 0 {
			d.down(0)
		}
	}
	if len(d.h) > d.rebuildAt {
		d.build(s)
	}
}

// walk calls fn with up to limit live entries due at now. The entries due
// form a subtree at the root (a parent is never later than its children),
// so the walk stops at the first entry not due on each path.
func (d *dueIndex) walk(now int64, limit int, fn func(*dueEntry), s *State) {
	if len(d.h) == 0 {
		return
	}
	stack := []int{0}
	n := 0
	for len(stack) > 0 && n < limit {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		e := &d.h[i]
		if e.at > now {
			continue
		}
		if s.live(e) {
			fn(e)
			n++
		}
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(d.h) {
				stack = append(stack, c)
			}
		}
	}
}

func (d *dueIndex) less(i, j int) bool {
	a, b := &d.h[i], &d.h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.off < b.off
}

func (d *dueIndex) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !d.less(i, p) {
			return
		}
		d.h[i], d.h[p] = d.h[p], d.h[i]
		i = p
	}
}

func (d *dueIndex) down(i int) {
	n := len(d.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && d.less(r, l) {
			c = r
		}
		if !d.less(c, i) {
			return
		}
		d.h[i], d.h[c] = d.h[c], d.h[i]
		i = c
	}
}

// The entry payload: the batch's head, then the records of its DLQ
// revives back to back.
//
//	| head length u32 | head | records |
//
// The head is binary (batchV1, below) or, as entries written before it,
// a JSON Batch, which starts with '{': DecodeBatch reads both, so a log
// holding entries of either build replays alike.
//
//	batchV1: | 0x01 | now varint | ops uvarint | ops × op |
//	op: | type u8 | flags u8 | group str | topic str | queue varint |
//	    | from varint | to varint | offsets uvarint | offsets × delta varint |
//	    | invisible varint | attempt id str | offset varint | pop time varint |
//	str: | length uvarint | bytes |
//
// type: 1 pop, 2 ack, 3 change, 4 revive, 5 drop, 6 dead letter, 7 acks
// (a build that knows no 7 refuses the entry). flags: 1 init, 2 order,
// 4 dlq. The offsets are the first one, then each one's difference to the
// one before.
const batchV1 = 0x01

// opCodes are the op types' codes in batchV1; a batch with an op of
// another type is written as JSON.
var opCodes = map[string]byte{OpPop: 1, OpAck: 2, OpChange: 3, OpRevive: 4, OpDrop: 5, OpDeadLetter: 6, OpAcks: 7}

var opTypes = [...]string{1: OpPop, 2: OpAck, 3: OpChange, 4: OpRevive, 5: OpDrop, 6: OpDeadLetter, 7: OpAcks}

// AppendBatch appends b's encoding; the records follow it.
func AppendBatch(dst []byte, b *Batch) ([]byte, error) { return AppendBatchAs(dst, b, true) }

// AppendBatchAs is AppendBatch writing a JSON head, as builds from before
// batchV1 read, unless v1.
func AppendBatchAs(dst []byte, b *Batch, v1 bool) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	head, ok := dst, false
	if v1 {
		head, ok = appendBatchV1(dst, b)
	}
	if !ok {
		js, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("pop: encode batch: %w", err)
		}
		head = append(dst, js...)
	}
	binary.BigEndian.PutUint32(head[start:], uint32(len(head)-start-4))
	return head, nil
}

func appendBatchV1(dst []byte, b *Batch) ([]byte, bool) {
	dst = append(dst, batchV1)
	dst = binary.AppendVarint(dst, b.Now)
	dst = binary.AppendUvarint(dst, uint64(len(b.Ops)))
	for i := range b.Ops {
		o := &b.Ops[i]
		code, ok := opCodes[o.Type]
		if !ok {
			return nil, false
		}
		var flags byte
		if o.Init {
			flags |= 1
		}
		if o.Order {
			flags |= 2
		}
		if o.DLQ {
			flags |= 4
		}
		dst = append(dst, code, flags)
		dst = appendStr(dst, o.Group)
		dst = appendStr(dst, o.Topic)
		dst = binary.AppendVarint(dst, int64(o.Queue))
		dst = binary.AppendVarint(dst, o.From)
		dst = binary.AppendVarint(dst, o.To)
		dst = binary.AppendUvarint(dst, uint64(len(o.Offsets)))
		prev := int64(0)
		for _, off := range o.Offsets {
			dst = binary.AppendVarint(dst, off-prev)
			prev = off
		}
		dst = binary.AppendVarint(dst, o.Invisible)
		dst = appendStr(dst, o.AttemptID)
		dst = binary.AppendVarint(dst, o.Offset)
		dst = binary.AppendVarint(dst, o.PopTime)
	}
	return dst, true
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// ErrBadBatch is returned for a pop entry that does not decode.
var ErrBadBatch = errors.New("pop: malformed pop entry")

// DecodeBatch splits a pop entry payload into its head and its records.
func DecodeBatch(p []byte) (*Batch, []byte, error) {
	if len(p) < 4 {
		return nil, nil, fmt.Errorf("%w: %d bytes", ErrBadBatch, len(p))
	}
	n := binary.BigEndian.Uint32(p)
	if uint64(n) > uint64(len(p)-4) {
		return nil, nil, fmt.Errorf("%w: head of %d bytes in %d", ErrBadBatch, n, len(p))
	}
	head := p[4 : 4+n]
	if len(head) > 0 && head[0] == batchV1 {
		b, err := decodeBatchV1(head[1:])
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrBadBatch, err)
		}
		return b, p[4+n:], nil
	}
	var b Batch
	if err := json.Unmarshal(head, &b); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBadBatch, err)
	}
	return &b, p[4+n:], nil
}

// batchReader reads batchV1's fields; the first failure sticks.
type batchReader struct {
	p   []byte
	err error
}

func (r *batchReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.p)
	if n <= 0 {
		r.err = errors.New("truncated varint")
		return 0
	}
	r.p = r.p[n:]
	return v
}

// count reads a count of items of at least size bytes each, which must
// fit in what follows it.
func (r *batchReader) count(size int) int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.p)
	if n <= 0 || v > uint64(len(r.p)-n)/uint64(size) {
		r.err = fmt.Errorf("bad count (%d bytes left)", len(r.p))
		return 0
	}
	r.p = r.p[n:]
	return int(v)
}

func (r *batchReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.p) == 0 {
		r.err = errors.New("truncated")
		return 0
	}
	c := r.p[0]
	r.p = r.p[1:]
	return c
}

// str reads a string: prev if it holds the same bytes (the ops of a
// batch mostly name the same group and topic).
func (r *batchReader) str(prev string) string {
	n := r.count(1)
	if r.err != nil {
		return ""
	}
	b := r.p[:n]
	r.p = r.p[n:]
	if string(b) == prev {
		return prev
	}
	return string(b)
}

func decodeBatchV1(p []byte) (*Batch, error) {
	r := &batchReader{p: p}
	b := &Batch{Now: r.varint()}
	n := r.count(12) // an op takes 12 bytes at least
	if r.err != nil {
		return nil, r.err
	}
	b.Ops = make([]Op, n)
	for i := range b.Ops {
		o := &b.Ops[i]
		code, flags := r.byte(), r.byte()
		if r.err == nil && (int(code) >= len(opTypes) || opTypes[code] == "") {
			return nil, fmt.Errorf("op %d: type code %d", i, code)
		}
		o.Type = opTypes[code]
		o.Init, o.Order, o.DLQ = flags&1 != 0, flags&2 != 0, flags&4 != 0
		var pg, pt string
		if i > 0 {
			pg, pt = b.Ops[i-1].Group, b.Ops[i-1].Topic
		}
		o.Group, o.Topic = r.str(pg), r.str(pt)
		q := r.varint()
		if q < math.MinInt32 || q > math.MaxInt32 {
			return nil, fmt.Errorf("op %d: queue %d", i, q)
		}
		o.Queue = int32(q)
		o.From, o.To = r.varint(), r.varint()
		if k := r.count(1); k > 0 {
			o.Offsets = make([]int64, k)
			prev := int64(0)
			for j := range o.Offsets {
				prev += r.varint()
				o.Offsets[j] = prev
			}
		}
		o.Invisible = r.varint()
		o.AttemptID = r.str("")
		o.Offset, o.PopTime = r.varint(), r.varint()
		if r.err != nil {
			return nil, fmt.Errorf("op %d of %d: %w", i, n, r.err)
		}
	}
	if len(r.p) != 0 {
		return nil, fmt.Errorf("%d bytes after %d ops", len(r.p), n)
	}
	return b, nil
}

// Encoding of a Queue (the value of its key in the store's database):
//
//	| next i64 | count u32 | count × record |
//	record: | offset i64 | pop time i64 | visible at i64 | attempt i32 | revived u8 | attempt id length u16 | attempt id |
const recordFixed = 8 + 8 + 8 + 4 + 1 + 2

// Encode returns q's encoding, records by offset.
func (q *Queue) Encode() []byte {
	b := make([]byte, 0, 12+recordFixed*len(q.InFlight))
	b = binary.BigEndian.AppendUint64(b, uint64(q.Next))
	b = binary.BigEndian.AppendUint32(b, uint32(len(q.InFlight)))
	for _, r := range q.Sorted() {
		b = binary.BigEndian.AppendUint64(b, uint64(r.Offset))
		b = binary.BigEndian.AppendUint64(b, uint64(r.PopTime))
		b = binary.BigEndian.AppendUint64(b, uint64(r.VisibleAt))
		b = binary.BigEndian.AppendUint32(b, uint32(r.Attempt))
		var rv byte
		if r.Revived {
			rv = 1
		}
		b = append(b, rv)
		id := r.AttemptID[:min(len(r.AttemptID), 1<<16-1)]
		b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
		b = append(b, id...)
	}
	return b
}

// DecodeQueue decodes Encode's output.
func DecodeQueue(b []byte) (*Queue, error) {
	if len(b) < 12 {
		return nil, fmt.Errorf("pop: queue state of %d bytes", len(b))
	}
	q := &Queue{Next: int64(binary.BigEndian.Uint64(b)), InFlight: map[int64]*Record{}}
	n := int(binary.BigEndian.Uint32(b[8:]))
	b = b[12:]
	for i := 0; i < n; i++ {
		if len(b) < recordFixed {
			return nil, fmt.Errorf("pop: queue state: record %d of %d truncated", i, n)
		}
		r := &Record{
			Offset:    int64(binary.BigEndian.Uint64(b)),
			PopTime:   int64(binary.BigEndian.Uint64(b[8:])),
			VisibleAt: int64(binary.BigEndian.Uint64(b[16:])),
			Attempt:   int32(binary.BigEndian.Uint32(b[24:])),
			Revived:   b[28] == 1,
		}
		idLen := int(binary.BigEndian.Uint16(b[29:]))
		b = b[recordFixed:]
		if len(b) < idLen {
			return nil, fmt.Errorf("pop: queue state: record %d of %d truncated", i, n)
		}
		r.AttemptID = string(b[:idLen])
		b = b[idLen:]
		q.InFlight[r.Offset] = r
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("pop: queue state: %d bytes after %d records", len(b), n)
	}
	q.buildOrder()
	return q, nil
}
