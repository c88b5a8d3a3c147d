package raftlog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func appResp(from, index uint64) *pb.Message {
	return &pb.Message{Type: pb.MessageType_MsgAppResp.Enum(), From: proto.Uint64(from), Index: proto.Uint64(index)}
}

// With no traced request, the owner's trace hooks allocate nothing and read
// no clock: a send's path costs the same as before tracing existed.
func TestTraceOffAllocatesNothing(t *testing.T) {
	tb := newBatchTable(Framing{AppendHeader: appendPlainHeader, BatchID: plainBatchID, HeaderSize: plainHeaderSize},
		1<<20, time.Second, 1<<32)
	l := &loop{reqs: tb}
	reqs := []*Request{{Data: []byte("abc"), Waiter: newTestWaiter()}}
	ents, bs := tb.pack(reqs, time.Unix(1, 0))
	ents[0].Index = proto.Uint64(7)
	tb.appended(ents)
	require.Zero(t, tb.tracing)
	require.Empty(t, tb.acking)
	resp := appResp(2, 7)
	allocs := testing.AllocsPerRun(1000, func() {
		l.stepped(resp)
		stampCommitted(bs)
		bs[0].StampTraced(StageApplied, time.Time{})
	})
	require.Zero(t, allocs)
}

// A traced request is stamped through the owner's stages in order, and
// the two followers' acks are told apart.
func TestTraceStampsInOrder(t *testing.T) {
	tb := newBatchTable(Framing{AppendHeader: appendPlainHeader, BatchID: plainBatchID, HeaderSize: plainHeaderSize},
		1<<20, time.Second, 1<<32)
	l := &loop{reqs: tb}
	tr := NewTrace(time.Now())
	ents, bs := tb.pack([]*Request{{Data: []byte("abc"), Waiter: newTestWaiter(), Trace: tr}}, time.Now())
	require.Equal(t, 1, tb.tracing)
	tb.readyAt = time.Now()
	tb.sentAt = time.Now()
	ents[0].Index = proto.Uint64(9)
	tb.appended(ents)
	require.Zero(t, tb.tracing)
	require.Len(t, tb.acking, 1)
	l.stepped(appResp(2, 8)) // does not cover it
	_, ok := tr.At(StageFirstAck)
	require.False(t, ok)
	l.stepped(appResp(2, 9))
	l.stepped(appResp(2, 10)) // the same follower again
	_, ok = tr.SecondAck()
	require.False(t, ok)
	stampCommitted(tb.take(9))
	l.stepped(appResp(3, 9))
	_, ok = tr.SecondAck()
	require.True(t, ok)
	require.Empty(t, tb.acking, "acknowledged by both: no longer waited for")
	bs[0].StampTraced(StageApplied, time.Now())
	_, ok = tr.Stages()
	require.False(t, ok, "not answered yet")
	tr.Stamp(StageAnswered, time.Now())
	d, ok := tr.Stages()
	require.True(t, ok)
	var sum time.Duration
	for i, v := range d {
		require.GreaterOrEqual(t, v, time.Duration(0), "stage %s", StageNames[i+1])
		sum += v
	}
	total, _ := tr.At(StageAnswered)
	require.Equal(t, total, sum)
}

// BenchmarkTraceOffHooks is what tracing adds to the owner's work per
// Ready and per stepped message while no send is traced.
func BenchmarkTraceOffHooks(b *testing.B) {
	tb := newBatchTable(Framing{AppendHeader: appendPlainHeader, BatchID: plainBatchID, HeaderSize: plainHeaderSize},
		1<<20, time.Second, 1<<32)
	l := &loop{reqs: tb}
	_, bs := tb.pack([]*Request{{Data: []byte("abc"), Waiter: newTestWaiter()}}, time.Unix(1, 0))
	resp := appResp(2, 7)
	for b.Loop() {
		l.stepped(resp)
		stampCommitted(bs)
	}
}
