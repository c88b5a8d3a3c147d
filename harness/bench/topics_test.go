package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBenchTopicNamesAndLayout(t *testing.T) {
	require.Equal(t, []string{"bench"}, TopicNames("bench", 0))
	require.Equal(t, []string{"bench"}, TopicNames("bench", 1))
	require.Equal(t, []string{"t-0", "t-1", "t-2"}, TopicNames("t", 3))
	require.Equal(t, "1 topic x 4 queues", layout(1, 4))
	require.Equal(t, "1 topic x 1 queue", layout(1, 1))
	require.Equal(t, "128 topics x 8 queues = 1024 queues", layout(128, 1024))
	require.Equal(t, "2 topics, 5 queues in all", layout(2, 5))
}

// The rotation gives every queue of every topic the same share, and
// consecutive sends go to different topics.
func TestBenchSlotRotation(t *testing.T) {
	const topics, queues = 3, 2
	seen := map[[2]int]int{}
	for round := range 5 {
		for slot := range topics * queues {
			tp, q := slotOf(slot, topics)
			require.Less(t, tp, topics)
			require.Less(t, int(q), queues)
			seen[[2]int{tp, int(q)}]++
			if slot > 0 {
				prev, _ := slotOf(slot-1, topics)
				require.NotEqual(t, prev, tp, "round %d slot %d", round, slot)
			}
		}
	}
	require.Len(t, seen, topics*queues)
	for k, n := range seen {
		require.Equal(t, 5, n, "%v", k)
	}
}

// A produce run over 3 topics of 2 queues each spreads its sends evenly
// over all 6 queues (checked against what the brokers stored), reports
// its layout, and consume runs over the same topics read every message.
func TestBenchProduceConsumeTopics(t *testing.T) {
	newClient, c, ctx := groupClient(t)
	// The group's first leader may take a moment.
	require.Eventually(t, func() bool { return c.CreateTopic(ctx, "warm-up", 1) == nil }, 10*time.Second, 20*time.Millisecond)

	var progress strings.Builder
	r, err := Produce(ctx, c, ProduceConfig{Topic: "multi", Topics: 3, Queues: 2, Size: 100, Window: 64, Producers: 1,
		Duration: 500 * time.Millisecond, Progress: &progress})
	require.NoError(t, err)
	require.Zero(t, r.Errors, r.FirstErr)
	require.Equal(t, 3, r.Topics)
	require.Equal(t, 6, r.Queues)
	require.Contains(t, r.String(), "produce pipelined, window 64 x 1 producers, 3 topics x 2 queues = 6 queues: ")
	require.Contains(t, progress.String(), "created 3 topics of 2 queues in ")
	require.Positive(t, r.CreateSeconds)
	t.Logf("%s", r)

	// What the brokers stored: every queue got its share, one producer
	// rotating over them leaves at most one message of difference, and
	// the queues add up to the acknowledged messages.
	var total, lo, hi int64 = 0, 1 << 62, 0
	for _, topic := range TopicNames("multi", 3) {
		for q := range int32(2) {
			n, err := c.MaxOffset(ctx, topic, q)
			require.NoError(t, err)
			require.Positive(t, n, "%s queue %d got nothing", topic, q)
			total += n
			lo, hi = min(lo, n), max(hi, n)
		}
	}
	require.Equal(t, r.Messages, total)
	require.LessOrEqual(t, hi-lo, int64(1), "uneven spread: %d to %d messages per queue", lo, hi)
	require.Equal(t, lo, r.QueueMin)
	require.Equal(t, hi, r.QueueMax)

	cr, err := Consume(ctx, c, ConsumeConfig{Topic: "multi", Topics: 3, Queues: 2})
	require.NoError(t, err)
	require.Equal(t, total, cr.Messages)
	require.Zero(t, cr.Duplicates)
	require.Equal(t, "consume, 3 topics x 2 queues = 6 queues", cr.Mode)

	cr, err = Consume(ctx, c, ConsumeConfig{Topic: "multi", Topics: 3, Push: true, Consumers: 2, NewClient: newClient, Stall: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, total, cr.Messages)
	require.Equal(t, 6, cr.Queues)
	require.Zero(t, cr.Errors, cr.FirstErr)

	_, err = Consume(ctx, c, ConsumeConfig{Topic: "multi", Topics: 3, Queues: 4})
	require.ErrorContains(t, err, fmt.Sprintf("has %d read queues, not %d", 2, 4))

	// A run of a given number of messages, in batches (the last one
	// shorter), from two producers: exactly that many, spread evenly.
	r, err = Produce(ctx, c, ProduceConfig{Topic: "fill", Topics: 2, Queues: 2, Size: 10, Window: 4, Batch: 3, Producers: 2,
		Messages: 100, Duration: 30 * time.Second})
	require.NoError(t, err)
	require.Zero(t, r.Errors, r.FirstErr)
	require.Equal(t, int64(100), r.Messages)
	total = 0
	for _, topic := range TopicNames("fill", 2) {
		for q := range int32(2) {
			n, err := c.MaxOffset(ctx, topic, q)
			require.NoError(t, err)
			require.InDelta(t, 25, n, 6, "%s queue %d", topic, q)
			total += n
		}
	}
	require.Equal(t, int64(100), total)
}
