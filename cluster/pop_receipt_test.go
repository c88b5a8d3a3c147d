package cluster

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store/pop"
)

// withReceiptDecoded is the reference withReceipt: decode the record, set
// the properties, encode it again.
func withReceiptDecoded(rec []byte, r Receipt, attempt int32) ([]byte, error) {
	m, _, err := message.Decode(rec)
	if err != nil {
		return nil, err
	}
	props := maps.Clone(m.Properties)
	if props == nil {
		props = map[string]string{}
	}
	props[message.PropertyPopCK] = r.String()
	if _, ok := props[message.PropertyFirstPopTime]; !ok && attempt <= 1 {
		props[message.PropertyFirstPopTime] = strconv.FormatInt(r.PopTime, 10)
	}
	m.Properties, m.RawProperties = props, ""
	m.ReconsumeTimes = max(attempt-1, 0)
	return message.Append(nil, &m)
}

// TestWithReceiptMatchesDecode checks that editing a record's bytes gives
// the message that decoding, setting the receipt and encoding gives.
func TestWithReceiptMatchesDecode(t *testing.T) {
	v4 := netip.MustParseAddrPort("10.0.0.1:1234")
	v6 := netip.MustParseAddrPort("[2001:db8::1]:10911")
	r := Receipt{Group: "g", Topic: "t", QueueID: 2, Offset: 77, PopTime: 1700000000123, Invisible: 30000, StartOffset: 70, BrokerName: "b"}
	cases := map[string]message.Message{
		"no properties": {Topic: "t", QueueID: 2, QueueOffset: 77, BornHost: v4, StoreHost: v4, Body: []byte("x")},
		"tags, keys":    {Topic: "t", QueueID: 2, BornHost: v4, StoreHost: v4, Body: []byte("hello"), Properties: map[string]string{"TAGS": "a", "KEYS": "k1 k2", message.PropertyUniqKey: "U1"}},
		"first pop time": {Topic: "t", BornHost: v4, StoreHost: v4, Body: []byte("y"), ReconsumeTimes: 3,
			Properties: map[string]string{message.PropertyFirstPopTime: "5"}},
		"old receipt":  {Topic: "t", BornHost: v6, StoreHost: v4, Body: []byte("z"), Properties: map[string]string{message.PropertyPopCK: "old", "A": "1"}},
		"ipv6 hosts":   {Topic: "t", BornHost: v6, StoreHost: v6, Body: make([]byte, 300), Properties: map[string]string{"A": ""}},
		"empty body":   {Topic: "t", BornHost: v4, StoreHost: v6, Properties: map[string]string{"B": "2"}},
		"with sysflag": {Topic: "t", SysFlag: message.SysFlagMultiTags, BornHost: v4, StoreHost: v4, Body: []byte("b")},
	}
	for name, m := range cases {
		rec, err := message.Append(nil, &m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rec = append(rec, 0xEE, 0xEE) // bytes after the record are not part of it
		for _, attempt := range []int32{1, 2, 5} {
			got, err := withReceipt(rec, r, attempt)
			if err != nil {
				t.Fatalf("%s attempt %d: %v", name, attempt, err)
			}
			want, err := withReceiptDecoded(rec, r, attempt)
			if err != nil {
				t.Fatalf("%s attempt %d: reference: %v", name, attempt, err)
			}
			gm, n, err := message.Decode(got)
			if err != nil || n != len(got) {
				t.Fatalf("%s attempt %d: edited record does not decode (%d of %d bytes): %v", name, attempt, n, len(got), err)
			}
			wm, _, _ := message.Decode(want)
			gm.RawProperties, wm.RawProperties = "", ""
			if !reflect.DeepEqual(gm, wm) {
				t.Errorf("%s attempt %d:\n got %+v\nwant %+v", name, attempt, gm, wm)
			}
			if _, err := message.Parse(got, true); err != nil {
				t.Errorf("%s attempt %d: body CRC: %v", name, attempt, err)
			}
			// Appended after other bytes, as a pop's messages share one
			// buffer, the record is the same and the bytes before it stay.
			prefix := []byte("earlier record")
			shared, err := appendWithReceipt(slices.Clone(prefix), rec, r, attempt)
			if err != nil {
				t.Fatalf("%s attempt %d: appended: %v", name, attempt, err)
			}
			if !bytes.Equal(shared[:len(prefix)], prefix) || !bytes.Equal(shared[len(prefix):], got) {
				t.Errorf("%s attempt %d: appended after %d bytes:\n got %x\nwant %x", name, attempt, len(prefix), shared[len(prefix):], got)
			}
		}
	}
}

func BenchmarkWithReceipt(b *testing.B) {
	v4 := netip.MustParseAddrPort("10.0.0.1:1234")
	m := message.Message{Topic: "bench-pop", BornHost: v4, StoreHost: v4, Body: make([]byte, 1024),
		Properties: map[string]string{"TAGS": "a", message.PropertyUniqKey: "7F0000010001000000000000000000AB", "WAIT": "true"}}
	rec, _ := message.Append(nil, &m)
	r := Receipt{Group: "g", Topic: "bench-pop", QueueID: 2, Offset: 77, PopTime: 1700000000123, Invisible: 30000, StartOffset: 70, BrokerName: "b"}
	for _, f := range []struct {
		name string
		fn   func([]byte, Receipt, int32) ([]byte, error)
	}{{"edit", withReceipt}, {"decode", withReceiptDecoded}} {
		b.Run(f.name, func(b *testing.B) {
			for range b.N {
				if _, err := f.fn(rec, r, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPopRecsSortInto: a pop's records listed out of order are sorted
// with its offsets, and each is found by its offset.
func TestPopRecsSortInto(t *testing.T) {
	op := &pop.Op{Offsets: []int64{7, 3, 9, 5}}
	rs := popRecs{{7, []byte("7")}, {3, []byte("3")}, {9, []byte("9")}, {5, []byte("5")}}
	rs.sortInto(op)
	require.Equal(t, []int64{3, 5, 7, 9}, op.Offsets)
	for _, off := range op.Offsets {
		require.Equal(t, fmt.Sprint(off), string(rs.get(off)))
	}
	require.Nil(t, rs.get(4))
	require.Nil(t, rs.get(10))
}

// TestPopResponseHeader: POP_MESSAGE's header lists, by queue in order,
// the start offset and the messages' offsets, and an orderly pop's
// delivery counts in message order, as RocketMQ's broker writes them.
func TestPopResponseHeader(t *testing.T) {
	m := func(q int32, off int64, attempt int32, order bool) Popped {
		return Popped{QueueID: q, QueueOffset: off, Attempt: attempt, Receipt: Receipt{Order: order}}
	}
	res := &PopResult{PopTime: 17, Rest: 3, StartOffsets: map[int32]int64{0: 4, 2: 10},
		Messages: []Popped{m(2, 10, 1, false), m(0, 4, 1, false), m(2, 12, 1, false), m(0, 5, 1, false)}}
	rh := popResponseHeader(res, 30000)
	require.Equal(t, "0 0 4;0 2 10", rh.StartOffsetInfo)
	require.Equal(t, "0 0 4,5;0 2 10,12", rh.MsgOffsetInfo)
	require.Equal(t, "", rh.OrderCountInfo)
	require.Equal(t, int64(17), rh.PopTime)
	require.Equal(t, int64(3), rh.RestNum)
	require.Equal(t, int64(30000), rh.InvisibleTime)

	res = &PopResult{StartOffsets: map[int32]int64{1: 7}, Messages: []Popped{m(1, 7, 3, true), m(1, 8, 1, true)}}
	rh = popResponseHeader(res, 1000)
	require.Equal(t, "0 1 7", rh.StartOffsetInfo)
	require.Equal(t, "0 1 7,8", rh.MsgOffsetInfo)
	require.Equal(t, "0 qo1%7 2;0 qo1%8 0", rh.OrderCountInfo)
	require.Equal(t, int32(remoting.PopOrderReviveQueue), rh.ReviveQid)
}
