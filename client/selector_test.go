package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// TestHashSelectorStable: the queue depends only on the key and the queue
// count (golden values: FNV-1a 32 mod 8), and keys spread over the queues.
func TestHashSelectorStable(t *testing.T) {
	sel := HashSelector{}
	for key, want := range map[string]int32{"order-42": 4, "order-43": 7, "": 5} {
		m := &Message{Topic: "T", Keys: []string{key}}
		if key == "" {
			m.Keys = nil
		}
		require.Equal(t, want, sel.Select(m, 8), "key %q", key)
		require.Equal(t, want, HashSelector{}.Select(m, 8), "another selector, same answer")
	}
	// The sharding key property wins over the keys.
	m := &Message{Keys: []string{"x"}, Properties: map[string]string{message.PropertyShardingKey: "order-42"}}
	require.Equal(t, int32(4), sel.Select(m, 8))
	// A custom key function.
	byTag := HashSelector{Key: func(m *Message) string { return m.Tags }}
	require.Equal(t, int32(4), byTag.Select(&Message{Tags: "order-42"}, 8))

	hit := map[int32]bool{}
	for i := range 200 {
		hit[sel.Select(&Message{Keys: []string{fmt.Sprint("k", i)}}, 8)] = true
	}
	require.Len(t, hit, 8)
}

func TestRoundRobinSelector(t *testing.T) {
	var s RoundRobinSelector
	var got []int32
	for range 5 {
		got = append(got, s.Select(nil, 3))
	}
	require.Equal(t, []int32{0, 1, 2, 0, 1}, got)
}

// sentQueues returns the queue ids of the send requests node n received.
func sentQueues(t *testing.T, n *fakeNode) []int32 {
	t.Helper()
	var out []int32
	for _, r := range n.requests(remoting.SendMessageV2) {
		h, err := remoting.DecodeSendMessageRequestHeader(r.Code, r.ExtFields)
		require.NoError(t, err)
		out = append(out, h.QueueID)
	}
	return out
}

func TestSendSelectAndOneway(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 4)
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{})
	ctx := testCtx(t)

	key := HashSelector{}.Select(&Message{Keys: []string{"order-7"}}, 4)
	for i := range 3 {
		r, err := p.SendSelect(ctx, &Message{Topic: "T", Body: []byte{byte(i)}, Keys: []string{"order-7"}}, HashSelector{})
		require.NoError(t, err)
		require.Equal(t, key, r.QueueID)
	}
	rr := &RoundRobinSelector{}
	for range 4 {
		_, err := p.SendSelect(ctx, NewMessage("T", []byte("rr")), rr)
		require.NoError(t, err)
	}
	require.Equal(t, []int32{key, key, key, 0, 1, 2, 3}, sentQueues(t, g.nodes[0]))

	require.NoError(t, p.SendOneway(ctx, &Message{Topic: "T", QueueID: 2, Body: []byte("fire and forget")}))
	require.Eventually(t, func() bool { return len(sentQueues(t, g.nodes[0])) == 8 }, 5*time.Second, 5*time.Millisecond)
	last := g.nodes[0].requests(remoting.SendMessageV2)[7]
	require.True(t, last.IsOneway(), "sent with the one-way flag")
	r, err := c.NewPullConsumer("G").Pull(ctx, "T", 2, 0, 32, 0)
	require.NoError(t, err)
	require.Equal(t, "fire and forget", string(r.Messages[len(r.Messages)-1].Body))
}
