package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// TestSimpleConsumerLearnsLeader: a SimpleConsumer whose client knows the
// nodes but not the leader learns it from the topic's route, so that its
// receives go to the leader rather than through followers, which would
// forward them (a hop more each way).
func TestSimpleConsumerLearnsLeader(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.setLeader(2)
	g.addTopic("T", 4)
	// The followers forward a pop, as raftmq's do: answered here as if
	// the leader had, so the client has no hint of the leader.
	empty := func(_ *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code != remoting.PopMessage {
			return nil, false
		}
		return remoting.NewResponse(req, remoting.PollingTimeout, "NO_NEW_MSG"), true
	}
	for _, n := range g.nodes {
		n.setHook(empty)
	}
	c := newTestClient(t, g, 2*time.Second)
	sc := c.NewSimpleConsumer("g", "T", SimpleConsumerOptions{Await: -1})
	ctx := context.Background()
	require.NoError(t, sc.Start(ctx))
	for range 6 {
		msgs, err := sc.Receive(ctx, 32, time.Minute)
		require.NoError(t, err)
		require.Empty(t, msgs)
	}
	require.Len(t, g.nodes[2].requests(remoting.PopMessage), 6, "every receive went to the leader")
	require.Empty(t, g.nodes[0].requests(remoting.PopMessage))
	require.Empty(t, g.nodes[1].requests(remoting.PopMessage))
}

// TestSimpleConsumerFollowsLeaderChange: after a leader change, the old
// leader forwards a receive and its answer names the new leader
// (FieldLeader), as raftmq's followers do; the receives after it go to
// the new leader at once, not after the route's lifetime.
func TestSimpleConsumerFollowsLeaderChange(t *testing.T) {
	g := newFakeGroup(t, 3)
	g.setLeader(2)
	g.addTopic("T", 4)
	var forwardTo atomic.Pointer[string]
	hook := func(_ *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		if req.Code != remoting.PopMessage {
			return nil, false
		}
		resp := remoting.NewResponse(req, remoting.PollingTimeout, "NO_NEW_MSG")
		if l := forwardTo.Load(); l != nil {
			resp.ExtFields = map[string]string{remoting.FieldLeader: *l}
		}
		return resp, true
	}
	for _, n := range g.nodes {
		n.setHook(hook)
	}
	c := newTestClient(t, g, 2*time.Second)
	sc := c.NewSimpleConsumer("g", "T", SimpleConsumerOptions{Await: -1})
	ctx := context.Background()
	require.NoError(t, sc.Start(ctx))
	_, err := sc.Receive(ctx, 32, time.Minute)
	require.NoError(t, err)
	require.Len(t, g.nodes[2].requests(remoting.PopMessage), 1)

	g.setLeader(0)
	newLeader := g.nodes[0].addr
	forwardTo.Store(&newLeader) // node 2 now forwards, naming node 0
	for range 4 {
		_, err := sc.Receive(ctx, 32, time.Minute)
		require.NoError(t, err)
	}
	require.Len(t, g.nodes[2].requests(remoting.PopMessage), 2, "one forwarded receive on the old leader")
	require.Len(t, g.nodes[0].requests(remoting.PopMessage), 3, "the rest on the new leader")
	require.Empty(t, g.nodes[1].requests(remoting.PopMessage))
}
