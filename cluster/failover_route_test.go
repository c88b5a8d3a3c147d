package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
)

func TestFailoverQueues(t *testing.T) {
	for _, tc := range []struct {
		k, n       int32
		id         uint64
		count, off int32
	}{
		{0, 4, 2, 4, 0}, // 0: the topic's count, queue i is queue i
		{4, 4, 2, 4, 0},
		{9, 4, 2, 4, 0},
		{1, 4, 1, 1, 1},
		{1, 4, 3, 1, 3},
		{1, 4, 4, 1, 0},
		{2, 8, 3, 2, 6},
		{2, 8, 5, 2, 2},
		{1, 0, 1, 0, 0},
	} {
		count, off := FailoverQueues(tc.k, tc.n, tc.id)
		require.Equal(t, [2]int32{tc.count, tc.off}, [2]int32{count, off}, "%+v", tc)
	}
	for _, tc := range []struct {
		name string
		id   uint64
		ok   bool
	}{{"raftmq@2", 2, true}, {"raftmq@12", 12, true}, {"raftmq", 0, false}, {"other@2", 0, false}, {"raftmq@", 0, false}, {"raftmq@x", 0, false}, {"", 0, false}} {
		id, ok := failoverID("raftmq", tc.name)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.id, id, tc.name)
	}
}

// TestFailoverRouteQueues: with one failover write queue, a route lists
// each follower's failover name with one write queue; a send to that
// name's queue 0 is stored in the topic's queue id mod 4 (sent to the
// follower, which forwards it, or to the leader), a queue id the name does
// not list is refused, and sends to the group's name or without a broker
// name keep their queue id.
func TestFailoverRouteQueues(t *testing.T) {
	tb := startBrokersWith(t, func(c *Config) { c.FailoverRoutes, c.FailoverWriteQueues = true, 1 }, 1)
	l, f := tb.leader(), tb.follower()
	lc, fc := dial(t, l.ClientAddr()), dial(t, f.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	require.Eventually(t, func() bool { _, ok := f.Replica().Store().Topic("T"); return ok }, 10*time.Second, 5*time.Millisecond)

	rh := remoting.GetRouteInfoRequestHeader{Topic: "T"}
	for _, c := range []*remoting.Conn{lc, fc} {
		resp := invoke(t, c, remoting.NewRequest(remoting.GetRouteInfoByTopic, rh.Encode(), nil))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		rd, err := remoting.DecodeTopicRouteData(resp.Body)
		require.NoError(t, err)
		require.Len(t, rd.QueueDatas, 3)
		require.Equal(t, "raftmq", rd.QueueDatas[0].BrokerName)
		require.Equal(t, 4, rd.QueueDatas[0].WriteQueueNums)
		for _, qd := range rd.QueueDatas[1:] {
			require.True(t, strings.HasPrefix(qd.BrokerName, "raftmq@"), qd.BrokerName)
			require.Equal(t, 1, qd.WriteQueueNums, qd.BrokerName)
			require.Equal(t, 0, qd.ReadQueueNums, qd.BrokerName)
		}
	}

	send := func(c *remoting.Conn, code int32, bname string, qid int32) *remoting.Command {
		h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
			QueueID: qid, BornTimestamp: time.Now().UnixMilli(), BrokerName: bname}
		ext := h.Encode()
		if code == remoting.SendMessageV2 {
			ext = h.EncodeV2()
		}
		return invoke(t, c, remoting.NewRequest(code, ext, []byte("x")))
	}
	stored := func(resp *remoting.Command) int32 {
		t.Helper()
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		sh, err := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
		require.NoError(t, err)
		return sh.QueueID
	}
	fname := FailoverBrokerName("raftmq", f.cfg.ID)
	want := int32(f.cfg.ID % 4)
	for _, code := range []int32{remoting.SendMessage, remoting.SendMessageV2} {
		// Through the follower (forwarded) and, with a route from before a
		// leader change, to the leader under the follower's name.
		require.Equal(t, want, stored(send(fc, code, fname, 0)), "code %d via follower", code)
		require.Equal(t, want, stored(send(lc, code, fname, 0)), "code %d via leader", code)
		for _, c := range []*remoting.Conn{fc, lc} {
			resp := send(c, code, fname, 1)
			require.Equal(t, remoting.InvalidParameter, resp.Code, "queue 1 of %s: %s", fname, resp.Remark)
			require.Contains(t, resp.Remark, fmt.Sprintf("failover broker name %s lists 1 write queues", fname))
		}
		// The group's own name, and no name at all, keep the queue id.
		require.Equal(t, int32(3), stored(send(lc, code, "raftmq", 3)))
		require.Equal(t, int32(2), stored(send(fc, code, "", 2)))
	}
	// Nothing was stored for the refused sends: 4 sends in the follower's
	// mapped queue (plus the group name's and no name's, which are elsewhere
	// unless they coincide).
	extra := int64(0)
	for _, q := range []int32{3, 2} {
		if q == want {
			extra += 2
		}
	}
	require.Equal(t, 4+extra, l.Replica().Store().MaxOffset("T", want))

	// The follower's name-server registration lists its failover name with
	// one write queue.
	regs := f.registrations()
	require.Len(t, regs, 2)
	require.Equal(t, fname, regs[1].BrokerName)
	found := false
	for _, tc := range regs[1].Topics {
		if tc.TopicName == "T" {
			found = true
			require.Equal(t, int32(1), tc.WriteQueueNums)
			require.Equal(t, int32(0), tc.ReadQueueNums)
		}
	}
	require.True(t, found, "T registered under %s", fname)
}

// TestFailoverRouteOrderlyTopic: with one failover write queue, a topic
// marked orderly (its config's Order flag) still lists all its write
// queues under each failover name, mapped one to one (queue i stands for
// the topic's queue i), in routes and in the follower's name-server
// registration, while a normal topic lists one.
func TestFailoverRouteOrderlyTopic(t *testing.T) {
	tb := startBrokersWith(t, func(c *Config) { c.FailoverRoutes, c.FailoverWriteQueues = true, 1 }, 1)
	l, f := tb.leader(), tb.follower()
	lc, fc := dial(t, l.ClientAddr()), dial(t, f.ClientAddr())
	want := map[string]int{"Normal": 1, "Orderly": 4}
	for topic := range want {
		ch := remoting.CreateTopicRequestHeader{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, Order: topic == "Orderly"}
		require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
		require.Eventually(t, func() bool { _, ok := f.Replica().Store().Topic(topic); return ok }, 10*time.Second, 5*time.Millisecond)
	}
	for topic, n := range want {
		rh := remoting.GetRouteInfoRequestHeader{Topic: topic}
		for _, c := range []*remoting.Conn{lc, fc} {
			resp := invoke(t, c, remoting.NewRequest(remoting.GetRouteInfoByTopic, rh.Encode(), nil))
			require.Equal(t, remoting.Success, resp.Code, resp.Remark)
			rd, err := remoting.DecodeTopicRouteData(resp.Body)
			require.NoError(t, err)
			require.Len(t, rd.QueueDatas, 3)
			require.Equal(t, 4, rd.QueueDatas[0].WriteQueueNums)
			for _, qd := range rd.QueueDatas[1:] {
				require.True(t, strings.HasPrefix(qd.BrokerName, "raftmq@"), qd.BrokerName)
				require.Equal(t, n, qd.WriteQueueNums, "%s %s", topic, qd.BrokerName)
				require.Equal(t, 0, qd.ReadQueueNums, qd.BrokerName)
			}
		}
	}

	// Queue i of a failover name of the orderly topic is the topic's
	// queue i, through the follower and at the leader.
	fname := FailoverBrokerName("raftmq", f.cfg.ID)
	for _, c := range []*remoting.Conn{fc, lc} {
		for qid := int32(0); qid < 4; qid++ {
			h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "Orderly", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
				QueueID: qid, BornTimestamp: time.Now().UnixMilli(), BrokerName: fname}
			resp := invoke(t, c, remoting.NewRequest(remoting.SendMessageV2, h.EncodeV2(), []byte("x")))
			require.Equal(t, remoting.Success, resp.Code, resp.Remark)
			sh, err := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
			require.NoError(t, err)
			require.Equal(t, qid, sh.QueueID)
		}
	}

	regs := f.registrations()
	require.Len(t, regs, 2)
	require.Equal(t, fname, regs[1].BrokerName)
	got := map[string]int{}
	for _, tc := range regs[1].Topics {
		if _, ok := want[tc.TopicName]; ok {
			got[tc.TopicName] = int(tc.WriteQueueNums)
		}
	}
	require.Equal(t, want, got)
}
