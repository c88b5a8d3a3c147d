package pop

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func sampleBatch(rng *rand.Rand) *Batch {
	b := &Batch{Now: rng.Int64N(1 << 42)}
	types := []string{OpPop, OpAck, OpChange, OpRevive, OpDrop, OpDeadLetter, OpAcks}
	for range rng.IntN(40) + 1 {
		o := Op{Type: types[rng.IntN(len(types))], Group: "group-" + string(rune('a'+rng.IntN(26))), Topic: "T%x",
			Queue: rng.Int32N(64) - 1, From: rng.Int64N(1 << 40), Init: rng.IntN(2) == 0, Order: rng.IntN(3) == 0,
			DLQ: rng.IntN(4) == 0, Invisible: rng.Int64N(1 << 30), Offset: rng.Int64N(1 << 40), PopTime: rng.Int64N(1 << 42)}
		o.To = o.From + rng.Int64N(64)
		for range rng.IntN(33) {
			o.Offsets = append(o.Offsets, rng.Int64N(1<<40))
		}
		if rng.IntN(3) == 0 {
			o.AttemptID = "attempt-é"
		}
		b.Ops = append(b.Ops, o)
	}
	return b
}

// TestBatchRoundTrip: the binary head decodes to the batch written, with
// the records after it, for any fields (offsets in any order too).
func TestBatchRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		b := sampleBatch(rng)
		if i == 0 {
			b.Ops[0].Queue, b.Ops[0].From, b.Ops[0].Offsets = math.MinInt32, math.MinInt64, []int64{math.MaxInt64, math.MinInt64}
		}
		p, err := AppendBatch([]byte("xx"), b)
		if err != nil {
			t.Fatal(err)
		}
		if p[2+4] != batchV1 {
			t.Fatalf("head starts with %#x, want the binary version", p[6])
		}
		p = append(p, "records"...)
		got, recs, err := DecodeBatch(p[2:])
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, b) || string(recs) != "records" {
			t.Fatalf("batch %d:\n got %+v\nwant %+v (records %q)", i, got, b, recs)
		}
	}
}

// TestBatchJSONStillDecodes: entries of the build before the binary head
// (a JSON head) decode to the same batch, and a batch with an op type the
// binary head has no code for is written as JSON.
func TestBatchJSONStillDecodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		b := sampleBatch(rng)
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		p := binary.BigEndian.AppendUint32(nil, uint32(len(js)))
		p = append(append(p, js...), 0xAB)
		got, recs, err := DecodeBatch(p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, b) || len(recs) != 1 {
			t.Fatalf("\n got %+v\nwant %+v", got, b)
		}
		// What a leader writes for a group with a member of that build.
		q, err := AppendBatchAs(nil, b, false)
		if err != nil {
			t.Fatal(err)
		}
		if q = append(q, 0xAB); string(q) != string(p) {
			t.Fatalf("AppendBatchAs(v1 false) wrote %q, want %q", q, p)
		}
	}
	odd := &Batch{Now: 5, Ops: []Op{{Type: "frobnicate", Group: g, Topic: tp}}}
	p, err := AppendBatch(nil, odd)
	if err != nil {
		t.Fatal(err)
	}
	if p[4] != '{' {
		t.Fatalf("head starts with %#x, want JSON", p[4])
	}
	got, _, err := DecodeBatch(p)
	if err != nil || !reflect.DeepEqual(got, odd) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if r := NewState().Apply(got); !errors.Is(r[0].Err, ErrBadOp) {
		t.Fatalf("unknown op applied: %+v", r[0])
	}
}

// TestBatchTruncated: every cut of a binary head, and bytes added after
// it, fail with ErrBadBatch rather than panic or decode.
func TestBatchTruncated(t *testing.T) {
	b := sampleBatch(rand.New(rand.NewPCG(5, 6)))
	p, err := AppendBatch(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	head := p[4:]
	for n := range len(head) {
		q := binary.BigEndian.AppendUint32(nil, uint32(n))
		q = append(q, head[:n]...)
		if _, _, err := DecodeBatch(q); !errors.Is(err, ErrBadBatch) {
			t.Fatalf("head cut at %d of %d: %v", n, len(head), err)
		}
	}
	q := binary.BigEndian.AppendUint32(nil, uint32(len(head)+1))
	q = append(append(q, head...), 0)
	if _, _, err := DecodeBatch(q); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("head with a byte after it: %v", err)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	p, _ := AppendBatch(nil, sampleBatch(rand.New(rand.NewPCG(7, 8))))
	f.Add(p)
	f.Fuzz(func(t *testing.T, p []byte) {
		b, _, err := DecodeBatch(p)
		if err != nil {
			if !errors.Is(err, ErrBadBatch) {
				t.Fatalf("error %v is not ErrBadBatch", err)
			}
			return
		}
		if len(p) > 4 && p[4] == batchV1 {
			q, err := AppendBatch(nil, b)
			if err != nil {
				t.Fatal(err)
			}
			b2, _, err := DecodeBatch(q)
			if err != nil || !reflect.DeepEqual(b, b2) {
				t.Fatalf("re-encoded batch differs: %v", err)
			}
		}
	})
}

func BenchmarkDecodeBatch(b *testing.B) {
	batch := &Batch{Now: 1700000000000}
	for q := range 4 {
		o := Op{Type: OpAck, Group: "bench-pop-cg", Topic: "bench-pop", Queue: int32(q), Offset: 1000, PopTime: 1700000000000}
		for range 32 {
			batch.Ops = append(batch.Ops, o)
		}
	}
	js, _ := json.Marshal(batch)
	old := append(binary.BigEndian.AppendUint32(nil, uint32(len(js))), js...)
	bin, _ := AppendBatch(nil, batch)
	for _, c := range []struct {
		name string
		p    []byte
	}{{"binary", bin}, {"json", old}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportMetric(float64(len(c.p)), "bytes")
			for range b.N {
				if _, _, err := DecodeBatch(c.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
