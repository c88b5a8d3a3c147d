package client

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// A batch ack's body has one entry per queue and pop time, and splits
// offsets further apart than batchAckSpan; each entry's bits name
// exactly its messages' offsets.
func TestBatchAckBody(t *testing.T) {
	rm := func(queue int32, off, popTime int64) *ReceivedMessage {
		e := remoting.ExtraInfo{StartOffset: off, PopTime: popTime, InvisibleTime: 30000, BrokerName: "b", QueueID: queue, QueueOffset: off}
		return &ReceivedMessage{MessageExt: &MessageExt{Topic: "T", QueueID: queue, QueueOffset: off}, Receipt: e.String()}
	}
	ms := []*ReceivedMessage{rm(0, 7, 100), rm(0, 5, 100), rm(1, 5, 100), rm(0, 6, 200), rm(0, 5+batchAckSpan, 100)}
	b, err := batchAckBody("G", ms)
	require.NoError(t, err)
	var body remoting.BatchAckBody
	require.NoError(t, json.Unmarshal(b, &body))
	type got struct {
		queue int32
		pt    int64
		offs  []int64
	}
	var gs []got
	for _, a := range body.Acks {
		require.Equal(t, "G", a.ConsumerGroup)
		require.Equal(t, "T", a.Topic)
		require.EqualValues(t, 30000, a.InvisibleTime)
		require.Equal(t, "0", a.RetryFlag)
		gs = append(gs, got{a.QueueID, a.PopTime, a.Offsets()})
	}
	require.Equal(t, []got{
		{0, 100, []int64{5, 7}},
		{0, 100, []int64{5 + batchAckSpan}},
		{1, 100, []int64{5}},
		{0, 200, []int64{6}},
	}, gs)

	_, err = batchAckBody("G", []*ReceivedMessage{{MessageExt: &MessageExt{Topic: "T"}, Receipt: "garbage"}})
	require.ErrorIs(t, err, ErrProtocol)

	// A received message's receipt is parsed once, when received; a
	// receipt replaced since (a change of invisible time) is read anew.
	rs, err := decodeReceived(popAnswer(t, "T", 2), "T", 30000)
	require.NoError(t, err)
	e, err := remoting.ParseExtraInfo(rs[1].Receipt)
	require.NoError(t, err)
	e.PopTime += 5
	rs[1].Receipt = e.String()
	b, err = batchAckBody("G", rs)
	require.NoError(t, err)
	body = remoting.BatchAckBody{}
	require.NoError(t, json.Unmarshal(b, &body))
	require.Len(t, body.Acks, 2)
	require.Equal(t, rs[0].ck.PopTime, body.Acks[0].PopTime)
	require.Equal(t, e.PopTime, body.Acks[1].PopTime)
}
