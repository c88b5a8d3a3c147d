package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
)

// A checkpoint that wrote the tails of more than checkpointQueues consume
// queues pushes the next one back in proportion, up to maxPersistStretch
// intervals; one that wrote fewer keeps the configured interval.
func TestCheckpointIntervalFollowsWrittenQueues(t *testing.T) {
	for _, c := range []struct {
		written int
		want    time.Duration
	}{
		{0, time.Second}, {1, time.Second}, {checkpointQueues - 1, time.Second}, {checkpointQueues, time.Second},
		{2*checkpointQueues - 1, time.Second}, {2 * checkpointQueues, 2 * time.Second}, {4 * checkpointQueues, 4 * time.Second},
		{100 * checkpointQueues, maxPersistStretch * time.Second},
	} {
		require.Equal(t, c.want, checkpointInterval(time.Second, c.written), "written %d", c.written)
	}

	// And the store uses it: a checkpoint over 2×checkpointQueues written
	// queues doubles the time to the next, one over a single queue
	// restores it.
	cfg := testConfig(t, vfs.NewMem())
	cfg.PersistInterval = time.Hour // checkpoints only when the test says
	cfg.CQUnitsPerFile = 1000
	cfg.SegmentSize = 4 << 20
	sa := openSA(t, cfg)
	defer sa.Close()
	const topics, queues = 2 * checkpointQueues / 8, 8
	for i := range topics {
		createTopic(t, sa, topicName(i), queues)
	}
	var batch []*messageArg
	for i := range topics {
		for q := range queues {
			batch = append(batch, &messageArg{topicName(i), int32(q)})
		}
	}
	putQueues(t, sa, batch)
	require.NoError(t, sa.Persist())
	require.Equal(t, 2*time.Hour, time.Duration(sa.persistEvery.Load()))
	putQueues(t, sa, batch[:1])
	require.NoError(t, sa.Persist())
	require.Equal(t, time.Hour, time.Duration(sa.persistEvery.Load()))
}

type messageArg struct {
	topic string
	queue int32
}

func topicName(i int) string {
	return "t" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
}

func putQueues(t *testing.T, sa *Standalone, args []*messageArg) {
	t.Helper()
	for len(args) > 0 {
		n := min(len(args), 128)
		msgs := make([]*message.Message, n)
		for i, a := range args[:n] {
			msgs[i] = msg(a.topic, a.queue, i, "", "")
		}
		rs, err := sa.Put(msgs...)
		require.NoError(t, err)
		for _, r := range rs {
			require.NoError(t, r.Err)
		}
		args = args[n:]
	}
}
