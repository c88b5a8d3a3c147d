package client

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var uniqKeyRE = regexp.MustCompile(`^[0-9A-F]{32}$`)

func TestRouteDiscoveryFromOneNode(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.addTopic("T", 4)
	g.setLeader(2)
	c := newTestClient(t, g, time.Second, 0) // knows only node 0
	ctx := testCtx(t)

	r, err := c.Route(ctx, "T", false)
	require.NoError(t, err)
	require.Equal(t, g.nodes[2].addr, r.Leader)
	require.Equal(t, 4, r.WriteQueues)
	require.Equal(t, 4, r.ReadQueues)
	require.Equal(t, map[int64]string{0: g.nodes[2].addr, 1: g.nodes[0].addr, 2: g.nodes[1].addr}, r.Addrs)
	require.ElementsMatch(t, g.addrs(), c.nodes(), "the other nodes are learned from the route")
	require.Equal(t, g.nodes[2].addr, c.leaderAddr())

	// Cached: no new query.
	before := len(g.nodes[0].requests(remoting.GetRouteInfoByTopic))
	_, err = c.Route(ctx, "T", false)
	require.NoError(t, err)
	require.Len(t, g.nodes[0].requests(remoting.GetRouteInfoByTopic), before)

	// Unknown topic: TOPIC_NOT_EXIST, as an *Error.
	_, err = c.Route(ctx, "Nope", true)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, remoting.TopicNotExist, e.Code)
}

func TestSendFollowsLeader(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.addTopic("T", 2)
	g.setLeader(1)
	c := newTestClient(t, g, time.Second, 0)
	p := c.NewProducer(ProducerOptions{Backoff: time.Millisecond})
	ctx := testCtx(t)

	res, err := p.Send(ctx, &Message{Topic: "T", QueueID: 1, Body: []byte("a")})
	require.NoError(t, err)
	require.Equal(t, int32(1), res.QueueID)
	require.Equal(t, int64(0), res.QueueOffset)
	require.Len(t, g.nodes[1].requests(remoting.SendMessageV2), 1)

	// Leadership moves to node 2 behind the client's back: node 1 answers
	// SERVICE_NOT_AVAILABLE naming node 2, and the client goes there at
	// once with the same UNIQ_KEY.
	g.setLeader(2)
	res, err = p.Send(ctx, &Message{Topic: "T", QueueID: 1, Body: []byte("b")})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.QueueOffset)
	require.Len(t, g.nodes[1].requests(remoting.SendMessageV2), 2)
	require.Len(t, g.nodes[2].requests(remoting.SendMessageV2), 1)
	require.Equal(t, g.nodes[2].addr, c.leaderAddr())
	keys := append(uniqKeys(t, g.nodes[1].requests(remoting.SendMessageV2))[1:], uniqKeys(t, g.nodes[2].requests(remoting.SendMessageV2))...)
	require.Equal(t, []string{res.MsgID, res.MsgID}, keys)

	// Route change without hints: node 2 stops naming the leader, so the
	// client must refresh the route, which now names node 0.
	g.setLeader(0)
	g.nodes[2].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code == remoting.SendMessageV2 {
			return remoting.NewResponse(req, remoting.ServiceNotAvailable, "not ready"), true
		}
		return nil, false
	})
	res, err = p.Send(ctx, &Message{Topic: "T", QueueID: 1, Body: []byte("c")})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.QueueOffset)
	require.Len(t, g.nodes[0].requests(remoting.SendMessageV2), 1)
	require.Equal(t, g.nodes[0].addr, c.leaderAddr())
}

func TestSendDuringElectionWaitsForLeader(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.addTopic("T", 1)
	g.setLeader(-1)
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{MaxRetries: 20, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	go func() {
		time.Sleep(50 * time.Millisecond)
		g.setLeader(1)
	}()
	res, err := p.Send(testCtx(t), &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, int64(0), res.QueueOffset)
	require.False(t, res.Duplicate)
	n, err := c.MaxOffset(testCtx(t), "T", 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "stored once")
}

func TestRetryKeepsUniqKeyAndReportsDuplicate(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{Backoff: time.Millisecond})
	var calls atomic.Int32
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code != remoting.SendMessageV2 || calls.Add(1) > 1 {
			return nil, false
		}
		// Stored, but the commit was not seen in time.
		if resp := n.g.serve(n, req); resp.Code != remoting.Success {
			t.Errorf("store: %d %s", resp.Code, resp.Remark)
		}
		return remoting.NewResponse(req, remoting.SystemError, "indeterminate: not committed within 3s"), true
	})
	res, err := p.Send(testCtx(t), &Message{Topic: "T", Body: []byte("x"), Tags: "TagA", Keys: []string{"k1", "k2"}})
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	require.Equal(t, int64(0), res.QueueOffset)
	require.Regexp(t, uniqKeyRE, res.MsgID)

	reqs := g.nodes[0].requests(remoting.SendMessageV2)
	require.Len(t, reqs, 2)
	require.Equal(t, []string{res.MsgID, res.MsgID}, uniqKeys(t, reqs))
	h, err := remoting.DecodeSendMessageRequestHeader(reqs[0].Code, reqs[0].ExtFields)
	require.NoError(t, err)
	props, err := message.DecodeProperties(h.Properties)
	require.NoError(t, err)
	require.Equal(t, "TagA", props[message.PropertyTags])
	require.Equal(t, "k1 k2", props[message.PropertyKeys])
	require.Equal(t, "GO", reqs[0].Language)
	require.Equal(t, remoting.Version, reqs[0].Version)
	require.Equal(t, remoting.SerializeRocketMQ, reqs[0].Serialize, "binary headers, as the Java client")
	require.Equal(t, "TBW102", reqs[0].ExtFields["c"], "V2 short names")
	require.Equal(t, DefaultProducerGroup, h.ProducerGroup)

	// A caller-set UNIQ_KEY is kept.
	res, err = p.Send(testCtx(t), &Message{Topic: "T", Body: []byte("y"), Properties: map[string]string{message.PropertyUniqKey: "MY-KEY"}})
	require.NoError(t, err)
	require.Equal(t, "MY-KEY", res.MsgID)
	require.False(t, res.Duplicate)
}

func TestIndeterminateTimeoutAfterRetries(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	c := newTestClient(t, g, 100*time.Millisecond)
	p := c.NewProducer(ProducerOptions{MaxRetries: 2, Backoff: time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code != remoting.SendMessageV2 {
			return nil, false
		}
		<-release // never answered within the timeout
		return nil, true
	})
	res, err := p.Send(testCtx(t), &Message{Topic: "T", Body: []byte("x")})
	require.Error(t, err)
	require.ErrorIs(t, err, ErrIndeterminate)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Regexp(t, uniqKeyRE, res.MsgID, "the result names the key even on error")
	reqs := g.nodes[0].requests(remoting.SendMessageV2)
	require.Len(t, reqs, 3)
	require.Equal(t, []string{res.MsgID, res.MsgID, res.MsgID}, uniqKeys(t, reqs))

	// Async: the same outcome through the callback.
	done := make(chan error, 1)
	require.NoError(t, p.SendAsync(testCtx(t), &Message{Topic: "T", Body: []byte("y")}, func(_ SendResult, err error) { done <- err }))
	err = <-done
	require.ErrorIs(t, err, ErrIndeterminate)
	require.ErrorIs(t, err, remoting.ErrTimeout)
}

func TestIndeterminateStaysAfterDefiniteRetry(t *testing.T) {
	// First attempt: SYSTEM_ERROR (may be stored). Later attempts:
	// SERVICE_NOT_AVAILABLE without a leader (definitely not stored). The
	// first may still commit, so the send is indeterminate.
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{MaxRetries: 2, Backoff: time.Millisecond})
	var calls atomic.Int32
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code != remoting.SendMessageV2 {
			return nil, false
		}
		if calls.Add(1) == 1 {
			return remoting.NewResponse(req, remoting.SystemError, "indeterminate: lost"), true
		}
		return remoting.NewResponse(req, remoting.ServiceNotAvailable, "no raft leader elected; retry"), true
	})
	_, err := p.Send(testCtx(t), &Message{Topic: "T", Body: []byte("x")})
	require.ErrorIs(t, err, ErrIndeterminate)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, remoting.ServiceNotAvailable, e.Code)
	require.Equal(t, int32(3), calls.Load())
}

func TestDefiniteErrorsNotRetried(t *testing.T) {
	for _, code := range []int32{remoting.MessageIllegal, remoting.InvalidParameter} {
		g := newFakeGroup(t, 1)
		g.addTopic("T", 1)
		c := newTestClient(t, g, time.Second)
		p := c.NewProducer(ProducerOptions{Backoff: time.Millisecond})
		g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
			if req.Code == remoting.SendMessageV2 {
				return remoting.NewResponse(req, code, "no"), true
			}
			return nil, false
		})
		_, err := p.Send(testCtx(t), &Message{Topic: "T", Body: []byte("x")})
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, code, e.Code)
		require.False(t, e.Retryable())
		require.NotErrorIs(t, err, ErrIndeterminate)
		require.Len(t, g.nodes[0].requests(remoting.SendMessageV2), 1)
	}

	// Retryable but definite answers, exhausted: not indeterminate.
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	g.setLeader(-1)
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{MaxRetries: 2, Backoff: time.Millisecond})
	_, err := p.Send(testCtx(t), &Message{Topic: "T", Body: []byte("x")})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, remoting.ServiceNotAvailable, e.Code)
	require.NotErrorIs(t, err, ErrIndeterminate)
	require.Len(t, g.nodes[0].requests(remoting.SendMessageV2), 3)

	// Invalid messages fail before anything is sent.
	for _, m := range []*Message{
		{Topic: "bad topic", Body: []byte("x")},
		{Topic: "T", Body: make([]byte, message.MaxBodySize+1)},
		{Topic: "T", Properties: map[string]string{"a\x01": "b"}},
		{Topic: "T", Keys: []string{"has space"}},
		{Topic: "T", QueueID: -2},
	} {
		_, err := p.Send(testCtx(t), m)
		require.Error(t, err)
	}
	require.Len(t, g.nodes[0].requests(remoting.SendMessageV2), 3)
}

func TestTopicNotExistEndsAfterRouteRefresh(t *testing.T) {
	g := newFakeGroup(t, 1)
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{MaxRetries: 5, Backoff: time.Millisecond})
	_, err := p.Send(testCtx(t), &Message{Topic: "Missing", QueueID: AnyQueue, Body: []byte("x")})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, remoting.TopicNotExist, e.Code)
	require.NotErrorIs(t, err, ErrIndeterminate)
	reqs := g.nodes[0].requests(remoting.SendMessageV2)
	require.Len(t, reqs, 1, "sent once (the broker might auto-create), then the route confirmed the topic is missing")
	require.Equal(t, "-1", reqs[0].ExtFields["e"], "without a route the broker picks the queue")

	// A topic the route lists but the answering node does not know yet is
	// retried.
	g.addTopic("Young", 1)
	var calls atomic.Int32
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code == remoting.SendMessageV2 && calls.Add(1) == 1 {
			return remoting.NewResponse(req, remoting.TopicNotExist, "not yet"), true
		}
		return nil, false
	})
	_, err = p.Send(testCtx(t), &Message{Topic: "Young", Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, int32(2), calls.Load())
}

func TestSendAsyncWindowBoundsInFlight(t *testing.T) {
	const window, total = 4, 20
	g := newFakeGroup(t, 1)
	g.addTopic("T", 2)
	c := newTestClient(t, g, 5*time.Second)
	p := c.NewProducer(ProducerOptions{Window: window})
	ctx := testCtx(t)
	_, err := c.Route(ctx, "T", false) // so that the first SendAsync does not wait for it
	require.NoError(t, err)

	var (
		mu       sync.Mutex
		held     int
		maxHeld  int
		gate     = make(chan struct{})
		received = make(chan struct{}, total)
	)
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code != remoting.SendMessageV2 {
			return nil, false
		}
		mu.Lock()
		held++
		maxHeld = max(maxHeld, held)
		mu.Unlock()
		received <- struct{}{}
		<-gate
		mu.Lock()
		held--
		mu.Unlock()
		return nil, false
	})

	var (
		cbs     atomic.Int32
		results sync.Map
		started atomic.Int32
	)
	sendAll := make(chan error, 1)
	go func() {
		for i := range total {
			m := &Message{Topic: "T", QueueID: AnyQueue, Body: []byte{byte(i)}}
			err := p.SendAsync(ctx, m, func(r SendResult, err error) {
				if err != nil {
					t.Errorf("send %d: %v", i, err)
				}
				if _, dup := results.LoadOrStore(r.MsgID, r); dup {
					t.Errorf("callback twice for %s", r.MsgID)
				}
				cbs.Add(1)
			})
			if err != nil {
				sendAll <- err
				return
			}
			started.Add(1)
		}
		sendAll <- nil
	}()
	for range window {
		<-received
	}
	time.Sleep(50 * time.Millisecond) // the sender would have gone further if it could
	require.Equal(t, int32(window), started.Load(), "SendAsync blocks while the window is full")
	mu.Lock()
	require.Equal(t, window, held)
	mu.Unlock()

	close(gate)
	require.NoError(t, <-sendAll)
	require.NoError(t, p.Flush(ctx))
	require.Equal(t, int32(total), cbs.Load())
	require.LessOrEqual(t, maxHeld, window)

	// Round robin over both queues, offsets dense per queue.
	perQueue := map[int32][]int64{}
	results.Range(func(_, v any) bool {
		r := v.(SendResult)
		perQueue[r.QueueID] = append(perQueue[r.QueueID], r.QueueOffset)
		return true
	})
	require.Len(t, perQueue, 2)
	require.Len(t, perQueue[0], total/2)
	require.Len(t, perQueue[1], total/2)

	// Flush with nothing in flight returns at once; a Flush bounded by a
	// context returns its error if sends stay in flight.
	require.NoError(t, p.Flush(ctx))
}

func TestFlushHonoursContext(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	c := newTestClient(t, g, 5*time.Second)
	p := c.NewProducer(ProducerOptions{Window: 2})
	gate := make(chan struct{})
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code == remoting.SendMessageV2 {
			<-gate
		}
		return nil, false
	})
	done := make(chan error, 1)
	require.NoError(t, p.SendAsync(testCtx(t), &Message{Topic: "T", Body: []byte("x")}, func(_ SendResult, err error) { done <- err }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.Flush(ctx), context.DeadlineExceeded)
	close(gate)
	require.NoError(t, <-done)
	require.NoError(t, p.Flush(testCtx(t)))
}

func TestSendBatchRoundTrip(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.addTopic("T", 2)
	g.setLeader(1)
	c := newTestClient(t, g, time.Second, 0)
	p := c.NewProducer(ProducerOptions{})
	ctx := testCtx(t)

	ms := []*Message{
		{Topic: "T", QueueID: 1, Body: []byte("one"), Tags: "A", Flag: 7},
		{Topic: "T", QueueID: 1, Body: []byte("two"), Keys: []string{"k"}, Properties: map[string]string{"p": "v"}},
		{Topic: "T", QueueID: 1, Body: []byte("three"), Properties: map[string]string{message.PropertyUniqKey: "OWN"}},
	}
	res, err := p.SendBatch(ctx, ms)
	require.NoError(t, err)
	require.Len(t, res, 3)
	for i, r := range res {
		require.Equal(t, int32(1), r.QueueID)
		require.Equal(t, int64(i), r.QueueOffset)
		require.NotEmpty(t, r.OffsetMsgID)
	}
	require.Equal(t, "OWN", res[2].MsgID)
	require.NotEqual(t, res[0].MsgID, res[1].MsgID)

	reqs := g.nodes[1].requests(remoting.SendBatchMessage)
	require.Len(t, reqs, 1)
	require.Equal(t, "T", reqs[0].ExtFields["b"], "V2 short names")
	require.Equal(t, "true", reqs[0].ExtFields["m"])
	ents, err := remoting.DecodeBatch(reqs[0].Body)
	require.NoError(t, err)
	require.Len(t, ents, 3)
	for i, e := range ents {
		require.Equal(t, ms[i].Body, e.Body)
		require.Equal(t, res[i].MsgID, e.Properties[message.PropertyUniqKey])
	}
	require.Equal(t, int32(7), ents[0].Flag)
	require.Equal(t, "A", ents[0].Properties[message.PropertyTags])
	require.Equal(t, "k", ents[1].Properties[message.PropertyKeys])
	require.Equal(t, "v", ents[1].Properties["p"])

	// Read them back.
	pr, err := c.NewPullConsumer("G").Pull(ctx, "T", 1, 0, 10, 0)
	require.NoError(t, err)
	require.Equal(t, Found, pr.Status)
	require.Len(t, pr.Messages, 3)
	for i, m := range pr.Messages {
		require.Equal(t, ms[i].Body, m.Body)
		require.Equal(t, res[i].MsgID, m.MsgID)
		require.Equal(t, res[i].OffsetMsgID, m.OffsetMsgID)
		require.Equal(t, int64(i), m.QueueOffset)
	}
	require.Equal(t, "A", pr.Messages[0].Tags)
	require.Equal(t, []string{"k"}, pr.Messages[1].Keys)
	require.Equal(t, int64(3), pr.NextBeginOffset)
}

func TestSendBatchLimits(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 2)
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{})
	ctx := testCtx(t)

	// Just under the limit goes; just over does not.
	half := message.MaxBodySize / 2
	over := []*Message{
		{Topic: "T", Body: make([]byte, half)},
		{Topic: "T", Body: make([]byte, half)},
	}
	_, err := p.SendBatch(ctx, over)
	require.ErrorIs(t, err, message.ErrMessageTooLarge)
	require.Empty(t, g.nodes[0].requests(remoting.SendBatchMessage), "nothing sent")

	under := []*Message{
		{Topic: "T", Body: make([]byte, half-200)},
		{Topic: "T", Body: bytes.Repeat([]byte{1}, half-200)},
	}
	res, err := p.SendBatch(ctx, under)
	require.NoError(t, err)
	require.Len(t, res, 2)

	// One topic, one queue.
	_, err = p.SendBatch(ctx, []*Message{{Topic: "T"}, {Topic: "T", QueueID: 1}})
	require.Error(t, err)
	_, err = p.SendBatch(ctx, []*Message{{Topic: "T"}, {Topic: "U"}})
	require.Error(t, err)
	_, err = p.SendBatch(ctx, nil)
	require.Error(t, err)
	require.Len(t, g.nodes[0].requests(remoting.SendBatchMessage), 1)
}

func TestClientClose(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{})
	_, err := p.Send(testCtx(t), &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = p.Send(testCtx(t), &Message{Topic: "T", Body: []byte("x")})
	require.ErrorIs(t, err, ErrClosed)
	require.NotErrorIs(t, err, ErrIndeterminate)
	_, err = c.Route(testCtx(t), "T", true)
	require.ErrorIs(t, err, ErrClosed)
}

func TestRedialAfterConnectionLoss(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{Backoff: time.Millisecond})
	ctx := testCtx(t)
	var drop atomic.Bool
	drop.Store(true)
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code == remoting.SendMessageV2 && drop.CompareAndSwap(true, false) {
			n.g.serve(n, req) // stored, then the connection dies
			conns := connsOf(t, c)
			for _, cn := range conns {
				_ = cn.Close()
			}
			return nil, true
		}
		return nil, false
	})
	res, err := p.Send(ctx, &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err)
	require.True(t, res.Duplicate, "the retry after the lost answer found the stored copy")
	require.Len(t, g.nodes[0].requests(remoting.SendMessageV2), 2)
}

// connsOf returns the client's pooled connections.
func connsOf(t *testing.T, c *Client) []interface{ Close() error } {
	t.Helper()
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	var out []interface{ Close() error }
	for _, e := range c.pool.mu.conns {
		if e.conn != nil {
			out = append(out, e.conn)
		}
	}
	return out
}

func TestErrorClassification(t *testing.T) {
	e := &Error{Code: remoting.SystemError, Remark: "indeterminate: x"}
	require.True(t, e.Indeterminate())
	require.True(t, e.Retryable())
	require.ErrorIs(t, e, ErrIndeterminate)
	e = &Error{Code: remoting.ServiceNotAvailable, Remark: "not the leader; leader is node 2 at 10.0.0.2:10911"}
	require.False(t, e.Indeterminate())
	require.True(t, e.Retryable())
	hint, ok := e.LeaderHint()
	require.True(t, ok)
	require.Equal(t, "10.0.0.2:10911", hint)
	for remark, want := range map[string]string{
		"not the leader; leader is node 3 at 127.0.0.1:9 (unreachable: dial tcp: refused)": "127.0.0.1:9",
		"leader is [::1]:10911.":          "[::1]:10911",
		"no raft leader elected; retry":   "",
		"disk full":                       "",
		"leader: host:notaport elsewhere": "",
	} {
		got, ok := leaderHint(remark)
		require.Equal(t, want != "", ok, remark)
		require.Equal(t, want, got, remark)
	}
	require.False(t, (&Error{Code: remoting.MessageIllegal}).Retryable())
	require.False(t, errors.Is(&Error{Code: remoting.ServiceNotAvailable}, ErrIndeterminate))
}

func TestBackoffAndIDs(t *testing.T) {
	g, err := newIDGenerator()
	require.NoError(t, err)
	for n := 1; n < 10; n++ {
		d := backoff(n, 20*time.Millisecond, time.Second, g.jitter)
		want := min(20*time.Millisecond<<(n-1), time.Second)
		require.GreaterOrEqual(t, d, want/2)
		require.LessOrEqual(t, d, want)
	}
	seen := map[string]bool{}
	for range 10000 {
		id := g.next()
		require.Regexp(t, uniqKeyRE, id)
		require.False(t, seen[id])
		seen[id] = true
	}
	g2, err := newIDGenerator()
	require.NoError(t, err)
	require.NotEqual(t, g.next()[:16], g2.next()[:16], "clients draw different prefixes")
}

func TestSendAsyncFollowsLeaderAndRetries(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.addTopic("T", 1)
	g.setLeader(0)
	c := newTestClient(t, g, time.Second, 0)
	p := c.NewProducer(ProducerOptions{Backoff: time.Millisecond, Window: 8})
	ctx := testCtx(t)
	_, err := p.Send(ctx, &Message{Topic: "T", Body: []byte("warm")})
	require.NoError(t, err)

	// Leadership moves; the new leader's first answer is SYSTEM_ERROR
	// after storing.
	g.setLeader(2)
	var calls atomic.Int32
	g.nodes[2].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code != remoting.SendMessageV2 || calls.Add(1) > 1 {
			return nil, false
		}
		n.g.serve(n, req)
		return remoting.NewResponse(req, remoting.SystemError, "indeterminate: slow"), true
	})
	const n = 10
	type outcome struct {
		r   SendResult
		err error
	}
	out := make(chan outcome, n)
	for i := range n {
		require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", Body: []byte{byte(i)}}, func(r SendResult, err error) {
			out <- outcome{r, err}
		}))
	}
	require.NoError(t, p.Flush(ctx))
	offsets := map[int64]bool{}
	dups := 0
	for range n {
		o := <-out
		require.NoError(t, o.err)
		require.False(t, offsets[o.r.QueueOffset], "distinct offsets")
		offsets[o.r.QueueOffset] = true
		if o.r.Duplicate {
			dups++
		}
	}
	require.Equal(t, 1, dups, "the retried send found its stored copy")
	maxOff, err := c.MaxOffset(ctx, "T", 0)
	require.NoError(t, err)
	require.Equal(t, int64(n+1), maxOff, "every message stored once")
	require.Equal(t, g.nodes[2].addr, c.leaderAddr())
}

func TestSendAsyncContext(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	g.setLeader(-1) // every attempt answered SERVICE_NOT_AVAILABLE
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{MaxRetries: 1000, Backoff: 5 * time.Millisecond, MaxBackoff: 5 * time.Millisecond, Window: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", Body: []byte("x")}, func(_ SendResult, err error) { done <- err }))
	// The window (1) is full: a second SendAsync waits until its context
	// ends.
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, p.SendAsync(short, &Message{Topic: "T", Body: []byte("y")}, func(SendResult, error) {
		t.Error("callback of a SendAsync that returned an error")
	}), context.DeadlineExceeded)
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	if !errors.Is(err, ErrIndeterminate) { // unless the deadline cut an attempt in flight
		var e *Error
		require.ErrorAs(t, err, &e, "the last answer is kept")
		require.Equal(t, remoting.ServiceNotAvailable, e.Code)
	}

	// Sync Send honours its context too.
	ctx3, cancel3 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel3()
	_, err = p.Send(ctx3, &Message{Topic: "T", Body: []byte("z")})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
