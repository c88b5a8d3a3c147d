package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// consumerConn dials addr as a consumer client that counts the
// NOTIFY_CONSUMER_IDS_CHANGED requests it receives.
func consumerConn(t *testing.T, addr string, notified *atomic.Int32) *remoting.Conn {
	c, err := remoting.Dial(context.Background(), addr, remoting.Options{OnRequest: func(req *remoting.Command) *remoting.Command {
		if req.Code == remoting.NotifyConsumerIDsChanged && req.ExtFields["consumerGroup"] == "g" {
			notified.Add(1)
		}
		return nil
	}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func heartbeat(t *testing.T, c *remoting.Conn, client, group, topic string) {
	hb := remoting.HeartbeatData{ClientID: client, ConsumerDataSet: []remoting.ConsumerData{{
		GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
		SubscriptionDataSet: []remoting.SubscriptionData{{Topic: topic, SubString: "*", ExpressionType: "TAG"}},
	}}}
	body, err := hb.Encode()
	require.NoError(t, err)
	resp := invoke(t, c, remoting.NewRequest(remoting.HeartBeat, nil, body))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

func consumerList(t *testing.T, c *remoting.Conn, group string) []string {
	h := remoting.GetConsumerListByGroupRequestHeader{ConsumerGroup: group}
	resp := invoke(t, c, remoting.NewRequest(remoting.GetConsumerListByGroup, h.Encode(), nil))
	var body remoting.ConsumerListBody
	require.NoError(t, json.Unmarshal(resp.Body, &body), "%q", resp.Body)
	return body.ConsumerIDList
}

func lockQueues(t *testing.T, c *remoting.Conn, code int32, client string, queues ...int32) []int32 {
	body := remoting.LockBatchRequestBody{ConsumerGroup: "g", ClientID: client}
	for _, q := range queues {
		body.MQSet = append(body.MQSet, remoting.MessageQueue{Topic: "T", BrokerName: "raftmq", QueueID: q})
	}
	js, _ := json.Marshal(body)
	resp := invoke(t, c, remoting.NewRequest(code, nil, js))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	if code == remoting.UnlockBatchMQ {
		return nil
	}
	got, err := remoting.DecodeLockBatchResponseBody(resp.Body)
	require.NoError(t, err)
	var out []int32
	for _, mq := range got.LockOKMQSet {
		out = append(out, mq.QueueID)
	}
	return out
}

func TestConsumerGroupProtocol(t *testing.T) {
	tb := startBrokersWith(t, func(c *Config) { c.AutoCreateTopics, c.FailoverRoutes = true, true }, 1)
	l, f := tb.leader(), tb.follower()
	lc, fc := dial(t, l.ClientAddr()), dial(t, f.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)

	// Membership: two clients, each told when the other joins or leaves.
	var n1, n2 atomic.Int32
	c1, c2 := consumerConn(t, l.ClientAddr(), &n1), consumerConn(t, l.ClientAddr(), &n2)
	require.Equal(t, remoting.SystemError, invoke(t, c1, remoting.NewRequest(remoting.GetConsumerListByGroup,
		(&remoting.GetConsumerListByGroupRequestHeader{ConsumerGroup: "g"}).Encode(), nil)).Code, "no consumer yet")
	heartbeat(t, c1, "c1", "g", "T")
	require.Equal(t, []string{"c1"}, consumerList(t, c1, "g"))
	heartbeat(t, c2, "c2", "g", "T")
	require.Equal(t, []string{"c1", "c2"}, consumerList(t, c1, "g"))
	require.Eventually(t, func() bool { return n1.Load() >= 1 }, 5*time.Second, 5*time.Millisecond, "c1 not told that c2 joined")

	// The first heartbeat created the group's config and retry topic
	// through raft: every node has them.
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			if _, ok := b.Replica().Store().SubscriptionGroup("g"); !ok {
				return false
			}
			if _, ok := b.Replica().Store().Topic("%RETRY%g"); !ok {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
	resp := invoke(t, fc, remoting.NewRequest(remoting.GetAllSubscriptionGroupConfig, nil, nil))
	var groups struct {
		Table map[string]offsets.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &groups))
	require.Equal(t, int32(16), groups.Table["g"].RetryMaxTimes)

	// Queue locks: one holder per queue, whichever node is asked.
	require.Equal(t, []int32{0, 1}, lockQueues(t, lc, remoting.LockBatchMQ, "c1", 0, 1))
	require.Equal(t, []int32{2}, lockQueues(t, lc, remoting.LockBatchMQ, "c2", 1, 2))
	require.Empty(t, lockQueues(t, fc, remoting.LockBatchMQ, "c2", 0), "a follower forwards locks to the leader")
	lockQueues(t, fc, remoting.UnlockBatchMQ, "c1", 0)
	require.Equal(t, []int32{0}, lockQueues(t, lc, remoting.LockBatchMQ, "c2", 0))

	// A closed connection takes its client out, and the others are told.
	before := n1.Load()
	c2.Close()
	require.Eventually(t, func() bool { return len(consumerList(t, c1, "g")) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return n1.Load() > before }, 5*time.Second, 5*time.Millisecond)

	// A group with no offset in a queue that has lost nothing to
	// retention starts at 0 (as RocketMQ's broker answers its clients),
	// unless the client asks for a stored offset only.
	qh := remoting.QueryConsumerOffsetRequestHeader{ConsumerGroup: "fresh", Topic: "T", QueueID: 2}
	resp = invoke(t, fc, remoting.NewRequest(remoting.QueryConsumerOffset, qh.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	qr, err := remoting.DecodeQueryConsumerOffsetResponseHeader(resp.ExtFields)
	require.NoError(t, err)
	require.Equal(t, int64(0), qr.Offset)
	qh.ExactOnly = true
	require.Equal(t, remoting.QueryNotFound, invoke(t, fc, remoting.NewRequest(remoting.QueryConsumerOffset, qh.Encode(), nil)).Code)

	// UNREGISTER_CLIENT.
	uh := remoting.UnregisterClientRequestHeader{ClientID: "c1", ConsumerGroup: "g"}
	require.Equal(t, remoting.Success, invoke(t, c1, remoting.NewRequest(remoting.UnregisterClient, uh.Encode(), nil)).Code)
	require.Empty(t, consumerList(t, c1, "g"))
}

func TestQueriesRoutesAndTopicDelete(t *testing.T) {
	tb := startBrokersWith(t, func(c *Config) { c.AutoCreateTopics, c.FailoverRoutes = true, true }, 1)
	l, f := tb.leader(), tb.follower()
	lc, fc := dial(t, l.ClientAddr()), dial(t, f.ClientAddr())

	// A first send to a new topic creates it (TBW102 is routed).
	rh := remoting.GetRouteInfoRequestHeader{Topic: AutoCreateTopicKey}
	resp := invoke(t, fc, remoting.NewRequest(remoting.GetRouteInfoByTopic, rh.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	tbw, err := remoting.DecodeTopicRouteData(resp.Body)
	require.NoError(t, err)
	require.Len(t, tbw.QueueDatas, 1, "no failover names in the template's route: a client would send to queue ids the new topic lacks")
	props := message.EncodeProperties(map[string]string{message.PropertyUniqKey: "U1", "KEYS": "order-7 other"})
	h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "Q", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: 1, BornTimestamp: time.Now().UnixMilli(), Properties: props}
	resp = invoke(t, lc, remoting.NewRequest(remoting.SendMessage, h.Encode(), []byte("payload")))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	sh, err := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
	require.NoError(t, err)

	// The route lists the leader as broker id 0 of "raftmq" (read and
	// write) and each follower as a write-only broker name of its own.
	rh.Topic = "Q"
	resp = invoke(t, fc, remoting.NewRequest(remoting.GetRouteInfoByTopic, rh.Encode(), nil))
	rd, err := remoting.DecodeTopicRouteData(resp.Body)
	require.NoError(t, err)
	require.Len(t, rd.QueueDatas, 3)
	require.Equal(t, "raftmq", rd.QueueDatas[0].BrokerName)
	require.Equal(t, 4, rd.QueueDatas[0].ReadQueueNums)
	for _, qd := range rd.QueueDatas[1:] {
		require.True(t, strings.HasPrefix(qd.BrokerName, "raftmq@"), qd.BrokerName)
		require.Equal(t, 0, qd.ReadQueueNums, "consumers must not see failover names")
		require.Equal(t, remoting.PermWrite, qd.Perm)
	}
	require.Equal(t, l.ClientAddr(), rd.BrokerDatas[0].BrokerAddrs[0])

	// Queries, on the follower once it has applied the send.
	require.Eventually(t, func() bool { return f.Replica().Store().MaxOffset("Q", 1) == 1 }, 5*time.Second, 5*time.Millisecond)
	query := func(key string, unique bool) *remoting.Command {
		qh := remoting.QueryMessageRequestHeader{Topic: "Q", Key: key, MaxNum: 32, EndTimestamp: time.Now().Add(time.Hour).UnixMilli(), UniqueKey: unique}
		return invoke(t, fc, remoting.NewRequest(remoting.QueryMessage, qh.Encode(), nil))
	}
	for _, tc := range []struct {
		key    string
		unique bool
		found  bool
	}{{"order-7", false, true}, {"other", false, true}, {"U1", true, true}, {"order-7", true, false}, {"nope", false, false}} {
		resp := query(tc.key, tc.unique)
		if !tc.found {
			require.Equal(t, remoting.QueryNotFound, resp.Code, "%+v", tc)
			continue
		}
		require.Equal(t, remoting.Success, resp.Code, "%+v: %s", tc, resp.Remark)
		m, n, err := message.Decode(resp.Body)
		require.NoError(t, err)
		require.Equal(t, len(resp.Body), n, "exactly one message")
		require.Equal(t, "payload", string(m.Body))
		require.Equal(t, int64(0), m.QueueOffset)
	}
	_, phy, err := message.ParseOffsetMsgID(sh.MsgID)
	require.NoError(t, err)
	vh := remoting.ViewMessageRequestHeader{Offset: phy}
	resp = invoke(t, fc, remoting.NewRequest(remoting.ViewMessageByID, vh.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	m, _, err := message.Decode(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "U1", m.Properties[message.PropertyUniqKey])
	vh.Offset = phy + 1
	require.Equal(t, remoting.SystemError, invoke(t, fc, remoting.NewRequest(remoting.ViewMessageByID, vh.Encode(), nil)).Code)

	// Topic delete through a follower reaches every node; the topic list
	// follows.
	resp = invoke(t, fc, remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": "Q"}, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			if _, ok := b.Replica().Store().Topic("Q"); ok {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
	resp = invoke(t, lc, remoting.NewRequest(remoting.GetAllTopicListFromNameServer, nil, nil))
	require.NotContains(t, string(resp.Body), `"Q"`)
	require.Equal(t, remoting.TopicNotExist, invoke(t, lc, remoting.NewRequest(remoting.GetRouteInfoByTopic, rh.Encode(), nil)).Code)

	// An unsupported request is an error the client sees.
	require.Equal(t, remoting.RequestCodeNotSupported, invoke(t, lc, remoting.NewRequest(9999, nil, nil)).Code)
}

func TestPullFilters(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	lc := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "F", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	for i := range 6 {
		tag := []string{"red", "blue"}[i%2]
		props := message.EncodeProperties(map[string]string{message.PropertyUniqKey: fmt.Sprintf("U%d", i), "TAGS": tag, "n": fmt.Sprint(i)})
		h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "F", QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Properties: props}
		require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.SendMessage, h.Encode(), []byte(fmt.Sprint(i)))).Code)
	}
	// A send is answered once committed; its consume-queue unit comes with
	// the apply, which a loaded machine may not have run yet (RocketMQ's
	// dispatch is asynchronous too): wait for the six units.
	require.Eventually(t, func() bool { return l.Replica().Store().MaxOffset("F", 0) == 6 }, 10*time.Second, 5*time.Millisecond)
	pull := func(group string, sysFlag int32, typ, expr string) (*remoting.Command, []string) {
		h := remoting.PullMessageRequestHeader{ConsumerGroup: group, Topic: "F", QueueID: 0, QueueOffset: 0, MaxMsgNums: 32,
			SysFlag: sysFlag, Subscription: expr, ExpressionType: typ}
		resp := invoke(t, lc, remoting.NewRequest(remoting.PullMessage, h.Encode(), nil))
		var bodies []string
		for b := resp.Body; len(b) > 0; {
			m, n, err := message.Decode(b)
			require.NoError(t, err)
			bodies = append(bodies, string(m.Body))
			b = b[n:]
		}
		return resp, bodies
	}
	// The subscription in the pull.
	_, got := pull("g1", remoting.PullSysFlagSubscription, "SQL92", "n > 1 AND TAGS = 'red'")
	require.Equal(t, []string{"2", "4"}, got)
	_, got = pull("g1", remoting.PullSysFlagSubscription, "TAG", "blue")
	require.Equal(t, []string{"1", "3", "5"}, got)
	resp, _ := pull("g1", remoting.PullSysFlagSubscription, "SQL92", "n >")
	require.Equal(t, remoting.SubscriptionParseFailed, resp.Code, resp.Remark)
	// Nothing matches: retry at once from past the scanned messages.
	resp, got = pull("g1", remoting.PullSysFlagSubscription, "SQL92", "n = 99")
	require.Equal(t, remoting.PullRetryImmediately, resp.Code)
	require.Empty(t, got)
	rh, err := remoting.DecodePullMessageResponseHeader(resp.ExtFields)
	require.NoError(t, err)
	require.Equal(t, int64(6), rh.NextBeginOffset)

	// The subscription a heartbeat registered (RocketMQ's clients pull
	// without one).
	hb := remoting.HeartbeatData{ClientID: "c1", ConsumerDataSet: []remoting.ConsumerData{{GroupName: "g2", ConsumeType: "CONSUME_PASSIVELY",
		MessageModel: "CLUSTERING", SubscriptionDataSet: []remoting.SubscriptionData{{Topic: "F", SubString: "n BETWEEN 1 AND 3", ExpressionType: "SQL92"}}}}}
	body, _ := hb.Encode()
	require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.HeartBeat, nil, body)).Code)
	_, got = pull("g2", 0, "TAG", "")
	require.Equal(t, []string{"1", "2", "3"}, got)
	// A pull without a subscription of a group no heartbeat subscribed
	// waits for the heartbeat, whatever expression type it names:
	// rocketmq-client-go's push consumer says TAG for an SQL92
	// subscription, and its first pull can overtake its heartbeat.
	for _, typ := range []string{"TAG", "SQL92", ""} {
		resp, got = pull("unknown-group", 0, typ, "")
		require.Equal(t, remoting.SubscriptionNotExist, resp.Code, "expression type %q: %s", typ, resp.Remark)
		require.Empty(t, got)
	}
	// A pull of a newer subscription than the heartbeat's (a Java client
	// that changed its expression) waits for the heartbeat too.
	hb.ConsumerDataSet[0].SubscriptionDataSet[0].SubVersion = 5
	body, _ = hb.Encode()
	require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.HeartBeat, nil, body)).Code)
	newer := remoting.PullMessageRequestHeader{ConsumerGroup: "g2", Topic: "F", QueueID: 0, MaxMsgNums: 32, ExpressionType: "TAG", SubVersion: 6}
	resp = invoke(t, lc, remoting.NewRequest(remoting.PullMessage, newer.Encode(), nil))
	require.Equal(t, remoting.SubscriptionNotLatest, resp.Code, resp.Remark)
	require.Empty(t, resp.Body)
	newer.SubVersion = 5
	resp = invoke(t, lc, remoting.NewRequest(remoting.PullMessage, newer.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	// CHECK_CLIENT_CONFIG compiles the expression.
	check := func(expr string) int32 {
		b, _ := json.Marshal(map[string]any{"clientId": "c1", "group": "g2", "subscriptionData": remoting.SubscriptionData{Topic: "F", SubString: expr, ExpressionType: "SQL92"}})
		return invoke(t, lc, remoting.NewRequest(remoting.CheckClientConfig, nil, b)).Code
	}
	require.Equal(t, remoting.Success, check("a = 1"))
	require.Equal(t, remoting.SubscriptionParseFailed, check("a = = 1"))
}

// TestConcurrentFirstForwards: sends arriving at once at a follower that
// has no connection to the leader yet all get through (each used to dial,
// and the last dial closed the connection the others were using).
func TestConcurrentFirstForwards(t *testing.T) {
	tb := startBrokers(t)
	l, f := tb.leader(), tb.follower()
	ch := remoting.CreateTopicRequestHeader{Topic: "CF", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, dial(t, l.ClientAddr()), remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	require.Eventually(t, func() bool { _, ok := f.Replica().Store().Topic("CF"); return ok }, 5*time.Second, 5*time.Millisecond)
	const n = 64
	codes := make(chan int32, n)
	start := make(chan struct{})
	for i := range n {
		c, err := remoting.Dial(context.Background(), f.ClientAddr(), remoting.Options{})
		require.NoError(t, err)
		defer c.Close()
		go func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := c.Invoke(ctx, sendCmd("CF", int32(i%4), "x", fmt.Sprintf("CF%d", i)))
			if err != nil {
				codes <- -1
				return
			}
			codes <- resp.Code
		}()
	}
	close(start)
	for range n {
		require.Equal(t, remoting.Success, <-codes)
	}
}

// TestFollowerHeartbeatCreatesGroup: a client that knows only a follower
// announces a new group there; the follower has the leader create it, so
// that the group's pops (forwarded to the leader) are not refused.
func TestFollowerHeartbeatCreatesGroup(t *testing.T) {
	tb := startBrokersWith(t, func(c *Config) { c.AutoCreateTopics = true }, 1)
	f := tb.follower()
	fc := dial(t, f.ClientAddr())
	heartbeat(t, fc, "c1", "fg", "T")
	for _, b := range tb.bs {
		require.Eventually(t, func() bool {
			_, ok := b.Replica().Store().SubscriptionGroup("fg")
			return ok
		}, 10*time.Second, 5*time.Millisecond, "the group's config never reached node %d", b.cfg.ID)
	}
}
