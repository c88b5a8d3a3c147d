package pop

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// benchState returns a state of queues queues with perQueue records each,
// popped at time 0 for 60 s, and of which the first due of queue 0 were
// then changed to become visible at 1 s.
func benchState(b *testing.B, queues, perQueue, due int) *State {
	b.Helper()
	s := NewState()
	for q := range queues {
		offs := make([]int64, perQueue)
		for i := range offs {
			offs[i] = int64(i)
		}
		r := s.ApplyOp(0, &Op{Type: OpPop, Group: "g", Topic: "T", Queue: int32(q), Init: true, From: 0, To: int64(perQueue), Offsets: offs, Invisible: 60_000})
		if r.Err != nil || len(r.Popped) != perQueue {
			b.Fatalf("pop: %v, %d popped", r.Err, len(r.Popped))
		}
	}
	for i := range due {
		r := s.ApplyOp(0, &Op{Type: OpChange, Group: "g", Topic: "T", Queue: 0, Offset: int64(i), PopTime: 0, Invisible: 1000})
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	return s
}

// BenchmarkDue: the revive scan over 100k in-flight records (100 queues
// of 1,000), of which none or 100 are due, with the index and without it
// (scan: every record looked at, as before the index).
func BenchmarkDue(b *testing.B) {
	for _, mode := range []string{"index", "scan"} {
		for _, due := range []int{0, 100} {
			b.Run(fmt.Sprintf("%s/inflight=100k/due=%d", mode, due), func(b *testing.B) { benchDue(b, mode == "index", due) })
		}
	}
}

func benchDue(b *testing.B, index bool, due int) {
	s := benchState(b, 100, 1000, due)
	if !index {
		s = &State{Queues: s.Queues} // no index: Due walks every record
	}
	b.ResetTimer()
	for range b.N {
		got := s.Due(2000, 1024)
		if len(got[Key{"g", "T", 0}]) != due {
			b.Fatalf("%d due, want %d", len(got[Key{"g", "T", 0}]), due)
		}
	}
}

// scanDue is Due without the index: every record looked at.
func scanDue(s *State, now int64) map[Key][]Record {
	out := map[Key][]Record{}
	for k, q := range s.Queues {
		if due := q.Due(now); len(due) > 0 {
			out[k] = due
		}
	}
	return out
}

// The index finds exactly the records a full scan finds, through random
// pops, acks, changes, revives and drops, and so does an index rebuilt
// from the state alone (a restart, a snapshot); each queue's low water
// (from its offset order) is the lowest offset a scan finds.
func TestDueIndexMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewState()
	now := int64(1000)
	for step := range 20000 {
		now += rng.Int64N(20)
		q := int32(rng.IntN(3))
		k := Key{"g", "T", q}
		pq := s.Queues[k]
		var recs []Record
		if pq != nil {
			recs = pq.Sorted()
		}
		pick := func() Record {
			if len(recs) == 0 {
				return Record{Offset: rng.Int64N(10)}
			}
			return recs[rng.IntN(len(recs))]
		}
		var o Op
		switch c := rng.IntN(10); {
		case c < 3:
			from := int64(0)
			if pq != nil {
				from = pq.Next
			}
			var offs []int64
			for _, r := range recs {
				if r.Revived && rng.IntN(2) == 0 {
					offs = append(offs, r.Offset)
				}
			}
			n := rng.Int64N(4)
			for i := range n {
				offs = append(offs, from+i)
			}
			o = Op{Type: OpPop, From: from, To: from + n, Init: pq == nil, Offsets: offs, Invisible: 1 + rng.Int64N(200)}
		case c < 5:
			r := pick()
			o = Op{Type: OpAck, Offset: r.Offset, PopTime: r.PopTime}
		case c < 7:
			r := pick()
			o = Op{Type: OpChange, Offset: r.Offset, PopTime: r.PopTime, Invisible: rng.Int64N(200)}
		case c < 9:
			for _, r := range scanDue(s, now)[k] {
				s.ApplyOp(now, &Op{Type: OpRevive, Group: "g", Topic: "T", Queue: q, Offset: r.Offset, PopTime: r.PopTime, DLQ: rng.IntN(8) == 0})
			}
			continue
		default:
			r := pick()
			o = Op{Type: OpDrop, Offset: r.Offset, PopTime: r.PopTime}
		}
		o.Group, o.Topic, o.Queue = "g", "T", q
		s.ApplyOp(now, &o)
		for k, q := range s.Queues {
			scan := &Queue{Next: q.Next, InFlight: q.InFlight}
			if got, want := q.LowWater(), scan.LowWater(); got != want {
				t.Fatalf("step %d: %v: low water %d, scan %d", step, k, got, want)
			}
		}
		at := now + rng.Int64N(300)
		want := scanDue(s, at)
		if got := s.Due(at, 1<<30); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: due at %d: index %v, scan %v", step, at, got, want)
		}
		if step%1000 == 0 {
			r := &State{Queues: s.Queues}
			r.Reindex()
			if got := r.Due(at, 1<<30); !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d: rebuilt index %v, scan %v", step, got, want)
			}
		}
	}
	if n := len(s.due.h); n > s.due.rebuildAt {
		t.Fatalf("index of %d entries past its rebuild size %d", n, s.due.rebuildAt)
	}
	t.Logf("%d index entries, %d queues", len(s.due.h), len(s.Queues))
}

// BenchmarkApplyPopAck: what the index adds to apply: a pop of 32
// messages and their acks, with 100k other records in flight; the acks
// an op each (each), or one OpAcks (acks) as a batch ack now proposes.
func BenchmarkApplyPopAck(b *testing.B) {
	for _, many := range []bool{false, true} {
		b.Run(map[bool]string{false: "each", true: "acks"}[many], func(b *testing.B) {
			s := benchState(b, 100, 1000, 0)
			k := Key{"g", "T", 1000}
			offs := make([]int64, 32)
			next := int64(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				for j := range offs {
					offs[j] = next + int64(j)
				}
				now := int64(i + 1)
				r := s.ApplyOp(now, &Op{Type: OpPop, Group: k.Group, Topic: k.Topic, Queue: k.Queue, Init: next == 0, From: next, To: next + 32, Offsets: offs, Invisible: 60_000})
				if r.Err != nil || len(r.Popped) != 32 {
					b.Fatalf("pop: %v, %d popped", r.Err, len(r.Popped))
				}
				next += 32
				if many {
					if r := s.ApplyOp(now, &Op{Type: OpAcks, Group: k.Group, Topic: k.Topic, Queue: k.Queue, Offsets: offs, PopTime: now}); r.Err != nil || r.Errs != nil || r.Acked != 32 {
						b.Fatalf("acks: %v %v, %d acked", r.Err, r.Errs, r.Acked)
					}
					continue
				}
				for _, rec := range r.Popped {
					if r := s.ApplyOp(now, &Op{Type: OpAck, Group: k.Group, Topic: k.Topic, Queue: k.Queue, Offset: rec.Offset, PopTime: rec.PopTime}); r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
		})
	}
}

// BenchmarkAckOneQueue: acks, in offset order, of 100k records in flight
// in one queue (each op reports the queue's low water).
func BenchmarkAckOneQueue(b *testing.B) {
	s := benchState(b, 1, 100_000, 0)
	b.ResetTimer()
	for i := range b.N {
		off := int64(i % 100_000)
		if i > 0 && off == 0 {
			b.StopTimer()
			s = benchState(b, 1, 100_000, 0)
			b.StartTimer()
		}
		r := s.ApplyOp(1, &Op{Type: OpAck, Group: "g", Topic: "T", Queue: 0, Offset: off, PopTime: 0})
		if r.Err != nil || r.LowWater != min(off+1, 99_999) && off != 99_999 {
			b.Fatalf("ack %d: %v, low water %d", off, r.Err, r.LowWater)
		}
	}
}
