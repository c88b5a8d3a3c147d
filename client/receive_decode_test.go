package client

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// decodeReceivedPerRecord is decodeReceived as Receive did it before:
// each record parsed, then decoded alone (the reference).
func decodeReceivedPerRecord(body []byte, topic string, invisible int64) ([]*ReceivedMessage, error) {
	var out []*ReceivedMessage
	for b := body; len(b) > 0; {
		v, err := message.Parse(b, false)
		if err != nil {
			return nil, err
		}
		ms, err := DecodeMessages(b[:v.Size], topic, v.QueueID)
		if err != nil {
			return nil, err
		}
		b = b[v.Size:]
		m := ms[0]
		ck, ok := m.Property(message.PropertyPopCK)
		if !ok {
			return nil, fmt.Errorf("message without POP_CK")
		}
		e, err := remoting.ParseExtraInfo(ck)
		if err != nil {
			return nil, err
		}
		out = append(out, &ReceivedMessage{MessageExt: m, Receipt: ck, Attempt: m.ReconsumeTimes + 1,
			InvisibleUntil: time.UnixMilli(e.PopTime + invisible), ck: e, ckOf: ck})
	}
	return out, nil
}

// popAnswer is the body of a pop answer of n messages of 1 KiB over two
// queues, each with its receipt.
func popAnswer(t testing.TB, topic string, n int) []byte {
	v4 := netip.MustParseAddrPort("10.0.0.1:1234")
	var body []byte
	for i := range n {
		q := int32(i % 2)
		ck := remoting.ExtraInfo{StartOffset: 70, PopTime: 1700000000123 + int64(i), InvisibleTime: 30000, BrokerName: "raftmq", QueueID: q, QueueOffset: int64(70 + i)}
		m := message.Message{Topic: topic, QueueID: q, QueueOffset: int64(70 + i), BornHost: v4, StoreHost: v4, Body: make([]byte, 1024), ReconsumeTimes: int32(i % 3),
			Properties: map[string]string{"TAGS": "a", message.PropertyUniqKey: fmt.Sprintf("7F00000100010000000000000000%04X", i), message.PropertyPopCK: ck.String()}}
		var err error
		if body, err = message.Append(body, &m); err != nil {
			t.Fatal(err)
		}
	}
	return body
}

func TestDecodeReceivedMatchesPerRecord(t *testing.T) {
	body := popAnswer(t, "t", 32)
	got, err := decodeReceived(body, "t", 30000)
	if err != nil {
		t.Fatal(err)
	}
	want, err := decodeReceivedPerRecord(body, "t", 30000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 32 || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %d messages, differing from the reference's %d:\n got %+v\nwant %+v", len(got), len(want), got[0], want[0])
	}
	if _, err := decodeReceived(body, "other", 30000); err == nil {
		t.Error("an answer of another topic decoded")
	}
	if _, err := decodeReceived(body[:len(body)-1], "t", 30000); err == nil {
		t.Error("a truncated answer decoded")
	}
	if out, err := decodeReceived(nil, "t", 30000); err != nil || len(out) != 0 {
		t.Errorf("an empty answer: %d messages, %v", len(out), err)
	}
}

func BenchmarkDecodeReceived(b *testing.B) {
	body := popAnswer(b, "bench-pop", 32)
	for _, f := range []struct {
		name string
		fn   func([]byte, string, int64) ([]*ReceivedMessage, error)
	}{{"answer", decodeReceived}, {"per-record", decodeReceivedPerRecord}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.fn(body, "bench-pop", 30000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
