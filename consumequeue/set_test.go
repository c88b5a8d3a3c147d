package consumequeue

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func TestSet(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		s, err := OpenSet(fs, root, testOpts(t, 7))
		require.NoError(t, err)
		require.Empty(t, s.Queues())
		_, err = s.Queue("b", 1, false)
		require.ErrorIs(t, err, ErrNoQueue)
		_, err = s.Queue("a/b", 1, true)
		require.ErrorIs(t, err, ErrInvalidArgument)

		// Messages of three queues interleave in the commit log.
		keys := []queueKey{{"b", 1}, {"a", 10}, {"a", 2}}
		for i := int64(0); i < 30; i++ {
			k := keys[i%3]
			q, err := s.Queue(k.topic, k.id, true)
			require.NoError(t, err)
			require.NoError(t, q.Put(i/3, i*100, 50, i))
		}
		var got []queueKey
		for _, q := range s.Queues() {
			got = append(got, queueKey{q.Topic(), q.QueueID()})
		}
		require.Equal(t, []queueKey{{"a", 2}, {"a", 10}, {"b", 1}}, got)
		require.NoError(t, s.SyncDirty())
		require.NoError(t, s.Close())
		require.NoError(t, s.Close())
		_, err = s.Queue("a", 2, true)
		require.ErrorIs(t, err, ErrClosed)

		// Junk is ignored on discovery.
		require.NoError(t, fs.MkdirAll(vfs.Join(root, "c", "x"), 0o755))
		require.NoError(t, fs.MkdirAll(vfs.Join(root, "c", "007"), 0o755))
		f, err := fs.Create(vfs.Join(root, "stray"))
		require.NoError(t, err)
		require.NoError(t, f.Close())

		s, err = OpenSet(fs, root, testOpts(t, 7))
		require.NoError(t, err)
		require.Len(t, s.Queues(), 3)
		for _, k := range keys {
			q, err := s.Queue(k.topic, k.id, false)
			require.NoError(t, err)
			require.Equal(t, int64(10), q.MaxOffset())
		}

		// The commit log lost its tail at phy 2050: units 21+ go.
		require.NoError(t, s.TruncatePhy(2050))
		max := map[queueKey]int64{}
		for _, q := range s.Queues() {
			max[queueKey{q.Topic(), q.QueueID()}] = q.MaxOffset()
		}
		require.Equal(t, map[queueKey]int64{{"a", 2}: 7, {"a", 10}: 7, {"b", 1}: 7}, max)

		// Retention: commit log below phy 1500 is gone.
		n, err := s.DeleteBefore(1500)
		require.NoError(t, err)
		require.Zero(t, n) // each queue has 7 units in one file plus an empty one at most
		q, err := s.Queue("b", 1, false)
		require.NoError(t, err)
		require.Equal(t, int64(5), q.MinOffset()) // unit 5 of b/1 is message 15
		require.NoError(t, s.Close())
	})
}

func TestSetSyncDirtySurvivesCrash(t *testing.T) {
	fs := vfs.NewMem()
	s, err := OpenSet(fs, "/cq", testOpts(t, 7))
	require.NoError(t, err)
	a, err := s.Queue("a", 0, true)
	require.NoError(t, err)
	b, err := s.Queue("b", 0, true)
	require.NoError(t, err)
	putRange(t, a, 0, 10, 0)
	putRange(t, b, 0, 3, 0)
	require.True(t, a.needSync.Load())
	require.NoError(t, s.SyncDirty())
	require.False(t, a.needSync.Load())
	require.False(t, b.needSync.Load())
	putRange(t, b, 3, 5, 0) // not synced

	crashed := fs.CrashClone(newRand(7), 0)
	s2, err := OpenSet(crashed, "/cq", testOpts(t, 7))
	require.NoError(t, err)
	a2, err := s2.Queue("a", 0, false)
	require.NoError(t, err)
	checkRange(t, a2, 0, 10, 0)
	require.Equal(t, int64(10), a2.MaxOffset())
	b2, err := s2.Queue("b", 0, false)
	require.NoError(t, err)
	require.Equal(t, int64(3), b2.MaxOffset())
	require.NoError(t, s2.Close())
	require.NoError(t, s.Close())
}

// TestConcurrentReaders runs one writer (put, truncate, delete, sync) against
// readers; run it with -race. Readers must only ever see correct units.
func TestConcurrentReaders(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		q := openQueue(t, fs, root, 7)
		done := make(chan struct{})
		var wg sync.WaitGroup
		for r := 0; r < 2; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					off := q.MinOffset()
					units, _, err := q.Read(off, 32, nil)
					if err != nil {
						require.ErrorIs(t, err, ErrOffsetOutOfRange)
						continue
					}
					for _, u := range units {
						require.Equal(t, unitAt(u.Offset, 0), u)
					}
					if m := q.MaxOffset(); m > 0 {
						if u, err := q.Get(m - 1); err == nil {
							require.Equal(t, unitAt(m-1, 0), u)
						}
					}
				}
			}()
		}
		next := int64(0)
		for round := int64(0); round < 30; round++ {
			putRange(t, q, next, next+25, 0)
			next += 25
			if round%4 == 0 {
				require.NoError(t, q.Sync())
			}
			if round%3 == 0 {
				next -= 10
				require.NoError(t, q.TruncateTo(next))
			}
			if round%5 == 0 {
				_, err := q.DeleteBefore((next - 30) * 100)
				require.NoError(t, err)
			}
		}
		close(done)
		wg.Wait()
		require.NoError(t, q.Close())
	})
}

// Find returns nil without an error for a queue the Set does not have,
// the queue once it exists, and ErrClosed after Close.
func TestSetFind(t *testing.T) {
	s, err := OpenSet(vfs.NewMem(), "/cq", testOpts(t, 7))
	require.NoError(t, err)
	q, err := s.Find("t", 1)
	require.NoError(t, err)
	require.Nil(t, q)
	made, err := s.Queue("t", 1, true)
	require.NoError(t, err)
	q, err = s.Find("t", 1)
	require.NoError(t, err)
	require.Same(t, made, q)
	require.NoError(t, s.Close())
	_, err = s.Find("t", 1)
	require.ErrorIs(t, err, ErrClosed)
}
