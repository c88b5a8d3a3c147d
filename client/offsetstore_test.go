package client

import (
	"context"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// TestFileOffsetStoreCrashSafe: whatever fails during a persist, and
// wherever the power fails, the offset file found afterwards is whole: the
// last state persisted successfully, or one attempted after it.
func TestFileOffsetStoreCrashSafe(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	mem := vfs.NewMem()
	toggle := &vfs.Toggle{}
	fsys := vfs.WithErrors(mem, toggle)
	const path = "/home/u/.config/raftmq/offsets/G/offsets.json"
	s, err := openFileOffsetStore(fsys, path, "G")
	require.NoError(t, err)

	mqs := allQueues("T", 3)
	cur := map[MessageQueue]int64{}
	durable := map[MessageQueue]int64{} // last state persisted without error
	var since []map[MessageQueue]int64  // states attempted after it
	ops := []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir}
	for range 300 {
		mq := mqs[rng.IntN(len(mqs))]
		cur[mq] += int64(1 + rng.IntN(5))
		s.update(mq, cur[mq])
		if rng.IntN(3) == 0 {
			toggle.Arm(ops[rng.IntN(len(ops))])
		}
		err := s.persist(context.Background(), nil)
		toggle.Disarm()
		if err == nil {
			durable, since = maps.Clone(cur), nil
		} else {
			since = append(since, maps.Clone(cur))
		}

		crashed := mem.CrashClone(rng, rng.Float64())
		after, err := openFileOffsetStore(crashed, path, "G")
		require.NoError(t, err, "the file after a crash is whole")
		found := map[MessageQueue]int64{}
		for mq, e := range after.table.m {
			found[mq] = e.offset
		}
		ok := maps.Equal(found, durable)
		for _, st := range since {
			ok = ok || maps.Equal(found, st)
		}
		require.True(t, ok, "found %v; durable %v; attempted since %v", found, durable, since)
	}
}

func TestFileOffsetStoreRefusesOtherGroupsFile(t *testing.T) {
	mem := vfs.NewMem()
	s, err := openFileOffsetStore(mem, "/o.json", "G")
	require.NoError(t, err)
	s.update(MessageQueue{"T", "b", 0}, 7)
	require.NoError(t, s.persist(context.Background(), nil))
	_, err = openFileOffsetStore(mem, "/o.json", "H")
	require.ErrorContains(t, err, `belongs to group "G"`)
	s2, err := openFileOffsetStore(mem, "/o.json", "G")
	require.NoError(t, err)
	off, ok, err := s2.read(context.Background(), MessageQueue{"T", "b", 0})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(7), off)
}
