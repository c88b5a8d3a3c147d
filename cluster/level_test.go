package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/pop"
)

// popOpTypes returns the op types of the pop entries in b's log after
// index from, in log order, each after "json:" or "v1:", its entry's head.
func popOpTypes(t *testing.T, b *Broker, from uint64) []string {
	t.Helper()
	to := b.Replica().Node().Status().Applied
	ents, err := b.Replica().Store().Log().Entries(from+1, to+1, 64<<20)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if e.Type != 0 || len(e.Data) < store.BodyHeaderSize || e.Data[0] != store.KindPop {
			continue
		}
		p := e.Data[store.BodyHeaderSize:]
		batch, _, err := pop.DecodeBatch(p)
		require.NoError(t, err)
		head := "v1:"
		if p[4] == '{' {
			head = "json:"
		}
		for _, o := range batch.Ops {
			out = append(out, head+o.Type)
		}
	}
	return out
}

// The leader builds a batch ack's acks op, and pop entries' binary head,
// only while every member has announced a format level that reads them: every node announces its own as
// it starts; a learner that never announced makes the leader ack message
// by message, until an announcement for it is applied; a node whose
// recorded level is not its build's announces again; a restart keeps the
// levels. Every node applies the same pop state and levels.
func TestFormatLevelGatesAcks(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	popSetup(t, dial(t, l.ClientAddr()), 1, 15, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Eventually(t, func() bool { return l.groupFormatLevel() == store.FormatLevel }, 20*time.Second, 5*time.Millisecond,
		"every member announces its level: %+v", l.Status().FormatLevel)

	// popAck pops 3 messages and acks them in one batch; it returns the
	// op types of the pop entries the ack made.
	popAck := func() []string {
		t.Helper()
		res, err := l.Pop(ctx, PopRequest{Group: "g", Topic: "T", QueueID: 0, Max: 3, Invisible: time.Minute, InitMode: remoting.PopInitMin})
		require.NoError(t, err)
		require.Len(t, res.Messages, 3)
		var rs []Receipt
		for _, m := range res.Messages {
			rs = append(rs, m.Receipt)
		}
		from := l.Replica().Node().Status().Applied
		errs, err := l.PopAck(ctx, rs)
		require.NoError(t, err)
		for i, e := range errs {
			require.NoError(t, e, "receipt %d", i)
		}
		return popOpTypes(t, l, from)
	}
	require.Equal(t, []string{"v1:" + pop.OpAcks}, popAck(), "every member reads acks")

	addrs := freeAddrs(t, 2)
	require.NoError(t, l.AddNode(ctx, 9, Peer{Client: addrs[0], Raft: addrs[1]}))
	require.Equal(t, store.FormatLevelBase, l.groupFormatLevel())
	ack := "json:" + pop.OpAck
	require.Equal(t, []string{ack, ack, ack}, popAck(), "learner 9 never announced")

	// As the learner would announce it, once it runs this build.
	require.NoError(t, l.Replica().Exec(ctx, &store.Command{Op: store.OpFormatLevel, Member: &store.MemberLevel{ID: 9, Level: store.FormatLevel}}))
	require.Equal(t, store.FormatLevel, l.groupFormatLevel())
	require.Equal(t, []string{"v1:" + pop.OpAcks}, popAck(), "learner 9 announced")

	// Removed and added again, node 9 may run another build: its earlier
	// announcement no longer counts.
	require.NoError(t, l.RemoveNode(ctx, 9))
	require.NoError(t, l.AddNode(ctx, 9, Peer{Client: addrs[0], Raft: addrs[1]}))
	require.Equal(t, store.FormatLevelBase, l.groupFormatLevel())
	require.Equal(t, []string{ack, ack, ack}, popAck(), "learner 9 added again")
	require.NoError(t, l.Replica().Exec(ctx, &store.Command{Op: store.OpFormatLevel, Member: &store.MemberLevel{ID: 9, Level: store.FormatLevel}}))

	// A record of a lower level (an older build that announced): the node
	// announces its own level again.
	f := tb.follower()
	require.NoError(t, l.Replica().Exec(ctx, &store.Command{Op: store.OpFormatLevel, Member: &store.MemberLevel{ID: f.cfg.ID, Level: store.FormatLevelBase}}))
	require.Eventually(t, func() bool { return l.groupFormatLevel() == store.FormatLevel }, 20*time.Second, 5*time.Millisecond)

	// A restart keeps the levels: the node opens with them (meta.db).
	require.Eventually(t, func() bool { return f.Replica().Store().FormatLevels()[f.cfg.ID] == store.FormatLevel }, 20*time.Second, 5*time.Millisecond)
	want := f.Replica().Store().FormatLevels()
	require.NoError(t, f.Close())
	tb.start(f.cfg.ID)
	require.Equal(t, want, tb.bs[f.cfg.ID].Replica().Store().FormatLevels(), "after a restart")

	ns := l.Status().FormatLevel
	require.Equal(t, store.FormatLevel, ns.Build)
	require.Equal(t, store.FormatLevel, ns.Group)
	require.Equal(t, store.FormatLevel, ns.Members["9"])
	require.Len(t, ns.Members, 4)

	// Every node applied the same levels and pop state.
	k := pop.Key{Group: "g", Topic: "T", Queue: 0}
	lq, ok := l.Replica().Store().PopQueue(k)
	require.True(t, ok)
	require.Empty(t, lq.InFlight)
	idx := l.Replica().Node().Status().Applied
	for _, b := range tb.bs {
		require.Eventually(t, func() bool { return b.Replica().Node().Status().Applied >= idx }, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, l.Replica().Store().FormatLevels(), b.Replica().Store().FormatLevels(), "node %d", b.cfg.ID)
		q, ok := b.Replica().Store().PopQueue(k)
		require.True(t, ok)
		require.Equal(t, lq.Encode(), q.Encode(), "node %d", b.cfg.ID)
	}
}

// BenchmarkGroupFormatLevel is what a pop entry pays for the gate on the
// leader (ProposePopAsync) and a batch ack once more (PopAck).
func BenchmarkGroupFormatLevel(b *testing.B) {
	tb := startBrokersWith(b, nil)
	l := tb.leader()
	for l.groupFormatLevel() != store.FormatLevel {
		time.Sleep(10 * time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		if l.groupFormatLevel() != store.FormatLevel {
			b.Fatal("level changed")
		}
	}
}
