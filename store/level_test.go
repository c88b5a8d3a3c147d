package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func announce(t *testing.T, sa *Standalone, id uint64, level uint32) {
	t.Helper()
	require.NoError(t, sa.Exec(&Command{Op: OpFormatLevel, Member: &MemberLevel{ID: id, Level: level}}))
}

// The group's format level is the lowest announced level among the
// members named, one that never announced counting as level 0; the last
// announcement of a member counts, downwards too.
func TestFormatLevelGroupMinimum(t *testing.T) {
	sa := openSA(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	members := []uint64{1, 2, 3}
	require.Equal(t, FormatLevelBase, GroupLevel(sa.FormatLevels(), members))
	announce(t, sa, 1, FormatLevel)
	announce(t, sa, 2, FormatLevel)
	require.Equal(t, FormatLevelBase, GroupLevel(sa.FormatLevels(), members), "member 3 never announced")
	require.Equal(t, FormatLevel, GroupLevel(sa.FormatLevels(), []uint64{1, 2}))
	announce(t, sa, 3, FormatLevel)
	require.Equal(t, FormatLevel, GroupLevel(sa.FormatLevels(), members))
	require.Equal(t, FormatLevelBase, GroupLevel(sa.FormatLevels(), []uint64{1, 2, 3, 4}), "a learner that never announced")
	require.Equal(t, FormatLevelBase, GroupLevel(sa.FormatLevels(), nil))
	announce(t, sa, 2, FormatLevelBase)
	require.Equal(t, FormatLevelBase, GroupLevel(sa.FormatLevels(), members), "member 2 announced a lower level")
	require.Equal(t, map[uint64]uint32{1: FormatLevel, 2: FormatLevelBase, 3: FormatLevel}, sa.FormatLevels())

	require.ErrorIs(t, sa.Exec(&Command{Op: OpFormatLevel}), ErrBadCommand)
	require.ErrorIs(t, sa.Exec(&Command{Op: OpFormatLevel, Member: &MemberLevel{Level: 1}}), ErrBadCommand)
	// What a build from before the gate does with an announcement, and
	// this build with an op of a later one: a refused command, nothing
	// changed.
	require.ErrorIs(t, sa.Exec(&Command{Op: "formatLevelOfTheFuture", Member: &MemberLevel{ID: 1, Level: 9}}), ErrBadCommand)
	require.Equal(t, map[uint64]uint32{1: FormatLevel, 2: FormatLevelBase, 3: FormatLevel}, sa.FormatLevels())
}

// The announced levels are replicated state: two replicas applying the
// same entries agree, a restart (from the checkpoint, or replaying the
// log after a crash) keeps them, and a snapshot carries them.
func TestFormatLevelRestartAndSnapshot(t *testing.T) {
	for seed := uint64(0); seed < 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		fs := vfs.NewMem()
		cfg := testConfig(t, fs)
		cfg.PersistInterval = time.Hour // persist only when the test says
		sa := openSA(t, cfg)
		other := openSA(t, testConfig(t, vfs.NewMem()))
		for i := range 20 {
			c := &Command{Op: OpFormatLevel, Member: &MemberLevel{ID: uint64(1 + rng.IntN(4)), Level: uint32(rng.IntN(3))}}
			require.NoError(t, sa.Exec(c))
			require.NoError(t, other.Exec(c))
			if rng.IntN(6) == 0 {
				require.NoError(t, sa.Persist())
			}
			if i == 10 {
				createTopic(t, sa, "T", 1)
				createTopic(t, other, "T", 1)
			}
		}
		want := sa.FormatLevels()
		require.NotEmpty(t, want)
		require.Equal(t, want, other.FormatLevels(), "seed %d: replicas agree", seed)
		require.NoError(t, other.Close())

		cfg.FS = crash(t, sa, fs, rng, []float64{0, 0.5, 1}[seed%3])
		sa2 := openSA(t, cfg)
		require.Equal(t, want, sa2.FormatLevels(), "seed %d: after a crash", seed)
		require.NoError(t, sa2.Close())
		sa3 := openSA(t, cfg)
		require.Equal(t, want, sa3.FormatLevels(), "seed %d: after a restart", seed)

		_, snap, err := sa3.Snapshot()
		require.NoError(t, err)
		sbCfg := testConfig(t, vfs.NewMem())
		sb := openSA(t, sbCfg)
		announce(t, sb, 9, 7) // replaced by the snapshot's
		require.NoError(t, sb.Restore(snap, func(info SnapshotInfo) error { return sb.w.Reset(info.Index+1, info.Pos) }))
		require.Equal(t, want, sb.FormatLevels(), "seed %d: from a snapshot", seed)
		require.NoError(t, sb.Close())
		sb = openSA(t, sbCfg)
		require.Equal(t, want, sb.FormatLevels(), "seed %d: a restart after the snapshot", seed)
		require.NoError(t, sb.Close())
		require.NoError(t, sa3.Close())
	}
}
