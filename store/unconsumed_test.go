package store

import (
	"bytes"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// lockedBuffer is a bytes.Buffer for a logger used from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Forced retention that deletes a segment before it expired counts the
// messages a consumer group had not consumed, once each, and logs the
// groups with how many each had not read; a group past the deleted
// messages is not named. Retention of expired segments counts nothing.
func TestForcedRetentionCountsUnconsumed(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	cfg.SegmentSize = 16 << 10
	var logged lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	sa := openSA(t, cfg)
	defer sa.Close()
	createTopic(t, sa, "t", 2)
	createTopic(t, sa, "u", 1)
	for i := 0; i < 200; i++ {
		_, err := sa.Put(msg("t", int32(i%2), i, "", ""))
		require.NoError(t, err)
		_, err = sa.Put(msg("u", 0, i, "", ""))
		require.NoError(t, err)
	}
	// slow is behind in t (offset 5 in queue 0, none in queue 1: that
	// queue does not count for it), slower further behind in t/0 and in u;
	// fast is past the first segment everywhere.
	require.NoError(t, sa.Exec(&Command{Op: OpCommitOffsets, Offsets: []OffsetCommit{
		{Group: "slow", Topic: "t", QueueID: 0, Offset: 5},
		{Group: "slower", Topic: "t", QueueID: 0, Offset: 2},
		{Group: "slower", Topic: "u", QueueID: 0, Offset: 0},
		{Group: "fast", Topic: "t", QueueID: 0, Offset: 100},
		{Group: "fast", Topic: "t", QueueID: 1, Offset: 100},
		{Group: "fast", Topic: "u", QueueID: 0, Offset: 200},
	}}))
	q := func(topic string, id int32) int64 {
		cq, err := sa.Store.cqs.Find(topic, id)
		require.NoError(t, err)
		return cq.MinOffset()
	}
	require.Zero(t, q("t", 0))

	u, _ := fs.DiskUsage("/")
	fs.SetCapacity(uint64(float64(u.Total-u.Free) / 0.87))
	n, err := sa.CheckDisk()
	require.NoError(t, err)
	require.Equal(t, 1, n, "force clean deletes the oldest segment")
	t0, t1, u0 := q("t", 0), q("t", 1), q("u", 0)
	require.Greater(t, t0, int64(5), "the first segment must hold more than the slow group read")
	require.Less(t, t0, int64(100), "the fast group must be past the first segment")
	require.Greater(t, u0, int64(0))
	// t/0: unread by someone from offset 2 (slower); t/1: only fast
	// commits there and is past it; u/0: unread by slower from 0.
	want := (t0 - 2) + u0
	require.Equal(t, uint64(want), sa.ForcedUnconsumedMessages(), "t/0 min %d, t/1 min %d, u/0 min %d", t0, t1, u0)
	out := logged.String()
	require.Contains(t, out, "deleting messages consumer groups have not consumed")
	require.Contains(t, out, "unconsumed="+strconv.FormatInt(want, 10))
	require.Contains(t, out, "slower: "+strconv.FormatInt(t0-2, 10)+" unread in t")
	require.Contains(t, out, "slower: "+strconv.FormatInt(u0, 10)+" unread in u")
	require.Contains(t, out, "slow: "+strconv.FormatInt(t0-5, 10)+" unread in t")
	require.NotContains(t, out, "fast:")

	// Expired segments deleted by the daily clean do not count.
	// (4 am, when expired segments go, 88 h after the messages.)
	cfg.Clock.(*fakeClock).Set(time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC))
	fs.SetCapacity(u.Total * 4)
	n, err = sa.CheckDisk()
	require.NoError(t, err)
	require.Positive(t, n, "expired segments deleted")
	require.Equal(t, uint64(want), sa.ForcedUnconsumedMessages(), "expired segments counted as forced")
}
