package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// The dedupe decision of a retry is the same on two replicas that applied
// the same log in full: same entries, same store times, same window.
func TestDedupeDecisionEqualOnReplicasOfOneLog(t *testing.T) {
	var res [2][]MessageResult
	for i := range 2 {
		cfg := testConfig(t, vfs.NewMem())
		cfg.DedupeWindow = time.Minute
		sa := openSA(t, cfg)
		createTopic(t, sa, "t", 2)
		m := msg("t", 0, 1, "", "K")
		m.StoreTimestamp = 1_800_000_000_000
		_, err := sa.Put(m)
		require.NoError(t, err)
		r := msg("t", 1, 1, "", "K")
		r.StoreTimestamp = m.StoreTimestamp + 30_000
		res[i], err = sa.Put(r)
		require.NoError(t, err)
		require.NoError(t, sa.Close())
	}
	require.True(t, res[0][0].Duplicate)
	require.Equal(t, res[0], res[1])
}

// A replica that installed a snapshot has none of the records below the
// snapshot's index, recent ones included, so it takes a retry of one of
// them as a new message where the leader refuses it as a duplicate. This
// pins the divergence ARCHITECTURE.md describes under "deduplication";
// when snapshots carry the dedupe state, the follower must answer like
// the leader and this test's last assertions flip.
func TestDedupeAfterSnapshotInstallDiverges(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	cfg.DedupeWindow = time.Minute
	leader := openSA(t, cfg)
	defer leader.Close()
	createTopic(t, leader, "t", 1)
	m := msg("t", 0, 1, "", "K")
	m.StoreTimestamp = 1_800_000_000_000
	_, err := leader.Put(m)
	require.NoError(t, err)
	_, snap, err := leader.Snapshot()
	require.NoError(t, err)

	cfg2 := testConfig(t, vfs.NewMem())
	cfg2.DedupeWindow = time.Minute
	follower := openSA(t, cfg2)
	defer follower.Close()
	require.NoError(t, follower.Restore(snap, func(info SnapshotInfo) error { return follower.Log().Reset(info.Index+1, info.Pos) }))

	r1 := msg("t", 0, 1, "", "K")
	r1.StoreTimestamp = m.StoreTimestamp + 1_000
	r2 := msg("t", 0, 1, "", "K")
	r2.StoreTimestamp = r1.StoreTimestamp
	onLeader, err := leader.Put(r1)
	require.NoError(t, err)
	onFollower, err := follower.Put(r2)
	require.NoError(t, err)
	require.Equal(t, leader.Log().LastIndex(), follower.Log().LastIndex(), "both applied the retry as the same entry")
	require.True(t, onLeader[0].Duplicate, "the leader refuses the retry")
	require.False(t, onFollower[0].Duplicate, "known divergence: the follower restored from a snapshot took the retry as new")
	require.Equal(t, int64(1), leader.MaxOffset("t", 0))
	require.Equal(t, int64(2), follower.MaxOffset("t", 0), "known divergence: the follower's queue is one ahead")
}
