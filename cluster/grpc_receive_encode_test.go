package cluster

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// receivedWant is what ReceiveMessage sent before grpcReceived: the
// generated response around grpcMessage with the receipt handle set.
func receivedWant(m *message.Message, topic, receipt string) *rmqpb.ReceiveMessageResponse {
	gm := grpcMessage(m, topic)
	gm.SystemProperties.ReceiptHandle = &receipt
	return &rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Message{Message: gm}}
}

// checkReceived fails t unless grpcReceived's encoding of m decodes to
// what the generated path builds.
func checkReceived(t testing.TB, m *message.Message, topic, receipt string) {
	t.Helper()
	var scratch []byte
	b := (&grpcReceived{m: m, topic: topic, receipt: receipt, scratch: &scratch}).AppendProto(nil)
	var got rmqpb.ReceiveMessageResponse
	require.NoError(t, proto.Unmarshal(b, &got))
	want := receivedWant(m, topic, receipt)
	if !proto.Equal(want, &got) {
		t.Fatalf("hand encoding decodes to\n%v\nwant\n%v", &got, want)
	}
}

// randomReceived is a stored message with a random mix of what
// grpcMessage reads: system properties of each message type, user
// properties, hosts, extreme numbers.
func randomReceived(rng *rand.Rand) *message.Message {
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	m := &message.Message{
		QueueID:        int32(rng.IntN(3)) - 1, // -1, 0, 1
		QueueOffset:    rng.Int64N(1 << 40),
		PhysicalOffset: rng.Int64N(1 << 40),
		BornTimestamp:  rng.Int64N(2_000_000_000_000) - 100_000,
		StoreTimestamp: int64(rng.Uint64() >> 1),
		ReconsumeTimes: int32(rng.IntN(20)),
		Properties:     map[string]string{},
	}
	if rng.IntN(5) == 0 {
		m.StoreTimestamp = -m.StoreTimestamp
	}
	switch rng.IntN(3) {
	case 0:
		m.BornHost = netip.MustParseAddrPort("10.1.2.3:4567")
		m.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	case 1:
		m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:80")
		m.StoreHost = netip.MustParseAddrPort("[::1]:10911")
	}
	if rng.IntN(3) > 0 {
		m.Body = make([]byte, rng.IntN(2048))
		for i := range m.Body {
			m.Body[i] = byte(rng.Uint32())
		}
	}
	if rng.IntN(4) > 0 {
		m.Properties[message.PropertyUniqKey] = fmt.Sprintf("%032X", rng.Uint64())
	}
	if rng.IntN(2) == 0 {
		m.Properties[message.PropertyTags] = pick("", "a", "TagA")
	}
	if rng.IntN(2) == 0 {
		m.Properties[message.PropertyKeys] = pick("", "k1", "k1 k2", " k1  k2 ", "  ")
	}
	switch rng.IntN(6) {
	case 0:
		m.Properties[message.PropertyTransactionPrepared] = pick("true", "false")
	case 1:
		m.SysFlag = message.SysFlagTransactionPrepared
	case 2:
		m.Properties[message.PropertyTimerDeliverMS] = pick("1760000000123", "-5", "not a number", "")
	case 3:
		m.Properties[message.PropertyShardingKey] = pick("g1", "")
	}
	if rng.IntN(3) == 0 {
		m.Properties[propTraceContext] = "00-abc-def-01"
	}
	if rng.IntN(3) == 0 {
		m.Properties[message.PropertyCheckImmunityTimeSeconds] = pick("60", "0", "-3", "x", "9223372036")
	}
	for range rng.IntN(4) {
		m.Properties[pick("", "user", "k", "ü-key", message.PropertyReconsumeTime)] = pick("", "v", "a longer value")
	}
	return m
}

// TestGRPCReceivedEncoding holds grpcReceived to the generated path:
// every random message encodes to bytes that decode to what proto.Marshal
// of grpcMessage's conversion decodes to.
func TestGRPCReceivedEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 3000 {
		m := randomReceived(rng)
		topic := []string{"demo", "", "%RETRY%g"}[i%3]
		checkReceived(t, m, topic, fmt.Sprintf("%d 1760000000000 30000 0 0 demo 2 %d", i, m.QueueOffset))
	}
}

// FuzzGRPCReceivedEncode drives the same comparison from fuzzed fields.
func FuzzGRPCReceivedEncode(f *testing.F) {
	f.Add(uint64(1), []byte("body"), "TagA", "k1 k2", int64(1760000000123), int32(2), "60")
	f.Add(uint64(2), []byte{}, "", "", int64(-1), int32(-1), "")
	f.Fuzz(func(t *testing.T, seed uint64, body []byte, tag, keys string, ts int64, queue int32, immunity string) {
		m := randomReceived(rand.New(rand.NewPCG(seed, 3)))
		m.Body, m.StoreTimestamp, m.QueueID = body, ts, queue
		m.Properties[message.PropertyTags] = tag
		m.Properties[message.PropertyKeys] = keys
		m.Properties[message.PropertyCheckImmunityTimeSeconds] = immunity
		var r [8]byte
		binary.BigEndian.PutUint64(r[:], seed)
		if !grpcReceivable(m, tag) {
			return // sent the generated way (TestGRPCReceivableUTF8)
		}
		checkReceived(t, m, tag, fmt.Sprintf("%x", r))
	})
}

// BenchmarkGRPCReceived compares a popped 1 KiB message's conversion and
// encoding as a stream message: generated (grpcMessage, proto.Marshal)
// against grpcReceived.
func BenchmarkGRPCReceived(b *testing.B) {
	m := &message.Message{QueueID: 1, QueueOffset: 123456, PhysicalOffset: 987654321, BornTimestamp: 1760000000000,
		StoreTimestamp: 1760000000123, BornHost: netip.MustParseAddrPort("10.1.2.3:4567"),
		StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"), Body: make([]byte, 1024),
		Properties: map[string]string{message.PropertyUniqKey: "0A0102030405060708090A0B0C0D0E0F", message.PropertyTags: "TagA",
			message.PropertyKeys: "order-42", "user": "v"}}
	receipt := "0 1760000000000 30000 0 0 demo 2 123456"
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proto.Marshal(receivedWant(m, "demo", receipt)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		var scratch, buf []byte
		for b.Loop() {
			buf = (&grpcReceived{m: m, topic: "demo", receipt: receipt, scratch: &scratch}).AppendProto(buf[:0])
		}
	})
}

// TestGRPCReceivableUTF8: a message whose topic or properties are not
// valid UTF-8 is not encoded by hand (the generated path refuses it, as
// protobuf requires valid UTF-8 in string fields); valid ones are.
func TestGRPCReceivableUTF8(t *testing.T) {
	m := &message.Message{Properties: map[string]string{"user": "v", message.PropertyTags: "ü"}}
	require.True(t, grpcReceivable(m, "demo"))
	require.False(t, grpcReceivable(m, "de\xffmo"))
	m.Properties["user"] = "\xc3"
	require.False(t, grpcReceivable(m, "demo"))
	_, err := proto.Marshal(receivedWant(m, "demo", "r"))
	require.Error(t, err)
	delete(m.Properties, "user")
	m.Properties["\xff"] = "v"
	require.False(t, grpcReceivable(m, "demo"))
}
