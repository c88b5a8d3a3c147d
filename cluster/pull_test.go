package cluster

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
)

// TestStaleLeaderNeverMovesAnOffset: a leader cut off from its group (here
// its peers are gone and its clock stopped, as for a SIGSTOPped process
// that resumes before it hears of the new term) still believes it leads,
// and its queue is behind the group's. A pull beyond its max offset must
// not answer OFFSET_MOVED from that stale state (which would send the
// consumer back and redeliver): it asks the client to retry until a quorum
// confirms the node's state.
func TestStaleLeaderNeverMovesAnOffset(t *testing.T) {
	tb := startBrokersWith(t, func(c *Config) { c.SendTimeout = 300 * time.Millisecond })
	l := tb.leader()
	lc := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", DefaultTopic: "TBW102", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	for i := range 5 {
		require.Equal(t, remoting.Success, invoke(t, lc, sendCmd("T", 0, "m", string(rune('a'+i)))).Code)
	}
	pull := func(offset int64) *remoting.Command {
		h := remoting.PullMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 0, QueueOffset: offset, MaxMsgNums: 32,
			SysFlag: remoting.PullSysFlagSubscription, Subscription: "*", ExpressionType: "TAG"}
		return invoke(t, lc, remoting.NewRequest(remoting.PullMessage, h.Encode(), nil))
	}
	// While the group is whole, an offset far beyond the queue is moved.
	resp := pull(50)
	require.Equal(t, remoting.PullOffsetMoved, resp.Code, resp.Remark)

	// Freeze the leader's clock (it will not notice it lost its quorum)
	// and take its peers away: the group's state moves on without it.
	l.Replica().Node().SetTickInterval(time.Hour)
	for id, b := range tb.bs {
		if b != l {
			require.NoError(t, b.Close())
			delete(tb.bs, id)
		}
	}
	require.True(t, l.Replica().Node().IsLeader(), "the cut-off node still believes it leads")
	resp = pull(50)
	require.NotEqual(t, remoting.PullOffsetMoved, resp.Code, "a leader without a quorum moved a consumer's offset from its own state")
	require.Equal(t, remoting.PullRetryImmediately, resp.Code, resp.Remark)
	h, err := remoting.DecodePullMessageResponseHeader(resp.ExtFields)
	require.NoError(t, err)
	require.Equal(t, int64(50), h.NextBeginOffset, "the consumer keeps its offset")
}

func TestRetentionFloor(t *testing.T) {
	leader := raftlog.Status{ID: 1, Progress: map[uint64]uint64{1: 100, 2: 50, 3: 80}, Active: []uint64{1, 2, 3}}
	require.Equal(t, uint64(50), retentionFloor(leader), "the slowest live follower")
	leader.Active = []uint64{1, 3}
	require.Equal(t, uint64(80), retentionFloor(leader), "a follower not heard from does not hold the log")
	leader.Active = []uint64{1}
	require.Equal(t, uint64(math.MaxUint64), retentionFloor(leader), "the leader's own match is not a bound")
	require.Equal(t, uint64(math.MaxUint64), retentionFloor(raftlog.Status{ID: 2}), "followers: no bound")
}

// TestPullHonoursTopicPermission: as RocketMQ's pull processor, a topic
// without the read permission is not consumed (NO_PERMISSION), nor is a
// queue beyond its read queues (SYSTEM_ERROR); a dead-letter topic is
// readable.
func TestPullHonoursTopicPermission(t *testing.T) {
	tb := startBrokers(t)
	lc := dial(t, tb.leader().ClientAddr())
	create := func(perm int32) {
		ch := remoting.CreateTopicRequestHeader{Topic: "W", DefaultTopic: "TBW102", ReadQueueNums: 2, WriteQueueNums: 2, Perm: perm}
		require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	}
	pull := func(topic string, queue int32) *remoting.Command {
		h := remoting.PullMessageRequestHeader{ConsumerGroup: "g", Topic: topic, QueueID: queue, QueueOffset: 0, MaxMsgNums: 32,
			SysFlag: remoting.PullSysFlagSubscription, Subscription: "*", ExpressionType: "TAG"}
		return invoke(t, lc, remoting.NewRequest(remoting.PullMessage, h.Encode(), nil))
	}
	create(2) // write only
	require.Equal(t, remoting.Success, invoke(t, lc, sendCmd("W", 0, "m", "a")).Code)
	resp := pull("W", 0)
	require.Equal(t, remoting.NoPermission, resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "the topic[W] pulling message is forbidden")

	create(6)
	resp = pull("W", 0)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = pull("W", 2)
	require.Equal(t, remoting.SystemError, resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "queueId[2] is illegal")

	require.Equal(t, offsets.PermRead|offsets.PermWrite, dlqTopicConfig("%DLQ%g").Perm, "dead letters are readable, as RocketMQ creates them")
}
