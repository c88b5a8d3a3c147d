package client

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// record builds a stored record with message.
func record(t testing.TB, topic string, queue int32, off, phys int64, body []byte, props map[string]string) []byte {
	t.Helper()
	m := message.Message{
		QueueID: queue, Flag: 3, QueueOffset: off, PhysicalOffset: phys,
		BornTimestamp: 1700000000000 + off, BornHost: netip.MustParseAddrPort("192.168.0.9:4000"),
		StoreTimestamp: 1700000000100 + off, StoreHost: netip.MustParseAddrPort("10.0.0.1:10911"),
		ReconsumeTimes: 1, Body: body, Topic: topic, Properties: props,
	}
	rec, err := message.Append(nil, &m)
	require.NoError(t, err)
	return rec
}

// toV2 rewrites a V1 record as MagicV2, with a 2-byte topic length, as
// Apache brokers write records of long topics.
func toV2(t *testing.T, rec []byte) []byte {
	t.Helper()
	v, err := message.Parse(rec, true)
	require.NoError(t, err)
	offTopicLen := v.Size - len(v.Properties) - 2 - len(v.Topic) - 1
	out := make([]byte, 0, len(rec)+1)
	out = append(out, rec[:offTopicLen]...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(v.Topic)))
	out = append(out, rec[offTopicLen+1:]...)
	binary.BigEndian.PutUint32(out[message.OffTotalSize:], uint32(len(out)))
	binary.BigEndian.PutUint32(out[message.OffMagicCode:], message.MagicV2)
	return out
}

func TestPullDecodesStoredRecords(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.addTopic("T", 2)
	var zbody bytes.Buffer
	zw := zlib.NewWriter(&zbody)
	_, _ = zw.Write([]byte("inflated body"))
	require.NoError(t, zw.Close())
	compressed := record(t, "T", 1, 2, 3000, zbody.Bytes(), nil)
	binary.BigEndian.PutUint32(compressed[message.OffSysFlag:], message.SysFlagCompressed)

	g.putRecords("T", 1,
		record(t, "T", 1, 0, 1000, []byte("first"), map[string]string{
			message.PropertyUniqKey: "ABC", message.PropertyTags: "TagA", message.PropertyKeys: "k1 k2", "x": "y",
		}),
		toV2(t, record(t, "T", 1, 1, 2000, []byte("second"), nil)),
		compressed,
	)
	c := newTestClient(t, g, time.Second)
	pc := c.NewPullConsumer("G")
	ctx := testCtx(t)

	r, err := pc.Pull(ctx, "T", 1, 0, 32, 0)
	require.NoError(t, err)
	require.Equal(t, Found, r.Status)
	require.Equal(t, int64(3), r.NextBeginOffset)
	require.Equal(t, int64(3), r.MaxOffset)
	require.Len(t, r.Messages, 3)

	m := r.Messages[0]
	require.Equal(t, "T", m.Topic)
	require.Equal(t, int32(1), m.QueueID)
	require.Equal(t, int64(0), m.QueueOffset)
	require.Equal(t, int64(1000), m.CommitLogOffset)
	require.Equal(t, []byte("first"), m.Body)
	require.Equal(t, "ABC", m.MsgID)
	require.Equal(t, message.OffsetMsgID(netip.MustParseAddrPort("10.0.0.1:10911"), 1000), m.OffsetMsgID)
	require.Equal(t, "TagA", m.Tags)
	require.Equal(t, []string{"k1", "k2"}, m.Keys)
	require.Equal(t, "y", m.Properties()["x"])
	x, ok := m.Property("x")
	require.True(t, ok)
	require.Equal(t, "y", x)
	_, ok = m.Property("nope")
	require.False(t, ok)
	require.Equal(t, int64(1700000000000), m.BornTimestamp)
	require.Equal(t, int64(1700000000100), m.StoreTimestamp)
	require.Equal(t, int32(1), m.ReconsumeTimes)
	require.Equal(t, "10.0.0.1:10911", m.StoreHost)
	require.Equal(t, "192.168.0.9:4000", m.BornHost)
	require.Equal(t, int32(3), m.Flag)

	m = r.Messages[1] // V2 magic, no UNIQ_KEY: MsgID falls back
	require.Equal(t, []byte("second"), m.Body)
	require.Equal(t, m.OffsetMsgID, m.MsgID)
	require.Equal(t, "T", m.Topic)

	m = r.Messages[2]
	require.Equal(t, []byte("inflated body"), m.Body)
	require.Zero(t, m.SysFlag&message.SysFlagCompressed)

	// Caught up: PULL_NOT_FOUND.
	r, err = pc.Pull(ctx, "T", 1, 3, 32, 0)
	require.NoError(t, err)
	require.Equal(t, NoNewMessages, r.Status)
	require.Empty(t, r.Messages)
	require.Equal(t, int64(3), r.NextBeginOffset)

	// Beyond the end: OFFSET_MOVED.
	r, err = pc.Pull(ctx, "T", 1, 9, 32, 0)
	require.NoError(t, err)
	require.Equal(t, OffsetMoved, r.Status)
	require.Equal(t, int64(3), r.NextBeginOffset)

	// From a follower, max 1.
	r, err = pc.PullFrom(ctx, g.nodes[2].addr, "T", 1, 1, 1, 0)
	require.NoError(t, err)
	require.Equal(t, g.nodes[2].addr, r.Addr)
	require.Len(t, r.Messages, 1)
	require.Equal(t, int64(1), r.Messages[0].QueueOffset)
	require.Equal(t, int64(2), r.NextBeginOffset)
	reqs := g.nodes[2].requests(remoting.PullMessage)
	require.Len(t, reqs, 1)
	h, err := remoting.DecodePullMessageRequestHeader(reqs[0].ExtFields)
	require.NoError(t, err)
	require.Equal(t, "G", h.ConsumerGroup)
	require.Equal(t, int32(1), h.MaxMsgNums)
	require.Zero(t, h.SysFlag&remoting.PullSysFlagSuspend)
}

func TestPullLongPollSetsSuspend(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	// The broker holds the pull 150 ms, longer than RequestTimeout: the
	// pull's timeout must cover the hold time.
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code == remoting.PullMessage {
			time.Sleep(150 * time.Millisecond)
		}
		return nil, false
	})
	c := newTestClient(t, g, 100*time.Millisecond)
	r, err := c.NewPullConsumer("G").Pull(testCtx(t), "T", 0, 0, 0, 200*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, NoNewMessages, r.Status)
	h, err := remoting.DecodePullMessageRequestHeader(g.nodes[0].requests(remoting.PullMessage)[0].ExtFields)
	require.NoError(t, err)
	require.NotZero(t, h.SysFlag&remoting.PullSysFlagSuspend)
	require.Equal(t, int64(200), h.SuspendTimeoutMillis)
	require.Equal(t, int32(DefaultPullBatch), h.MaxMsgNums)
	require.Equal(t, "*", h.Subscription)
}

func TestPullReportsCorruption(t *testing.T) {
	good := record(t, "T", 0, 0, 0, []byte("payload"), nil)
	badCRC := record(t, "T", 0, 1, 100, []byte("payload"), nil)
	// The record ends BODY | TOPICLEN (1) | "T" | PROPERTIESLEN (2).
	bodyAt := len(badCRC) - 2 - 1 - 1 - len("payload")
	badCRC[bodyAt] ^= 0xFF
	otherQueue := record(t, "T", 1, 1, 100, []byte("payload"), nil)
	otherTopic := record(t, "U", 0, 1, 100, []byte("payload"), nil)
	badProps := record(t, "T", 0, 1, 100, []byte("payload"), map[string]string{"x": "y"})
	badProps[len(badProps)-2] = message.NameValueSeparator // "x\x01y\x02" -> "x\x01\x01\x02"

	for name, recs := range map[string][][]byte{
		"crc":         {good, badCRC},
		"truncated":   {good, good[:len(good)-5]},
		"other queue": {good, otherQueue},
		"other topic": {good, otherTopic},
		"properties":  {good, badProps},
	} {
		t.Run(name, func(t *testing.T) {
			g := newFakeGroup(t, 1)
			g.addTopic("T", 2)
			g.putRecords("T", 0, recs...)
			c := newTestClient(t, g, time.Second)
			_, err := c.NewPullConsumer("G").Pull(testCtx(t), "T", 0, 0, 32, 0)
			require.ErrorIs(t, err, ErrCorrupt)
			if name == "crc" || name == "truncated" {
				require.ErrorIs(t, err, message.ErrCorrupt)
			}
		})
	}
}

func TestOffsetsCommitAndFetch(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.addTopic("T", 2)
	g.setLeader(2)
	c := newTestClient(t, g, time.Second, 0) // sends offset ops to node 0 first
	pc := c.NewPullConsumer("G")
	ctx := testCtx(t)

	_, ok, err := pc.FetchOffset(ctx, "T", 1)
	require.NoError(t, err)
	require.False(t, ok, "QUERY_NOT_FOUND")

	require.NoError(t, pc.CommitOffset(ctx, "T", 1, 42))
	off, ok, err := pc.FetchOffset(ctx, "T", 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(42), off)

	// The first request went to node 0, which named the leader; the rest
	// went to the leader directly. Nothing was sent one-way.
	require.Len(t, g.nodes[0].requests(remoting.QueryConsumerOffset), 1)
	require.Len(t, g.nodes[2].requests(remoting.QueryConsumerOffset), 2)
	commits := g.nodes[2].requests(remoting.UpdateConsumerOffset)
	require.Len(t, commits, 1)
	require.False(t, commits[0].IsOneway())
	require.Equal(t, "42", commits[0].ExtFields["commitOffset"])

	// Another group has its own offsets.
	_, ok, err = c.NewPullConsumer("H").FetchOffset(ctx, "T", 1)
	require.NoError(t, err)
	require.False(t, ok)

	// A failing commit returns the broker's error.
	g.nodes[2].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code == remoting.UpdateConsumerOffset {
			return remoting.NewResponse(req, remoting.InvalidParameter, "no"), true
		}
		return nil, false
	})
	var e *Error
	require.ErrorAs(t, pc.CommitOffset(ctx, "T", 1, 43), &e)
	require.Equal(t, remoting.InvalidParameter, e.Code)
}

func TestQueueOffsets(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	g.putRecords("T", 0, record(t, "T", 0, 0, 0, []byte("a"), nil), record(t, "T", 0, 1, 100, []byte("b"), nil))
	c := newTestClient(t, g, time.Second)
	ctx := testCtx(t)
	maxOff, err := c.MaxOffset(ctx, "T", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), maxOff)
	minOff, err := c.MinOffset(ctx, "T", 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), minOff)
	require.Len(t, g.nodes[0].requests(remoting.GetMinOffset), 1)
}

func TestCreateTopicAndAdmin(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.setLeader(1)
	c := newTestClient(t, g, time.Second, 0)
	ctx := testCtx(t)

	_, err := c.Route(ctx, "New", true)
	require.Error(t, err)
	require.NoError(t, c.CreateTopic(ctx, "New", 3))
	reqs := g.nodes[1].requests(remoting.UpdateAndCreateTopic)
	require.Len(t, reqs, 1)
	h, err := remoting.DecodeCreateTopicRequestHeader(reqs[0].ExtFields)
	require.NoError(t, err)
	require.Equal(t, int32(3), h.WriteQueueNums)
	require.Equal(t, int32(3), h.ReadQueueNums)
	require.Equal(t, int32(6), h.Perm)
	r, err := c.Route(ctx, "New", false)
	require.NoError(t, err)
	require.Equal(t, 3, r.WriteQueues)
	require.Error(t, c.CreateTopic(ctx, "bad name", 1))
	require.Error(t, c.CreateTopic(ctx, "Fine", 0))

	st, err := c.NodeStatus(ctx, g.nodes[2].addr)
	require.NoError(t, err)
	var status struct{ ID, Leader int }
	require.NoError(t, json.Unmarshal(st, &status))
	require.Equal(t, 3, status.ID)
	require.Equal(t, 2, status.Leader)

	require.NoError(t, c.TransferLeader(ctx, 3))
	tr := g.nodes[1].requests(remoting.TransferLeader)
	require.Len(t, tr, 1)
	require.Equal(t, "3", tr[0].ExtFields["id"])

	require.NoError(t, c.AddNode(ctx, 4, "127.0.0.1:1", "127.0.0.1:2"))
	add := g.nodes[1].requests(remoting.AddNode)
	require.Len(t, add, 1)
	require.Equal(t, map[string]string{"id": "4", "client": "127.0.0.1:1", "raft": "127.0.0.1:2"}, add[0].ExtFields)
	require.Error(t, c.AddNode(ctx, 5, "nope", "127.0.0.1:2"))

	require.NoError(t, c.RemoveNode(ctx, 4))
	require.Len(t, g.nodes[1].requests(remoting.RemoveNode), 1)
	require.Error(t, c.RemoveNode(ctx, 0))

	// Low-level Invoke returns any answer as is.
	resp, err := c.Invoke(ctx, g.nodes[0].addr, remoting.NewRequest(9999, nil, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.RequestCodeNotSupported, resp.Code)
}
