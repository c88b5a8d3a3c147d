package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// sendFields is the part of m a send reads (planSend, sendOK): what
// decodeSendOne keeps.
func sendFields(m *rmqpb.Message) *rmqpb.Message {
	out := &rmqpb.Message{UserProperties: m.UserProperties, Body: m.Body}
	if m.Topic != nil {
		out.Topic = &rmqpb.Resource{Name: m.Topic.Name}
	}
	if sp := m.SystemProperties; sp != nil {
		out.SystemProperties = &rmqpb.SystemProperties{Tag: sp.Tag, Keys: sp.Keys, MessageId: sp.MessageId,
			BodyEncoding: sp.BodyEncoding, MessageType: sp.MessageType, BornTimestamp: stamp(sp.BornTimestamp),
			DeliveryTimestamp: stamp(sp.DeliveryTimestamp), MessageGroup: sp.MessageGroup, TraceContext: sp.TraceContext,
			OrphanedTransactionRecoveryDuration: duration(sp.OrphanedTransactionRecoveryDuration)}
	}
	return out
}

// stamp and duration are the fields of t and d a send reads (not the
// unknown fields proto.Unmarshal keeps aside).
func stamp(t *timestamppb.Timestamp) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return &timestamppb.Timestamp{Seconds: t.Seconds, Nanos: t.Nanos}
}

func duration(d *durationpb.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return &durationpb.Duration{Seconds: d.Seconds, Nanos: d.Nanos}
}

// decodeSendOne reads what proto.Unmarshal reads of the fields a send
// uses, for messages with every field set, few, or unknown ones; and it
// leaves to proto.Unmarshal what it does not take plainly.
func TestGRPCSendDecode(t *testing.T) {
	tag, group, trace, ns := "TagA", "g1", "00-trace", "ns"
	full := &rmqpb.Message{
		Topic:          &rmqpb.Resource{ResourceNamespace: ns, Name: "T1"},
		UserProperties: map[string]string{"a": "1", "b": "", "ü": "ß"},
		SystemProperties: &rmqpb.SystemProperties{
			Tag: &tag, Keys: []string{"k1", "k2"}, MessageId: "01ABCDEF",
			BodyDigest:   &rmqpb.Digest{Type: rmqpb.DigestType_MD5, Checksum: "ABC"},
			BodyEncoding: rmqpb.Encoding_IDENTITY, MessageType: rmqpb.MessageType_DELAY,
			BornTimestamp: timestamppb.New(time.UnixMilli(1_700_000_000_123)), BornHost: "h",
			StoreTimestamp: timestamppb.Now(), StoreHost: "s", DeliveryTimestamp: timestamppb.New(time.Unix(-5, 7)),
			ReceiptHandle: proto.String("r"), QueueId: 3, QueueOffset: proto.Int64(-9),
			InvisibleDuration: durationpb.New(time.Second), DeliveryAttempt: proto.Int32(2),
			MessageGroup: &group, TraceContext: &trace,
			OrphanedTransactionRecoveryDuration: durationpb.New(90 * time.Second),
			DeadLetterQueue:                     &rmqpb.DeadLetterQueue{Topic: "d", MessageId: "m"},
			LiteTopic:                           proto.String("l"), Priority: proto.Int32(-1),
		},
		Body: []byte("body"),
	}
	empty := ""
	for _, m := range []*rmqpb.Message{
		full,
		grpcMsg("T", "id-1", "a body", nil),
		{Topic: &rmqpb.Resource{Name: "T"}},
		{SystemProperties: &rmqpb.SystemProperties{Tag: &empty, MessageGroup: &empty}},
		{Body: []byte{}},
		{},
	} {
		raw, err := proto.Marshal(&rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{m}})
		require.NoError(t, err)
		// An unknown field at each level is skipped.
		withUnknown := protowire.AppendString(protowire.AppendTag(append([]byte(nil), raw...), 99, protowire.BytesType), "x")
		for _, raw := range [][]byte{raw, withUnknown} {
			var req rmqpb.SendMessageRequest
			require.NoError(t, proto.Unmarshal(raw, &req))
			got := decodeSendOne(raw)
			require.NotNil(t, got, "%v", m)
			require.True(t, proto.Equal(sendFields(req.Messages[0]), got), "want %v\ngot  %v", sendFields(req.Messages[0]), got)
		}
	}

	one, err := proto.Marshal(&rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{full}})
	require.NoError(t, err)
	spBytes, err := proto.Marshal(&rmqpb.Message{SystemProperties: full.SystemProperties})
	require.NoError(t, err)
	msgField := func(b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
	}
	badHost, err := proto.Marshal(&rmqpb.Message{SystemProperties: &rmqpb.SystemProperties{BornHost: "x"}})
	require.NoError(t, err)
	badHost[len(badHost)-1] = 0xff // the host's one byte: not UTF-8
	for name, raw := range map[string][]byte{
		"no message":                    {},
		"two messages":                  append(append([]byte(nil), one...), one...),
		"truncated":                     one[:len(one)-1],
		"system properties given twice": msgField(append(append([]byte(nil), spBytes...), spBytes...)),
		"a string that is not UTF-8":    msgField(badHost),
		"messages as a varint":          protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1),
	} {
		require.Nil(t, decodeSendOne(raw), name)
	}
}

// BenchmarkGRPCSendDecode decodes a 1 KiB send as the bench sends it,
// with decodeSendOne and with proto.Unmarshal.
//
//	go test ./cluster -run '^$' -bench GRPCSendDecode -benchmem
func BenchmarkGRPCSendDecode(b *testing.B) {
	m := grpcMsg("BenchTopic", "0A0B0C0D0E0F00112233445566778899", string(make([]byte, 1024)), nil)
	raw, err := proto.Marshal(&rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{m}})
	require.NoError(b, err)
	b.Run("decodeSendOne", func(b *testing.B) {
		for b.Loop() {
			if decodeSendOne(raw) == nil {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var req rmqpb.SendMessageRequest
			if err := proto.Unmarshal(raw, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	r := grpcSendOK{messageID: "0A0B0C0D0E0F00112233445566778899", offset: 123456}
	buf := make([]byte, 0, 256)
	b.Run("AppendProto", func(b *testing.B) {
		for b.Loop() {
			buf = r.AppendProto(buf[:0])
		}
	})
	b.Run("proto.Marshal", func(b *testing.B) {
		for b.Loop() {
			resp := &rmqpb.SendMessageResponse{Status: ok(), Entries: []*rmqpb.SendResultEntry{{Status: ok(), MessageId: r.messageID, Offset: r.offset}}}
			if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzGRPCSendDecode checks decodeSendOne against proto.Unmarshal on any
// bytes: whatever it takes, proto.Unmarshal takes too, as one message
// whose fields a send reads are the same. (What it leaves, the generic
// path decides.) Seeds: the sends of TestGRPCSendDecode's shapes.
//
//	go test ./cluster -run '^$' -fuzz FuzzGRPCSendDecode -fuzztime 60s
func FuzzGRPCSendDecode(f *testing.F) {
	tag := "TagA"
	for _, m := range []*rmqpb.Message{
		grpcMsg("T", "id-1", "a body", nil),
		{Topic: &rmqpb.Resource{ResourceNamespace: "ns", Name: "T1"}, UserProperties: map[string]string{"a": "1"},
			SystemProperties: &rmqpb.SystemProperties{Tag: &tag, Keys: []string{"k"}, MessageId: "01",
				BornTimestamp: timestamppb.New(time.UnixMilli(1_700_000_000_123)), DeliveryTimestamp: timestamppb.New(time.Unix(-5, 7)),
				OrphanedTransactionRecoveryDuration: durationpb.New(90 * time.Second)}, Body: []byte("b")},
		{},
	} {
		raw, err := proto.Marshal(&rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{m}})
		require.NoError(f, err)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := decodeSendOne(raw)
		if got == nil {
			return
		}
		var req rmqpb.SendMessageRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			t.Fatalf("decodeSendOne took what proto.Unmarshal refuses (%v): %x", err, raw)
		}
		if len(req.Messages) != 1 {
			t.Fatalf("decodeSendOne took a request of %d messages: %x", len(req.Messages), raw)
		}
		if want := sendFields(req.Messages[0]); !proto.Equal(want, got) {
			t.Fatalf("decodeSendOne differs from proto.Unmarshal\nwant %v\ngot  %v\nraw %x", want, got, raw)
		}
	})
}
