package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// handedOut holds every address freeAddrs returned in this test binary:
// the kernel may offer a closed port again at once, and two calls of one
// test (HTTP addresses, then the brokers') must not share one.
var handedOut sync.Map

// freeAddrs returns n distinct free loopback addresses, none returned
// before in this test binary.
func freeAddrs(t testing.TB, n int) []string {
	var ls []net.Listener
	var out []string
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		if _, dup := handedOut.LoadOrStore(l.Addr().String(), true); dup {
			continue
		}
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

type testBrokers struct {
	t         testing.TB
	preferred uint64
	mod       func(*Config) // adjusts each node's config, if set
	peers     map[uint64]Peer
	dirs      map[uint64]string
	bs        map[uint64]*Broker
	clusterID uint64 // random, as `raftmq cluster` gives its groups
}

func startBrokers(t *testing.T, preferred ...uint64) *testBrokers {
	return startBrokersWith(t, nil, preferred...)
}

func startBrokersWith(t testing.TB, mod func(*Config), preferred ...uint64) *testBrokers {
	addrs := freeAddrs(t, 6)
	tb := &testBrokers{t: t, preferred: append(preferred, 0)[0], mod: mod, peers: map[uint64]Peer{}, dirs: map[uint64]string{}, bs: map[uint64]*Broker{},
		clusterID: NewClusterID()}
	for i := uint64(1); i <= 3; i++ {
		tb.peers[i] = Peer{Client: addrs[2*(i-1)], Raft: addrs[2*(i-1)+1]}
		tb.dirs[i] = t.TempDir()
	}
	for i := uint64(1); i <= 3; i++ {
		tb.start(i)
	}
	t.Cleanup(func() {
		for _, b := range tb.bs {
			b.Close()
		}
	})
	return tb
}

func (tb *testBrokers) start(id uint64, join ...bool) {
	cfg := Config{ID: id, Dir: tb.dirs[id], Peers: tb.peers, ClusterID: tb.clusterID, Join: len(join) > 0 && join[0], PreferredLeader: tb.preferred, SegmentSize: 4 << 20, Raft: raftlog.Timing{TickInterval: 10 * time.Millisecond},
		Store: store.Config{CQUnitsPerFile: 1000, IndexSlots: 64, IndexMaxEntries: 4096}}
	if cfg.Join {
		cfg.ClusterID = 0 // a joining node learns it from the group
	}
	if tb.mod != nil {
		tb.mod(&cfg)
	}
	b, err := Start(cfg)
	require.NoError(tb.t, err)
	tb.bs[id] = b
}

// leaderWait bounds how long leader and follower wait for the group to
// settle: they return as soon as it has, and a loaded machine (the suite
// beside stress --cpu) can take several election rounds.
const leaderWait = 30 * time.Second

func (tb *testBrokers) leader() *Broker {
	deadline := time.Now().Add(leaderWait)
	for time.Now().Before(deadline) {
		for _, b := range tb.bs {
			if b.Replica().Node().LeaderReady() {
				return b
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.t.Fatal("no leader")
	return nil
}

// follower returns a node that follows the current leader and knows it, so
// the raw (non-retrying) requests tests send it are forwarded, not refused
// as "no raft leader elected".
func (tb *testBrokers) follower() *Broker {
	l := tb.leader()
	deadline := time.Now().Add(leaderWait)
	for time.Now().Before(deadline) {
		for _, b := range tb.bs {
			if b != l && b.Replica().Node().Status().Leader == l.cfg.ID {
				return b
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.t.Fatal("no follower knows the leader")
	return nil
}

func dial(t testing.TB, addr string) *remoting.Conn {
	c, err := remoting.Dial(context.Background(), addr, remoting.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func invoke(t testing.TB, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, req)
	require.NoError(t, err)
	return resp
}

func sendCmd(topic string, q int32, body, uniq string) *remoting.Command {
	props := message.EncodeProperties(map[string]string{message.PropertyUniqKey: uniq})
	h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: q, BornTimestamp: time.Now().UnixMilli(), Properties: string(props)}
	return remoting.NewRequest(remoting.SendMessage, h.Encode(), []byte(body))
}

func TestBrokerProtocolEndToEnd(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	f := tb.follower()
	fc := dial(t, f.ClientAddr())
	lc := dial(t, l.ClientAddr())

	// Create a topic through a follower (forwarded).
	ch := remoting.CreateTopicRequestHeader{Topic: "T", DefaultTopic: "TBW102", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}
	resp := invoke(t, fc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	// Route from a follower: the leader is brokerId 0.
	rh := remoting.GetRouteInfoRequestHeader{Topic: "T"}
	resp = invoke(t, fc, remoting.NewRequest(remoting.GetRouteInfoByTopic, rh.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	rd, err := remoting.DecodeTopicRouteData(resp.Body)
	require.NoError(t, err)
	require.Equal(t, l.ClientAddr(), rd.BrokerDatas[0].BrokerAddrs[0])
	require.Equal(t, 2, rd.QueueDatas[0].WriteQueueNums)

	// Send through the follower: forwarded, answered with the offset.
	req := sendCmd("T", 1, "hello", "U1")
	req.Opaque = 0 // Invoke assigns one
	resp = invoke(t, fc, req)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	sh, err := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
	require.NoError(t, err)
	require.Equal(t, int32(1), sh.QueueID)
	require.Equal(t, int64(0), sh.QueueOffset)
	require.Equal(t, "U1", sh.TransactionID)

	// The same unique key again: the original answer, flagged duplicate.
	resp = invoke(t, lc, sendCmd("T", 1, "hello", "U1"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	sh2, _ := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
	require.Equal(t, sh.MsgID, sh2.MsgID)
	require.Equal(t, "true", resp.ExtFields["raftmqDuplicate"])

	// Batch of three (code 320, V2 header).
	ents := []remoting.BatchEntry{
		{Body: []byte("b1"), Properties: map[string]string{message.PropertyUniqKey: "B1"}},
		{Body: []byte("b2"), Properties: map[string]string{message.PropertyUniqKey: "B2"}},
		{Body: []byte("b3"), Properties: map[string]string{message.PropertyUniqKey: "B3"}},
	}
	body, err := remoting.AppendBatch(nil, ents)
	require.NoError(t, err)
	bh := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 1, BornTimestamp: 1, Batch: true}
	resp = invoke(t, lc, remoting.NewRequest(remoting.SendBatchMessage, bh.EncodeV2(), body))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	sh3, _ := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
	require.Equal(t, int64(1), sh3.QueueOffset)
	require.Len(t, strings.Split(sh3.MsgID, ","), 3)

	// Properties are stored as sent; an empty UNIQ_KEY is replaced by a
	// fresh one, and malformed properties are refused.
	rawSend := func(props string) *remoting.Command {
		h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
			QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Properties: props}
		return invoke(t, lc, remoting.NewRequest(remoting.SendMessage, h.Encode(), []byte("raw")))
	}
	resp = rawSend("TAGS\x01t1\x02UNIQ_KEY\x01\x02KEYS\x01k1")
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	rsh, _ := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
	require.Len(t, rsh.TransactionID, 32, "a fresh UNIQ_KEY")
	gr, err := l.Replica().Store().GetMessages("T", 0, rsh.QueueOffset, 1, 1<<20, nil)
	require.NoError(t, err)
	require.Len(t, gr.Records, 1)
	stored, _, err := message.Decode(gr.Records[0])
	require.NoError(t, err)
	require.Equal(t, map[string]string{"TAGS": "t1", "KEYS": "k1", message.PropertyUniqKey: rsh.TransactionID}, stored.Properties)
	// What RocketMQ's broker skips is skipped (a pair without a separator,
	// an empty name, an empty pair; of a repeated name the last value
	// wins); a value holding a separator cannot be stored as sent.
	for in, want := range map[string]string{"TAGS": "", "TAGS\x01a\x02TAGS\x01b": "b", "\x01x\x02TAGS\x01c\x02\x01\x02": "c"} {
		resp = rawSend(in)
		require.Equal(t, remoting.Success, resp.Code, "%q: %s", in, resp.Remark)
		sh, _ := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
		gr, err := l.Replica().Store().GetMessages("T", 0, sh.QueueOffset, 1, 1<<20, nil)
		require.NoError(t, err)
		require.Len(t, gr.Records, 1)
		m, _, err := message.Decode(gr.Records[0])
		require.NoError(t, err)
		require.Equal(t, want, m.Properties["TAGS"], "%q", in)
		wantLen := 1 // UNIQ_KEY, added by the broker
		if want != "" {
			wantLen++
		}
		require.Len(t, m.Properties, wantLen, "%q: %v", in, m.Properties)
	}
	resp = rawSend("a\x01b\x01c")
	require.Equal(t, remoting.MessageIllegal, resp.Code, resp.Remark)

	// Unknown topic without auto-create: TOPIC_NOT_EXIST.
	resp = invoke(t, lc, sendCmd("nope", 0, "x", "U9"))
	require.Equal(t, remoting.TopicNotExist, resp.Code)
	// Queue out of range.
	resp = invoke(t, lc, sendCmd("T", 7, "x", "U8"))
	require.Equal(t, remoting.InvalidParameter, resp.Code)
	// Unknown request code.
	resp = invoke(t, lc, remoting.NewRequest(4242, nil, nil))
	require.Equal(t, remoting.RequestCodeNotSupported, resp.Code)

	// Pull from the follower once it has applied.
	require.Eventually(t, func() bool { return f.Replica().Store().MaxOffset("T", 1) == 4 }, 5*time.Second, 5*time.Millisecond)
	ph := remoting.PullMessageRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 1, QueueOffset: 0, MaxMsgNums: 32, SysFlag: remoting.PullSysFlagSuspend | remoting.PullSysFlagSubscription, SuspendTimeoutMillis: 1000, Subscription: "*", ExpressionType: "TAG"}
	resp = invoke(t, fc, remoting.NewRequest(remoting.PullMessage, ph.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var bodies []string
	for off := 0; off < len(resp.Body); {
		v, err := message.Parse(resp.Body[off:], true)
		require.NoError(t, err)
		bodies = append(bodies, string(v.Body))
		off += v.Size
	}
	require.Equal(t, []string{"hello", "b1", "b2", "b3"}, bodies)
	prh, _ := remoting.DecodePullMessageResponseHeader(resp.ExtFields)
	require.Equal(t, int64(4), prh.NextBeginOffset)

	// A long poll at the end is answered when a message arrives, and does
	// not block a send on the same connection.
	ph.QueueOffset = 4
	done := make(chan *remoting.Command, 1)
	go func() { done <- invoke(t, lc, remoting.NewRequest(remoting.PullMessage, ph.Encode(), nil)) }()
	time.Sleep(50 * time.Millisecond)
	resp = invoke(t, lc, sendCmd("T", 1, "late", "U2"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	select {
	case r := <-done:
		require.Equal(t, remoting.Success, r.Code)
	case <-time.After(3 * time.Second):
		t.Fatal("long poll not woken by a send")
	}

	// Consumer offsets: commit through the follower, read back, replicated.
	uh := remoting.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 1, CommitOffset: 3}
	resp = invoke(t, fc, remoting.NewRequest(remoting.UpdateConsumerOffset, uh.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	qh := remoting.QueryConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 1}
	resp = invoke(t, fc, remoting.NewRequest(remoting.QueryConsumerOffset, qh.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	qr, _ := remoting.DecodeQueryConsumerOffsetResponseHeader(resp.ExtFields)
	require.Equal(t, int64(3), qr.Offset)
	for _, b := range tb.bs {
		require.Eventually(t, func() bool { o, ok := b.Replica().Store().ConsumerOffset("cg", "T", 1); return ok && o == 3 }, 5*time.Second, 5*time.Millisecond)
	}
	queryOffset := func() int64 {
		resp := invoke(t, fc, remoting.NewRequest(remoting.QueryConsumerOffset, qh.Encode(), nil))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		qr, err := remoting.DecodeQueryConsumerOffsetResponseHeader(resp.ExtFields)
		require.NoError(t, err)
		return qr.Offset
	}
	// A late copy of an older commit (a retried request's first copy
	// delivered after the partition holding it healed) does not move the
	// group back, whether answered, one-way, or carried by a pull.
	uh.CommitOffset = 2
	resp = invoke(t, lc, remoting.NewRequest(remoting.UpdateConsumerOffset, uh.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.NoError(t, lc.Oneway(remoting.NewRequest(remoting.UpdateConsumerOffset, uh.Encode(), nil)))
	pc := ph
	pc.QueueOffset, pc.SysFlag, pc.CommitOffset = 5, remoting.PullSysFlagCommitOffset|remoting.PullSysFlagSubscription, 1
	resp = invoke(t, lc, remoting.NewRequest(remoting.PullMessage, pc.Encode(), nil))
	require.Equal(t, remoting.PullNotFound, resp.Code, resp.Remark)
	time.Sleep(2 * flushEvery) // the one-way and pull commits are batched
	require.Equal(t, int64(3), queryOffset())
	// A one-way commit still waiting for its batch is replicated before a
	// query answers with it.
	l.offs.add(store.OffsetCommit{Group: "cg", Topic: "T", QueueID: 1, Offset: 4})
	require.Equal(t, int64(4), queryOffset())
	for _, b := range tb.bs {
		require.Eventually(t, func() bool { o, ok := b.Replica().Store().ConsumerOffset("cg", "T", 1); return ok && o == 4 }, 5*time.Second, 5*time.Millisecond)
	}
	// A reset moves it back, and a later commit forward again.
	uh.CommitOffset, uh.Reset = 1, true
	resp = invoke(t, fc, remoting.NewRequest(remoting.UpdateConsumerOffset, uh.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Equal(t, int64(1), queryOffset())
	uh.CommitOffset, uh.Reset = 5, false
	resp = invoke(t, fc, remoting.NewRequest(remoting.UpdateConsumerOffset, uh.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Equal(t, int64(5), queryOffset())
	// Max offset.
	mh := remoting.GetMaxOffsetRequestHeader{Topic: "T", QueueID: 1}
	resp = invoke(t, fc, remoting.NewRequest(remoting.GetMaxOffset, mh.Encode(), nil))
	or, _ := remoting.DecodeOffsetResponseHeader(resp.ExtFields)
	require.Equal(t, int64(5), or.Offset)

	// A transfer to a node that is not a member is refused, not dropped
	// silently by raft.
	resp = invoke(t, fc, remoting.NewRequest(remoting.TransferLeader, map[string]string{"id": "7"}, nil))
	require.NotEqual(t, remoting.Success, resp.Code)
	require.Contains(t, resp.Remark, "node 7 is not a voting member")
	// Leadership transfer through a follower's admin endpoint.
	target := f.cfg.ID
	resp = invoke(t, fc, remoting.NewRequest(remoting.TransferLeader, map[string]string{"id": fmt.Sprint(target)}, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Eventually(t, func() bool { return f.Replica().Node().LeaderReady() }, 5*time.Second, 10*time.Millisecond)
	// A transfer to the node that already leads succeeds and changes nothing.
	term := f.Replica().Node().Status().Term
	resp = invoke(t, fc, remoting.NewRequest(remoting.TransferLeader, map[string]string{"id": fmt.Sprint(target)}, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.True(t, f.Replica().Node().IsLeader())
	require.Equal(t, term, f.Replica().Node().Status().Term)
}

func TestPreferredLeaderAndMembershipChange(t *testing.T) {
	tb := startBrokers(t, 3)
	require.Eventually(t, func() bool { return tb.bs[3].Replica().Node().LeaderReady() }, 10*time.Second, 10*time.Millisecond,
		"the preferred leader takes over")
	// A node still in the old term (or a leader mid-transfer, which drops
	// proposals) answers a retryable SERVICE_NOT_AVAILABLE; wait until every
	// node knows the new leader so the raw, non-retrying requests below are
	// forwarded to it.
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			if b.Replica().Node().Status().Leader != 3 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "every node follows the preferred leader")
	c := dial(t, tb.bs[1].ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	for i := 0; i < 20; i++ {
		resp := invoke(t, c, sendCmd("T", 0, fmt.Sprint("m", i), fmt.Sprint("K", i)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}

	// Add node 4: announce it through any node, then start it empty.
	a := freeAddrs(t, 2)
	tb.peers[4] = Peer{Client: a[0], Raft: a[1]}
	tb.dirs[4] = t.TempDir()
	resp := invoke(t, c, remoting.NewRequest(remoting.AddNode, map[string]string{"id": "4", "client": a[0], "raft": a[1]}, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	tb.start(4, true)
	require.Eventually(t, func() bool { return tb.bs[4].Replica().Store().MaxOffset("T", 0) == 20 }, 10*time.Second, 10*time.Millisecond,
		"the new node catches up from the leader's log")
	require.Equal(t, tb.clusterID, tb.bs[4].Replica().ClusterID(), "the new node learnt the group's cluster ID")
	require.Eventually(t, func() bool { return len(tb.bs[3].Replica().Node().Status().Voters) == 4 }, 5*time.Second, 10*time.Millisecond)

	// Remove node 1.
	resp = invoke(t, c, remoting.NewRequest(remoting.RemoveNode, map[string]string{"id": "1"}, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Eventually(t, func() bool {
		v := tb.bs[3].Replica().Node().Status().Voters
		return len(v) == 3 && v[0] == 2
	}, 5*time.Second, 10*time.Millisecond)
	// The group still takes writes.
	c4 := dial(t, tb.bs[4].ClientAddr())
	require.Equal(t, remoting.Success, invoke(t, c4, sendCmd("T", 0, "after", "KA")).Code)
}

func TestPprofOnlyForLoopback(t *testing.T) {
	called := false
	h := loopbackOnly(slog.New(slog.DiscardHandler), func(w http.ResponseWriter, _ *http.Request) { called = true })
	for _, c := range []struct {
		remote string
		ok     bool
	}{{"127.0.0.1:5000", true}, {"[::1]:5000", true}, {"10.1.2.3:5000", false}, {"[2001:db8::1]:80", false}, {"garbage", false}} {
		called = false
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil)
		req.RemoteAddr = c.remote
		h(rec, req)
		require.Equal(t, c.ok, called, c.remote)
		if !c.ok {
			require.Equal(t, http.StatusForbidden, rec.Code, c.remote)
		}
	}
}
