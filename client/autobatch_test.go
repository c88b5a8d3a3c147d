package client

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/stretchr/testify/require"
)

// asyncResults collects SendAsync callbacks.
type asyncResults struct {
	mu   sync.Mutex
	res  []SendResult
	errs []error
}

func (a *asyncResults) cb(r SendResult, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.res = append(a.res, r)
	a.errs = append(a.errs, err)
}

// gateSends holds every send request at node 0 until gate is closed, and
// signals each arrival on arrived.
func gateSends(g *fakeGroup) (gate chan struct{}, arrived chan int32) {
	gate, arrived = make(chan struct{}), make(chan int32, 100)
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		switch req.Code {
		case remoting.SendMessageV2, remoting.SendBatchMessage:
			arrived <- req.Code
			<-gate
		}
		return nil, false
	})
	return gate, arrived
}

func TestAutoBatchPacksWaitingSends(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 2)
	c := newTestClient(t, g, 5*time.Second)
	p := c.NewProducer(ProducerOptions{AutoBatch: true, AutoBatchRequests: 1})
	ctx := testCtx(t)
	gate, arrived := gateSends(g)
	var got asyncResults

	// A lone send goes out at once, as a plain send.
	require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", QueueID: 0, Body: []byte("first")}, got.cb))
	require.Equal(t, remoting.SendMessageV2, <-arrived)

	// Sends made while it is in flight wait, packed per queue; queue 1,
	// with its own request slot free, takes its first message at once.
	var sent []*Message
	for i := range 10 {
		m := &Message{Topic: "T", QueueID: int32(i % 2), Body: []byte{byte('a' + i)}, Tags: "tag", Keys: []string{"k"},
			Flag: int32(i), Properties: map[string]string{"p": "v"}}
		if i == 3 {
			m.Properties[message.PropertyUniqKey] = "OWN-KEY"
		}
		sent = append(sent, m)
		require.NoError(t, p.SendAsync(ctx, m, got.cb))
	}
	require.Equal(t, remoting.SendMessageV2, <-arrived, "queue 1's first send goes out at once")
	select {
	case code := <-arrived:
		close(gate)
		t.Fatalf("request %d sent while each queue's only request slot is taken", code)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	require.NoError(t, p.Flush(ctx))

	batches := g.nodes[0].requests(remoting.SendBatchMessage)
	require.Len(t, batches, 2, "one pack per queue")
	require.Len(t, g.nodes[0].requests(remoting.SendMessageV2), 2)
	var sizes []int
	for _, b := range batches {
		ents, err := remoting.DecodeBatch(b.Body)
		require.NoError(t, err)
		sizes = append(sizes, len(ents))
	}
	slices.Sort(sizes)
	require.Equal(t, []int{4, 5}, sizes, "queue 0 packs its 5 waiting sends, queue 1 the 4 behind its first")

	require.Len(t, got.res, 11)
	ids := map[string]bool{}
	for i, r := range got.res {
		require.NoError(t, got.errs[i])
		require.False(t, ids[r.MsgID], "each message its own UNIQ_KEY")
		ids[r.MsgID] = true
	}
	require.True(t, ids["OWN-KEY"], "a caller's UNIQ_KEY is kept")

	// Every result names the stored message: read each queue back and
	// match UNIQ_KEY, queue offset and broker id.
	pc := c.NewPullConsumer("G")
	byID := map[string]*MessageExt{}
	for q := int32(0); q < 2; q++ {
		pr, err := pc.Pull(ctx, "T", q, 0, 32, 0)
		require.NoError(t, err)
		for _, m := range pr.Messages {
			byID[m.MsgID] = m
		}
	}
	require.Len(t, byID, 11)
	for _, r := range got.res {
		m := byID[r.MsgID]
		require.NotNil(t, m, r.MsgID)
		require.Equal(t, m.QueueID, r.QueueID)
		require.Equal(t, m.QueueOffset, r.QueueOffset)
		require.Equal(t, m.OffsetMsgID, r.OffsetMsgID)
	}
	for _, s := range sent {
		var found *MessageExt
		for _, m := range byID {
			if string(m.Body) == string(s.Body) {
				found = m
			}
		}
		require.NotNil(t, found)
		require.Equal(t, s.QueueID, found.QueueID)
		require.Equal(t, s.Flag, found.Flag)
		require.Equal(t, "tag", found.Tags)
		require.Equal(t, []string{"k"}, found.Keys)
		v, _ := found.Property("p")
		require.Equal(t, "v", v)
	}
}

func TestAutoBatchBoundsAndExclusions(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	g.addTopic("%RETRY%G", 1)
	c := newTestClient(t, g, 5*time.Second)
	body := make([]byte, 1000)
	p := c.NewProducer(ProducerOptions{AutoBatch: true, AutoBatchRequests: 1, AutoBatchBytes: 3 * estimate(&Message{Body: body})})
	ctx := testCtx(t)
	gate, arrived := gateSends(g)
	var got asyncResults

	require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", Body: body}, got.cb))
	<-arrived
	for range 7 {
		require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", Body: body}, got.cb))
	}
	// Another context is another pack; a retry topic is never packed.
	other, cancel := context.WithCancel(ctx)
	defer cancel()
	require.NoError(t, p.SendAsync(other, &Message{Topic: "T", Body: body}, got.cb))
	for range 2 {
		require.NoError(t, p.SendAsync(ctx, &Message{Topic: "%RETRY%G", Body: body}, got.cb))
	}
	// Invalid messages fail at once, holding nothing.
	require.Error(t, p.SendAsync(ctx, &Message{Topic: "bad topic!", Body: body}, got.cb))
	require.Error(t, p.SendAsync(ctx, nil, got.cb))

	close(gate)
	require.NoError(t, p.Flush(ctx))
	var sizes []int
	for _, b := range g.nodes[0].requests(remoting.SendBatchMessage) {
		ents, err := remoting.DecodeBatch(b.Body)
		require.NoError(t, err)
		sizes = append(sizes, len(ents))
	}
	// 7 waiting for ctx at 3 per pack: 3, 3, then 1 alone (a plain
	// send), like the other context's message and the two retry sends.
	require.Equal(t, []int{3, 3}, sizes)
	require.Len(t, g.nodes[0].requests(remoting.SendMessageV2), 1+1+1+2)
	require.Len(t, got.res, 11)
	for _, err := range got.errs {
		require.NoError(t, err)
	}
}

func TestAutoBatchFailureReachesEveryMessage(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	c := newTestClient(t, g, 5*time.Second)
	p := c.NewProducer(ProducerOptions{AutoBatch: true, AutoBatchRequests: 1, Backoff: time.Millisecond})
	ctx := testCtx(t)
	gate := make(chan struct{})
	arrived := make(chan struct{}, 10)
	var batchCalls int
	g.nodes[0].setHook(func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		switch req.Code {
		case remoting.SendMessageV2:
			arrived <- struct{}{}
			<-gate
		case remoting.SendBatchMessage:
			batchCalls++
			if batchCalls == 1 {
				// Stored, but the answer says otherwise: the retry must
				// carry the same UNIQ_KEYs and get the original offsets.
				if resp := n.g.serve(n, req); resp.Code != remoting.Success {
					t.Errorf("store: %d %s", resp.Code, resp.Remark)
				}
				return remoting.NewResponse(req, remoting.SystemError, "indeterminate"), true
			}
			if batchCalls == 3 {
				return remoting.NewResponse(req, remoting.MessageIllegal, "refused"), true
			}
		}
		return nil, false
	})
	var got asyncResults
	require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", Body: []byte("0")}, got.cb))
	<-arrived
	for i := range 4 {
		require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", Body: []byte{byte('1' + i)}}, got.cb))
	}
	close(gate)
	require.NoError(t, p.Flush(ctx))
	require.Len(t, got.res, 5)
	for i, r := range got.res[1:] {
		require.NoError(t, got.errs[1+i])
		require.True(t, r.Duplicate)
		require.Equal(t, int64(1+i), r.QueueOffset, "the original offsets")
	}
	reqs := g.nodes[0].requests(remoting.SendBatchMessage)
	require.Len(t, reqs, 2)
	a, err := remoting.DecodeBatch(reqs[0].Body)
	require.NoError(t, err)
	b, err := remoting.DecodeBatch(reqs[1].Body)
	require.NoError(t, err)
	for i := range a {
		require.Equal(t, a[i].Properties[message.PropertyUniqKey], b[i].Properties[message.PropertyUniqKey])
	}

	// A definite refusal fails every message of the pack.
	got = asyncResults{}
	gate = make(chan struct{})
	require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", Body: []byte("5")}, got.cb))
	<-arrived
	for range 3 {
		require.NoError(t, p.SendAsync(ctx, &Message{Topic: "T", Body: []byte("x")}, got.cb))
	}
	close(gate)
	require.NoError(t, p.Flush(ctx))
	require.Len(t, got.errs, 4)
	require.NoError(t, got.errs[0])
	for _, err := range got.errs[1:] {
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, remoting.MessageIllegal, e.Code)
	}
}
