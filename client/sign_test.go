package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/protocol/remoting"
)

var testCred = acl.Credentials{AccessKey: "RocketMQ", SecretKey: "12345678", SecurityToken: "tok"}

// newSignedClient returns a client of all of g's nodes with credentials.
func newSignedClient(t *testing.T, g *fakeGroup, cred acl.Credentials) *Client {
	t.Helper()
	c, err := New(Options{Addrs: g.addrs(), RequestTimeout: time.Second,
		AccessKey: cred.AccessKey, SecretKey: cred.SecretKey, SecurityToken: cred.SecurityToken})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestCredentialsSignEveryRequest drives every kind of request the client
// sends (sends through each path, pulls, offsets, heartbeats, locks,
// send-backs, transactions, queries, admin commands, a raw Invoke) against
// the fake group, and checks that each request any node received carries
// the credentials and a signature acl.Verify accepts.
func TestCredentialsSignEveryRequest(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.setLeader(0)
	g.addTopic("T", 2)
	ctx := testCtx(t)
	c := newSignedClient(t, g, testCred)

	// Sends: sync, async, one-way, batch, selected queue, auto-batched.
	p := c.NewProducer(ProducerOptions{Group: "pg"})
	_, err := p.Send(ctx, &Message{Topic: "T", Body: []byte("sync"), Keys: []string{"k1"}})
	require.NoError(t, err)
	done := make(chan error, 1)
	require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", Body: []byte("async")}, func(_ SendResult, err error) { done <- err }))
	require.NoError(t, <-done)
	require.NoError(t, p.SendOneway(ctx, &Message{Topic: "T", Body: []byte("oneway")}))
	_, err = p.SendBatch(ctx, []*Message{{Topic: "T", Body: []byte("b1")}, {Topic: "T", Body: []byte("b2")}})
	require.NoError(t, err)
	_, err = p.SendSelect(ctx, &Message{Topic: "T", Body: []byte("sel")}, HashSelector{Key: func(*Message) string { return "k" }})
	require.NoError(t, err)
	ab := c.NewProducer(ProducerOptions{Group: "pg", AutoBatch: true})
	var abErrs atomic.Int32
	for i := range 20 {
		require.NoError(t, ab.SendAsync(ctx, &Message{Topic: "T", Body: fmt.Appendf(nil, "ab-%d", i)}, func(_ SendResult, err error) {
			if err != nil {
				abErrs.Add(1)
			}
		}))
	}
	require.NoError(t, ab.Flush(ctx))
	require.Zero(t, abErrs.Load())

	// Pull consumer and offsets.
	pc := c.NewPullConsumer("cg")
	_, err = pc.Pull(ctx, "T", 0, 0, 8, 0)
	require.NoError(t, err)
	require.NoError(t, pc.CommitOffset(ctx, "T", 0, 1))
	require.NoError(t, pc.ResetOffset(ctx, "T", 0, 0))
	_, _, err = pc.FetchOffset(ctx, "T", 0)
	require.NoError(t, err)
	_, err = c.MaxOffset(ctx, "T", 0)
	require.NoError(t, err)
	_, err = c.MinOffset(ctx, "T", 0)
	require.NoError(t, err)
	_, err = c.SearchOffset(ctx, "T", 0, time.Now())
	require.NoError(t, err)

	// A push consumer (heartbeats, consumer list, locks, pulls, offset
	// persistence, send-backs, unregistering) on a signed client of its
	// own. Orderly, so it locks queues; a failing batch in another,
	// concurrent one is sent back.
	pushed := make(chan struct{}, 64)
	for _, orderly := range []bool{true, false} {
		pcl := newSignedClient(t, g, testCred)
		o := fastOptions(fmt.Sprintf("push-%v", orderly), "T")
		o.Orderly = orderly
		var once atomic.Bool
		pu, err := pcl.NewPushConsumer(o, func(_ context.Context, msgs []*MessageExt) ConsumeResult {
			pushed <- struct{}{}
			if !orderly && once.CompareAndSwap(false, true) {
				return ConsumeRetryLater
			}
			return ConsumeSuccess
		})
		require.NoError(t, err)
		require.NoError(t, pu.Start(ctx))
		<-pushed
		time.Sleep(150 * time.Millisecond) // a rebalance, a lock, an offset persist
		require.NoError(t, pu.Shutdown(ctx))
	}

	// A transaction: half message, END_TRANSACTION, producer heartbeats.
	tcl := newSignedClient(t, g, testCred)
	tp, err := tcl.NewTransactionProducer(TransactionProducerOptions{Producer: ProducerOptions{Group: "txg"}, HeartbeatInterval: 20 * time.Millisecond},
		newTxListener(CommitMessage, CommitMessage))
	require.NoError(t, err)
	require.NoError(t, tp.Start(ctx))
	_, err = tp.SendMessageInTransaction(ctx, &Message{Topic: "T", Body: []byte("tx")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { hs, _ := endTransactions(t, g.nodes[0]); return len(hs) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, tp.Shutdown(ctx))

	// Queries, admin commands, a raw request.
	_, _ = c.QueryMessages(ctx, "T", "k1", false, 4, time.Unix(0, 0), time.Now())
	require.NoError(t, c.CreateTopic(ctx, "T2", 2))
	_, err = c.NodeStatus(ctx, g.nodes[1].addr)
	require.NoError(t, err)
	require.NoError(t, c.TransferLeader(ctx, 2))
	require.NoError(t, c.AddNode(ctx, 4, "127.0.0.1:1", "127.0.0.1:2"))
	require.NoError(t, c.RemoveNode(ctx, 4))
	_, err = c.Invoke(ctx, g.nodes[2].addr, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T", "acceptStandardJsonOnly": "true"}, nil))
	require.NoError(t, err)

	codes := map[int32]int{}
	for _, n := range g.nodes {
		n.mu.Lock()
		reqs := slices.Clone(n.mu.reqs)
		n.mu.Unlock()
		for _, r := range reqs {
			codes[r.Code]++
			require.Equal(t, testCred.AccessKey, r.ExtFields[acl.FieldAccessKey], "code %d", r.Code)
			require.Equal(t, testCred.SecurityToken, r.ExtFields[acl.FieldSecurityToken], "code %d", r.Code)
			require.True(t, acl.Verify(r.ExtFields, r.Body, testCred.SecretKey), "code %d: bad signature %v", r.Code, r.ExtFields)
			require.False(t, acl.Verify(r.ExtFields, r.Body, "another-secret"), "code %d", r.Code)
		}
	}
	// The workload reached every kind of request.
	for _, code := range []int32{
		remoting.GetRouteInfoByTopic, remoting.SendMessageV2, remoting.SendBatchMessage, remoting.PullMessage,
		remoting.UpdateConsumerOffset, remoting.QueryConsumerOffset, remoting.GetMaxOffset, remoting.GetMinOffset,
		remoting.SearchOffsetByTimestamp, remoting.HeartBeat, remoting.GetConsumerListByGroup, remoting.LockBatchMQ,
		remoting.UnlockBatchMQ, remoting.ConsumerSendMsgBack, remoting.UnregisterClient, remoting.EndTransaction,
		remoting.QueryMessage, remoting.UpdateAndCreateTopic, remoting.ClusterStatus, remoting.TransferLeader,
		remoting.AddNode, remoting.RemoveNode,
	} {
		require.NotZero(t, codes[code], "no request with code %d (saw %v)", code, codes)
	}
}

// aclHook makes every node of g check requests against pol, answering a
// denial NO_PERMISSION with the AclException remark, as the broker is to.
func aclHook(t *testing.T, g *fakeGroup, pol *acl.Policy) {
	for _, n := range g.nodes {
		n.setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
			_, err := pol.Check(acl.Request{RemoteAddr: "127.0.0.1:1", Code: req.Code, ExtFields: req.ExtFields, Body: req.Body})
			var de *acl.DeniedError
			if errors.As(err, &de) {
				return remoting.NewResponse(req, remoting.NoPermission, de.Remark()), true
			}
			require.NoError(t, err)
			return nil, false
		})
	}
}

func TestCredentialsAgainstACL(t *testing.T) {
	cfg, err := acl.ParseYAML([]byte(`accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [T=PUB|SUB]
`))
	require.NoError(t, err)
	pol, err := acl.NewPolicy(cfg)
	require.NoError(t, err)
	g := newFakeGroup(t, 1)
	g.setLeader(0)
	g.addTopic("T", 1)
	g.addTopic("U", 1)
	aclHook(t, g, pol)
	ctx := testCtx(t)

	c := newSignedClient(t, g, acl.Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"})
	p := c.NewProducer(ProducerOptions{Group: "pg", MaxRetries: -1})
	_, err = p.Send(ctx, &Message{Topic: "T", Body: []byte("ok")})
	require.NoError(t, err)
	_, err = p.Send(ctx, &Message{Topic: "U", Body: []byte("no")})
	require.ErrorContains(t, err, "No default permission for topic:U")
	err = c.CreateTopic(ctx, "V", 1)
	require.ErrorContains(t, err, "Need admin permission for request code=17, but accessKey=RocketMQ is not")

	wrong := newSignedClient(t, g, acl.Credentials{AccessKey: "RocketMQ", SecretKey: "wrong-secret"})
	_, err = wrong.NewProducer(ProducerOptions{Group: "pg", MaxRetries: -1}).Send(ctx, &Message{Topic: "T", Body: []byte("no")})
	require.ErrorContains(t, err, "Check signature failed for accessKey=RocketMQ")

	anon := newTestClient(t, g, time.Second)
	_, err = anon.NewProducer(ProducerOptions{Group: "pg", MaxRetries: -1}).Send(ctx, &Message{Topic: "T", Body: []byte("no")})
	require.ErrorContains(t, err, "No accessKey is configured")
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, remoting.NoPermission, e.Code)
}

func TestCredentialsOptions(t *testing.T) {
	for _, o := range []Options{
		{Addrs: []string{"127.0.0.1:1"}, AccessKey: "RocketMQ"},
		{Addrs: []string{"127.0.0.1:1"}, SecretKey: "12345678"},
		{Addrs: []string{"127.0.0.1:1"}, SecurityToken: "tok"},
	} {
		_, err := New(o)
		require.Error(t, err, "%+v", o)
	}
}

// TestSignedRequestCopy: signing leaves the caller's request alone, turns
// a typed header into exactly the fields it encodes, and replaces a stale
// signature.
func TestSignedRequestCopy(t *testing.T) {
	pc := &poolConn{cred: &testCred}
	h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 1, BornTimestamp: 7, Properties: "a\x01b\x02"}
	req := remoting.NewRequest(remoting.SendMessageV2, nil, []byte("body"))
	req.Header = h.V2()
	req.Serialize = remoting.SerializeRocketMQ
	w, err := pc.signed(req)
	require.NoError(t, err)
	require.Nil(t, req.ExtFields, "caller's request untouched")
	require.NotNil(t, req.Header)
	require.Nil(t, w.Header)
	require.Equal(t, remoting.SerializeRocketMQ, w.Serialize)
	want := h.EncodeV2()
	got := maps.Clone(w.ExtFields)
	for _, k := range []string{acl.FieldAccessKey, acl.FieldSignature, acl.FieldSecurityToken} {
		delete(got, k)
	}
	require.Equal(t, want, got)
	require.True(t, acl.Verify(w.ExtFields, req.Body, testCred.SecretKey))

	ext := map[string]string{"topic": "T", acl.FieldSignature: "stale"}
	req = remoting.NewRequest(remoting.GetRouteInfoByTopic, ext, nil)
	w, err = pc.signed(req)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"topic": "T", acl.FieldSignature: "stale"}, ext)
	require.NotEqual(t, "stale", w.ExtFields[acl.FieldSignature])
	require.True(t, acl.Verify(w.ExtFields, nil, testCred.SecretKey))

	// Without credentials the request goes as it is.
	plain := &poolConn{}
	w, err = plain.signed(req)
	require.NoError(t, err)
	require.Same(t, req, w)
}
