package pop

import (
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

const g, tp = "g", "T"

func popOp(from, to int64, init bool, inv int64, offs ...int64) Op {
	return Op{Type: OpPop, Group: g, Topic: tp, From: from, To: to, Init: init, Offsets: offs, Invisible: inv}
}

func offsetsOf(rs []Record) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Offset)
	}
	return out
}

func one(t *testing.T, s *State, now int64, o Op) Result {
	t.Helper()
	return s.Apply(&Batch{Now: now, Ops: []Op{o}})[0]
}

func TestPopAckLifecycle(t *testing.T) {
	s := NewState()
	r := one(t, s, 1000, popOp(0, 3, true, 500, 0, 1, 2))
	if r.Err != nil || !reflect.DeepEqual(offsetsOf(r.Popped), []int64{0, 1, 2}) {
		t.Fatalf("pop: %+v", r)
	}
	if r.Popped[0].PopTime != 1000 || r.Popped[0].VisibleAt != 1500 || r.Popped[0].Attempt != 1 {
		t.Fatalf("record %+v", r.Popped[0])
	}
	// The same pop again (proposed twice): the cursor moved, nothing taken.
	if r := one(t, s, 1001, popOp(0, 3, true, 500, 0, 1, 2)); !errors.Is(r.Err, ErrMoved) || len(r.Popped) != 0 {
		t.Fatalf("second pop: %+v", r)
	}
	// Ack with the wrong pop time: stale, nothing changes.
	if r := one(t, s, 1002, Op{Type: OpAck, Group: g, Topic: tp, Offset: 1, PopTime: 999}); !errors.Is(r.Err, ErrStale) {
		t.Fatalf("stale ack: %+v", r)
	}
	if r := one(t, s, 1002, Op{Type: OpAck, Group: g, Topic: tp, Offset: 1, PopTime: 1000}); r.Err != nil || r.Done || r.LowWater != 0 {
		t.Fatalf("ack: %+v", r)
	}
	// Idempotent.
	if r := one(t, s, 1003, Op{Type: OpAck, Group: g, Topic: tp, Offset: 1, PopTime: 1000}); r.Err != nil || !r.Done {
		t.Fatalf("ack again: %+v", r)
	}
	// Never popped.
	if r := one(t, s, 1003, Op{Type: OpAck, Group: g, Topic: tp, Offset: 7, PopTime: 1000}); !errors.Is(r.Err, ErrNotPopped) {
		t.Fatalf("forged ack: %+v", r)
	}
	if r := one(t, s, 1003, Op{Type: OpAck, Group: "other", Topic: tp, Offset: 0, PopTime: 1000}); !errors.Is(r.Err, ErrNotPopped) {
		t.Fatalf("other group's ack: %+v", r)
	}
	if r := one(t, s, 1004, Op{Type: OpAck, Group: g, Topic: tp, Offset: 0, PopTime: 1000}); r.Err != nil || r.LowWater != 2 {
		t.Fatalf("ack 0: %+v", r)
	}
}

// TestAcksMatchAckEach: an OpAcks of a pop's offsets leaves the state an
// OpAck of each would, with each offset's outcome (acked, acked before,
// stale, never popped) in Errs, and the count of records it removed.
func TestAcksMatchAckEach(t *testing.T) {
	build := func() *State {
		s := NewState()
		one(t, s, 1000, popOp(0, 6, true, 500, 0, 1, 2, 3, 4, 5))
		one(t, s, 1001, Op{Type: OpChange, Group: g, Topic: tp, Offset: 4, PopTime: 1000, Invisible: 500})
		one(t, s, 1002, Op{Type: OpAck, Group: g, Topic: tp, Offset: 2, PopTime: 1000})
		return s
	}
	offs := []int64{0, 1, 2, 4, 9, 1, 5}
	each, many := build(), build()
	var want []error
	for _, off := range offs {
		r := one(t, each, 1003, Op{Type: OpAck, Group: g, Topic: tp, Offset: off, PopTime: 1000})
		want = append(want, r.Err)
	}
	r := one(t, many, 1003, Op{Type: OpAcks, Group: g, Topic: tp, Offsets: offs, PopTime: 1000})
	require.NoError(t, r.Err)
	require.Len(t, r.Errs, len(offs))
	for i := range offs {
		require.ErrorIs(t, r.Errs[i], want[i], "offset %d", offs[i])
		if want[i] == nil {
			require.NoError(t, r.Errs[i], "offset %d", offs[i])
		}
	}
	require.Equal(t, 3, r.Acked, "0, 1 and 5 were removed; 2 was acked before, 1 again is done")
	require.Equal(t, int64(3), r.LowWater)
	k := Key{g, tp, 0}
	require.Equal(t, each.Queues[k].Sorted(), many.Queues[k].Sorted())
	require.Equal(t, each.Due(1e9, 100), many.Due(1e9, 100))

	// All acked: no Errs; no offsets: a malformed op.
	s := build()
	r = one(t, s, 1003, Op{Type: OpAcks, Group: g, Topic: tp, Offsets: []int64{0, 1, 3, 5}, PopTime: 1000})
	require.NoError(t, r.Err)
	require.Nil(t, r.Errs)
	require.Equal(t, 4, r.Acked)
	r = one(t, s, 1003, Op{Type: OpAcks, Group: g, Topic: tp, PopTime: 1000})
	require.ErrorIs(t, r.Err, ErrBadOp)
}

func TestReviveAndRepop(t *testing.T) {
	s := NewState()
	one(t, s, 1000, popOp(0, 2, true, 500, 0, 1))
	// Too early: refused whatever the leader said.
	if r := one(t, s, 1499, Op{Type: OpRevive, Group: g, Topic: tp, Offset: 0, PopTime: 1000}); !errors.Is(r.Err, ErrNotDue) {
		t.Fatalf("early revive: %+v", r)
	}
	if due := s.Queues[Key{g, tp, 0}].Due(1500); !reflect.DeepEqual(offsetsOf(due), []int64{0, 1}) {
		t.Fatalf("due %v", due)
	}
	if r := one(t, s, 1500, Op{Type: OpRevive, Group: g, Topic: tp, Offset: 0, PopTime: 1000}); r.Err != nil {
		t.Fatalf("revive: %+v", r)
	}
	if r := one(t, s, 1500, Op{Type: OpRevive, Group: g, Topic: tp, Offset: 0, PopTime: 1000}); !errors.Is(r.Err, ErrNotDue) {
		t.Fatalf("revive twice: %+v", r)
	}
	// Offset 1 is still hidden: only 0 is popped again, with attempt 2
	// and a new pop time.
	r := one(t, s, 1600, popOp(2, 2, false, 500, 0, 1))
	if r.Err != nil || len(r.Popped) != 1 || r.Popped[0].Offset != 0 || r.Popped[0].Attempt != 2 || r.Popped[0].PopTime != 1600 {
		t.Fatalf("re-pop: %+v", r)
	}
	// The first receipt is dead; the second acks.
	if r := one(t, s, 1601, Op{Type: OpAck, Group: g, Topic: tp, Offset: 0, PopTime: 1000}); !errors.Is(r.Err, ErrStale) {
		t.Fatalf("old receipt: %+v", r)
	}
	if r := one(t, s, 1601, Op{Type: OpAck, Group: g, Topic: tp, Offset: 0, PopTime: 1600}); r.Err != nil {
		t.Fatalf("new receipt: %+v", r)
	}
	// A revived record is not popped again at its own pop time.
	s2 := NewState()
	one(t, s2, 10, popOp(0, 1, true, 1, 0))
	one(t, s2, 11, Op{Type: OpRevive, Group: g, Topic: tp, Offset: 0, PopTime: 10})
	if r := one(t, s2, 10, popOp(1, 1, false, 5, 0)); len(r.Popped) != 0 {
		t.Fatalf("re-pop at the same time: %+v", r)
	}
}

func TestChangeInvisible(t *testing.T) {
	s := NewState()
	one(t, s, 1000, popOp(0, 1, true, 500, 0))
	r := one(t, s, 1000, Op{Type: OpChange, Group: g, Topic: tp, Offset: 0, PopTime: 1000, Invisible: 2000})
	if r.Err != nil || r.PopTime != 1001 {
		t.Fatalf("change: %+v", r)
	}
	rec := s.Queues[Key{g, tp, 0}].InFlight[0]
	if rec.VisibleAt != 3001 || rec.Attempt != 1 {
		t.Fatalf("record %+v", rec)
	}
	if r := one(t, s, 1600, Op{Type: OpRevive, Group: g, Topic: tp, Offset: 0, PopTime: 1001}); !errors.Is(r.Err, ErrNotDue) {
		t.Fatalf("revive before the new time: %+v", r)
	}
	if r := one(t, s, 1700, Op{Type: OpChange, Group: g, Topic: tp, Offset: 0, PopTime: 1000, Invisible: 1}); !errors.Is(r.Err, ErrStale) {
		t.Fatalf("change with the old receipt: %+v", r)
	}
	one(t, s, 1800, Op{Type: OpAck, Group: g, Topic: tp, Offset: 0, PopTime: 1001})
	if r := one(t, s, 1900, Op{Type: OpChange, Group: g, Topic: tp, Offset: 0, PopTime: 1001, Invisible: 1}); !errors.Is(r.Err, ErrStale) {
		t.Fatalf("change after ack: %+v", r)
	}
}

func TestOrderlyPop(t *testing.T) {
	s := NewState()
	o := popOp(0, 1, true, 100, 0)
	o.Order = true
	one(t, s, 10, o)
	o2 := popOp(1, 2, false, 100, 1)
	o2.Order = true
	if r := one(t, s, 20, o2); !errors.Is(r.Err, ErrBusy) {
		t.Fatalf("orderly pop while busy: %+v", r)
	}
	if s.Queues[Key{g, tp, 0}].Next != 1 {
		t.Fatal("a refused pop moved the cursor")
	}
	one(t, s, 30, Op{Type: OpAck, Group: g, Topic: tp, Offset: 0, PopTime: 10})
	if r := one(t, s, 40, o2); r.Err != nil || len(r.Popped) != 1 {
		t.Fatalf("orderly pop after ack: %+v", r)
	}
}

func TestDLQAndFilterSkips(t *testing.T) {
	s := NewState()
	// Offsets 1 and 2 were skipped by the filter: the cursor passes them.
	r := one(t, s, 10, popOp(0, 4, true, 5, 0, 3))
	if !reflect.DeepEqual(offsetsOf(r.Popped), []int64{0, 3}) || s.Queues[Key{g, tp, 0}].Next != 4 {
		t.Fatalf("filtered pop: %+v", r)
	}
	r = one(t, s, 20, Op{Type: OpRevive, Group: g, Topic: tp, Offset: 0, PopTime: 10, DLQ: true})
	if r.Err != nil || !r.DLQ || r.LowWater != 3 {
		t.Fatalf("dlq revive: %+v", r)
	}
	if r := one(t, s, 21, Op{Type: OpAck, Group: g, Topic: tp, Offset: 0, PopTime: 10}); !r.Done {
		t.Fatalf("ack after dlq: %+v", r)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	s := NewState()
	o := popOp(5, 9, true, 5, 5, 6, 8)
	o.AttemptID = "attempt-1"
	one(t, s, 10, o)
	one(t, s, 20, Op{Type: OpRevive, Group: g, Topic: tp, Offset: 6, PopTime: 10})
	require.Equal(t, "attempt-1", s.Queues[Key{g, tp, 0}].InFlight[8].AttemptID)
	q := s.Queues[Key{g, tp, 0}]
	got, err := DecodeQueue(q.Encode())
	if got != nil {
		got.key = q.key // the state's map key, not part of the encoding
	}
	if err != nil || !reflect.DeepEqual(got, q) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, got, q)
	}
	if _, err := DecodeQueue(q.Encode()[:20]); err == nil {
		t.Fatal("truncated state decoded")
	}
	b := &Batch{Now: 7, Ops: []Op{popOp(0, 1, true, 3, 0)}}
	p, err := AppendBatch(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	p = append(p, "records"...)
	got2, recs, err := DecodeBatch(p)
	if err != nil || !reflect.DeepEqual(got2, b) || string(recs) != "records" {
		t.Fatalf("batch round trip: %v %+v %q", err, got2, recs)
	}
	if _, _, err := DecodeBatch(p[:3]); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("short batch: %v", err)
	}
}

// Two replicas applying the same batches reach the same state, whatever
// order the ops of their maps were visited in.
func TestDeterministic(t *testing.T) {
	batches := []*Batch{
		{Now: 10, Ops: []Op{popOp(0, 8, true, 5, 0, 1, 2, 3, 4, 5, 6, 7)}},
		{Now: 12, Ops: []Op{{Type: OpAck, Group: g, Topic: tp, Offset: 3, PopTime: 10}, {Type: OpChange, Group: g, Topic: tp, Offset: 4, PopTime: 10, Invisible: 50}}},
		{Now: 16, Ops: []Op{{Type: OpRevive, Group: g, Topic: tp, Offset: 0, PopTime: 10}, {Type: OpRevive, Group: g, Topic: tp, Offset: 1, PopTime: 10, DLQ: true}}},
		{Now: 17, Ops: []Op{popOp(8, 8, false, 5, 0, 2)}},
	}
	a, b := NewState(), NewState()
	for _, bt := range batches {
		ra, rb := a.Apply(bt), b.Apply(bt)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("results differ: %+v %+v", ra, rb)
		}
	}
	qa, qb := a.Queues[Key{g, tp, 0}], b.Queues[Key{g, tp, 0}]
	if string(qa.Encode()) != string(qb.Encode()) {
		t.Fatal("states differ")
	}
	if want := []int64{0, 2, 4, 5, 6, 7}; !reflect.DeepEqual(offsetsOf(qa.Sorted()), want) {
		t.Fatalf("in flight %v, want %v", offsetsOf(qa.Sorted()), want)
	}
}

// A dead letter removes the record its receipt names, hidden or revived,
// and answers DLQ; a stale receipt, an acked message or an op without its
// copy change nothing.
func TestDeadLetter(t *testing.T) {
	s := NewState()
	one(t, s, 1000, popOp(0, 3, true, 500, 0, 1, 2))
	dead := func(off, pt int64) Op {
		return Op{Type: OpDeadLetter, Group: g, Topic: tp, Offset: off, PopTime: pt, DLQ: true}
	}
	if r := one(t, s, 1001, Op{Type: OpDeadLetter, Group: g, Topic: tp, Offset: 0, PopTime: 1000}); !errors.Is(r.Err, ErrBadOp) {
		t.Fatalf("dead letter without copy: %+v", r)
	}
	if r := one(t, s, 1001, dead(0, 999)); !errors.Is(r.Err, ErrStale) || r.DLQ {
		t.Fatalf("stale dead letter: %+v", r)
	}
	if r := one(t, s, 1001, dead(0, 1000)); r.Err != nil || !r.DLQ || r.LowWater != 1 {
		t.Fatalf("dead letter: %+v", r)
	}
	if r := one(t, s, 1002, dead(0, 1000)); !errors.Is(r.Err, ErrStale) || r.DLQ {
		t.Fatalf("dead letter again: %+v", r)
	}
	one(t, s, 1002, Op{Type: OpAck, Group: g, Topic: tp, Offset: 1, PopTime: 1000})
	if r := one(t, s, 1003, dead(1, 1000)); !errors.Is(r.Err, ErrStale) {
		t.Fatalf("dead letter of an acked message: %+v", r)
	}
	if r := one(t, s, 1003, dead(9, 1000)); !errors.Is(r.Err, ErrNotPopped) {
		t.Fatalf("dead letter never popped: %+v", r)
	}
	// Revived (its invisible time passed, not popped again): the receipt
	// still holds it.
	if r := one(t, s, 1600, Op{Type: OpRevive, Group: g, Topic: tp, Offset: 2, PopTime: 1000}); r.Err != nil {
		t.Fatalf("revive: %+v", r)
	}
	if r := one(t, s, 1601, dead(2, 1000)); r.Err != nil || !r.DLQ || r.LowWater != 3 {
		t.Fatalf("dead letter of a revived record: %+v", r)
	}
}

// The revived count that Busy and RevivedBefore use stays equal to what
// walking the records gives, through every kind of op.
func TestRevivedCountMatchesRecords(t *testing.T) {
	s := NewState()
	k := Key{Group: g, Topic: tp}
	check := func(when string, now int64) {
		t.Helper()
		q := s.Queues[k]
		walk := &Queue{Next: q.Next, InFlight: q.InFlight} // not ordered: walks
		require.Equal(t, walk.Busy(), q.Busy(), when)
		require.Equal(t, walk.RevivedBefore(1000, now), q.RevivedBefore(1000, now), when)
		require.Equal(t, walk.Hidden(), q.Hidden(), when)
		require.Equal(t, walk.RevivedBefore(2, now), q.RevivedBefore(2, now), when)
	}
	one(t, s, 100, popOp(0, 6, true, 10, 0, 1, 2, 3, 4, 5))
	check("popped", 100)
	for off := int64(0); off < 5; off++ {
		require.NoError(t, one(t, s, 200, Op{Type: OpRevive, Group: g, Topic: tp, Offset: off, PopTime: 100}).Err)
	}
	check("revived", 300)
	require.Positive(t, len(s.Queues[k].RevivedBefore(10, 300)))
	require.NoError(t, one(t, s, 300, Op{Type: OpAck, Group: g, Topic: tp, Offset: 0, PopTime: 100}).Err)
	require.NoError(t, one(t, s, 300, Op{Type: OpChange, Group: g, Topic: tp, Offset: 1, PopTime: 100, Invisible: 10}).Err)
	require.NoError(t, one(t, s, 300, Op{Type: OpDrop, Group: g, Topic: tp, Offset: 2, PopTime: 100}).Err)
	require.NoError(t, one(t, s, 300, Op{Type: OpDeadLetter, Group: g, Topic: tp, Offset: 3, PopTime: 100, DLQ: true}).Err)
	check("acked, changed, dropped, dead-lettered", 400)
	r := one(t, s, 400, popOp(6, 6, false, 10, 4))
	require.Equal(t, []int64{4}, offsetsOf(r.Popped))
	check("revived popped again", 500)
	require.NoError(t, one(t, s, 500, Op{Type: OpRevive, Group: g, Topic: tp, Offset: 5, PopTime: 100, DLQ: true}).Err)
	check("revived to the dead-letter queue", 600)
	c, err := DecodeQueue(s.Queues[k].Encode())
	require.NoError(t, err)
	require.Equal(t, s.Queues[k].revived, c.revived)
	require.Equal(t, s.Queues[k].Busy(), c.Busy())
}
