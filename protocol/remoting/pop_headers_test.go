package remoting

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExtraInfoRoundTrip(t *testing.T) {
	e := ExtraInfo{StartOffset: 1024, PopTime: 1718000000000, InvisibleTime: 60000, ReviveQid: 3, BrokerName: "broker-a", QueueID: 2, QueueOffset: 1027}
	require.Equal(t, "1024 1718000000000 60000 3 0 broker-a 2 1027", e.String())
	got, err := ParseExtraInfo(e.String())
	require.NoError(t, err)
	require.Equal(t, e, got)
	// Seven fields (an old client: the offset comes in the header), and a
	// proxy's nine.
	got, err = ParseExtraInfo("1024 1718000000000 60000 3 0 broker-a 2")
	require.NoError(t, err)
	require.Equal(t, int64(-1), got.QueueOffset)
	_, err = ParseExtraInfo("1024 1718000000000 60000 3 0 broker-a 2 1027 99999")
	require.NoError(t, err)
	for _, bad := range []string{"", "1 2 3", "x 1718000000000 60000 3 0 b 2 1", "1 2 3 4 5 b q 1", "1 2 3 4 5 b 6 7 8 9"} {
		_, err := ParseExtraInfo(bad)
		require.True(t, errors.Is(err, ErrMalformed), "%q: %v", bad, err)
	}
}

func TestBatchAckBits(t *testing.T) {
	a := BatchAck{StartOffset: 100}
	a.SetOffsets([]int64{100, 103, 115, 99})
	require.Equal(t, []int64{100, 103, 115}, a.Offsets())
	js, err := json.Marshal(BatchAckBody{BrokerName: "b", Acks: []BatchAck{a}})
	require.NoError(t, err)
	require.Contains(t, string(js), `"b":"CYA="`, "bytes 0x09 0x80, base64, as fastjson writes a byte array")
	body, err := DecodeBatchAckBody(js)
	require.NoError(t, err)
	require.Equal(t, []int64{100, 103, 115}, body.Acks[0].Offsets())
	_, err = DecodeBatchAckBody([]byte("{"))
	require.ErrorIs(t, err, ErrMalformed)
}

func TestPopHeadersRoundTrip(t *testing.T) {
	h := PopMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: -1, MaxMsgNums: 32, InvisibleTime: 60000, PollTime: 20000,
		BornTime: 1, InitMode: PopInitMax, ExpType: "SQL92", Exp: "a > 1", Order: true, AttemptID: "x"}
	got, err := DecodePopMessageRequestHeader(h.Encode())
	require.NoError(t, err)
	require.Equal(t, h, got)
	_, err = DecodePopMessageRequestHeader(map[string]string{"consumerGroup": "g"})
	require.ErrorIs(t, err, ErrMalformed)
	rh := PopMessageResponseHeader{PopTime: 5, InvisibleTime: 6, ReviveQid: 999, RestNum: 7, StartOffsetInfo: "0 1 2", MsgOffsetInfo: "0 1 2,3"}
	gotR, err := DecodePopMessageResponseHeader(rh.Encode())
	require.NoError(t, err)
	require.Equal(t, rh, gotR)
	ch := ChangeInvisibleTimeRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 1, ExtraInfo: "e", Offset: 3, InvisibleTime: 0}
	gotC, err := DecodeChangeInvisibleTimeRequestHeader(ch.Encode())
	require.NoError(t, err)
	require.Equal(t, ch, gotC)
	ah := AckMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 1, ExtraInfo: "e", Offset: 3}
	gotA, err := DecodeAckMessageRequestHeader(ah.Encode())
	require.NoError(t, err)
	require.Equal(t, ah, gotA)
}

func BenchmarkParseExtraInfo(b *testing.B) {
	s := ExtraInfo{StartOffset: 1024, PopTime: 1718000000000, InvisibleTime: 30000, ReviveQid: 3, BrokerName: "raftmq", QueueID: 2, QueueOffset: 1027}.String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseExtraInfo(s); err != nil {
			b.Fatal(err)
		}
	}
}
