package store

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
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

// dedupeBase is the store time of the tests' first message.
const dedupeBase = 1_800_000_000_000

// stamped is a message with UNIQ_KEY uniq stored at dedupeBase+dt ms.
func stamped(uniq string, dt int64) *message.Message {
	m := msg("t", 0, 1, "", uniq)
	m.StoreTimestamp = dedupeBase + dt
	return m
}

// putAll applies the same message as the same entry on every node and
// returns each node's results; the logs must stay aligned.
func putAll(t *testing.T, nodes []*Standalone, mk func() *message.Message) [][]MessageResult {
	t.Helper()
	out := make([][]MessageResult, len(nodes))
	for i, n := range nodes {
		var err error
		out[i], err = n.Put(mk())
		require.NoError(t, err)
		require.Equal(t, nodes[0].Log().LastIndex(), n.Log().LastIndex(), "node %d applied the message as the same entry", i)
	}
	return out
}

// requireSameDecision asserts every node decided a retry like node 0 (same
// answer, same queue length) and that the decision was dup.
func requireSameDecision(t *testing.T, nodes []*Standalone, res [][]MessageResult, dup bool, what string) {
	t.Helper()
	require.Equal(t, dup, res[0][0].Duplicate, "%s: node 0", what)
	for i := 1; i < len(nodes); i++ {
		require.Equal(t, nodeFree(res[0]), nodeFree(res[i]), "%s: node %d answers like node 0", what, i)
		require.Equal(t, nodes[0].MaxOffset("t", 0), nodes[i].MaxOffset("t", 0), "%s: node %d's queue", what, i)
	}
}

// nodeFree returns a copy of rs without what is one node's own (the
// topic records behind TopicAux), to compare two nodes' results.
func nodeFree(rs []MessageResult) []MessageResult {
	out := slices.Clone(rs)
	for i := range out {
		out[i].topic = nil
	}
	return out
}

func installOn(t *testing.T, st *Standalone, snap []byte) {
	t.Helper()
	require.NoError(t, st.Restore(snap, func(info SnapshotInfo) error { return st.w.Reset(info.Index+1, info.Pos) }))
}

func dedupeConfig(t *testing.T) Config {
	cfg := testConfig(t, vfs.NewMem())
	cfg.DedupeWindow = time.Minute
	return cfg
}

// A replica that installed a snapshot has none of the records below the
// snapshot's index; the snapshot's dedupe table gives it those a later
// retry can match, so it decides every retry like the leader: a retry of
// a recent message is a duplicate on both (with the same answer), a retry
// of a message older than the window is new on both, and so is a message
// of the same UNIQ_KEY consumed once more. The decision survives the
// follower's restart (the table is in its dedupe bucket).
func TestDedupeDecisionEqualAfterSnapshotInstall(t *testing.T) {
	leader := openSA(t, dedupeConfig(t))
	defer leader.Close()
	createTopic(t, leader, "t", 1)
	for _, m := range []*message.Message{stamped("OLD", -5*60_000), stamped("K", 0), stamped("K2", 10_000)} {
		_, err := leader.Put(m)
		require.NoError(t, err)
	}
	_, snap, err := leader.Snapshot()
	require.NoError(t, err)

	fcfg := dedupeConfig(t)
	follower := openSA(t, fcfg)
	installOn(t, follower, snap)
	nodes := []*Standalone{leader, follower}

	res := putAll(t, nodes, func() *message.Message { return stamped("K", 1_000) })
	requireSameDecision(t, nodes, res, true, "retry of K")
	require.Equal(t, int64(1), res[0][0].QueueOffset, "the answer is the original's")
	res = putAll(t, nodes, func() *message.Message { return stamped("OLD", 1_000) })
	requireSameDecision(t, nodes, res, false, "retry of OLD, outside the window")
	res = putAll(t, nodes, func() *message.Message {
		m := stamped("K2", 11_000)
		m.ReconsumeTimes = 1
		return m
	})
	requireSameDecision(t, nodes, res, false, "K2 consumed once more")
	require.Equal(t, int64(5), leader.MaxOffset("t", 0))

	require.NoError(t, follower.Close())
	follower = openSA(t, fcfg)
	defer follower.Close()
	nodes[1] = follower
	res = putAll(t, nodes, func() *message.Message { return stamped("K2", 12_000) })
	requireSameDecision(t, nodes, res, true, "retry of K2 after the follower's restart")
	require.Equal(t, int64(2), res[0][0].QueueOffset)
}

// A replica restored from a snapshot that makes a snapshot itself carries
// its table forward: a third replica installing it refuses a retry of a
// message stored before the first snapshot, like the original leader,
// and one stored between the two snapshots.
func TestDedupeTableCarriesForward(t *testing.T) {
	leader := openSA(t, dedupeConfig(t))
	defer leader.Close()
	createTopic(t, leader, "t", 1)
	_, err := leader.Put(stamped("K", 0))
	require.NoError(t, err)
	_, snap, err := leader.Snapshot()
	require.NoError(t, err)
	second := openSA(t, dedupeConfig(t))
	defer second.Close()
	installOn(t, second, snap)
	nodes := []*Standalone{leader, second}
	putAll(t, nodes, func() *message.Message { return stamped("K3", 2_000) })
	_, snap2, err := second.Snapshot()
	require.NoError(t, err)
	third := openSA(t, dedupeConfig(t))
	defer third.Close()
	installOn(t, third, snap2)
	nodes = append(nodes, third)

	res := putAll(t, nodes, func() *message.Message { return stamped("K", 3_000) })
	requireSameDecision(t, nodes, res, true, "retry of K, stored before the first snapshot")
	res = putAll(t, nodes, func() *message.Message { return stamped("K3", 3_000) })
	requireSameDecision(t, nodes, res, true, "retry of K3, stored between the snapshots")
	require.Equal(t, int64(2), third.MaxOffset("t", 0))
}

// A version 1 snapshot (no dedupe table) still installs; the replica then
// has no table, as before version 2.
func TestSnapshotVersion1StillInstalls(t *testing.T) {
	leader := openSA(t, dedupeConfig(t))
	defer leader.Close()
	createTopic(t, leader, "t", 1)
	_, err := leader.Put(stamped("K", 0))
	require.NoError(t, err)
	p, snap, err := leader.Snapshot()
	require.NoError(t, err)
	info, err := DecodeSnapshot(snap)
	require.NoError(t, err)
	require.Len(t, info.dedupe, 1)

	// The version 1 layout: the header, the database and the checksum.
	v1 := append([]byte(nil), snap[:snapHeader+len(info.DB)]...)
	binary.BigEndian.PutUint32(v1[4:], 1)
	v1 = binary.BigEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	info1, err := DecodeSnapshot(v1)
	require.NoError(t, err)
	require.Equal(t, p, info1.Index)
	require.Empty(t, info1.dedupe)

	follower := openSA(t, dedupeConfig(t))
	defer follower.Close()
	installOn(t, follower, v1)
	require.Empty(t, follower.dedupeTab)
	res, err := follower.Put(stamped("K", 1_000))
	require.NoError(t, err)
	require.False(t, res[0].Duplicate, "no table: the follower has no record of K")

	bad := append([]byte(nil), snap...)
	binary.BigEndian.PutUint32(bad[4:], 3)
	_, err = DecodeSnapshot(bad)
	require.ErrorIs(t, err, ErrBadSnapshot)
}

// The table covers only the last DedupeTableBytes of the log before the
// snapshot, even for messages within the window.
func TestDedupeTableBoundedByLogBytes(t *testing.T) {
	cfg := dedupeConfig(t)
	cfg.DedupeTableBytes = 4 << 10
	leader := openSA(t, cfg)
	defer func() { leader.Close() }()
	createTopic(t, leader, "t", 1)
	_, err := leader.Put(stamped("K", 0))
	require.NoError(t, err)
	big := stamped("BIG", 1_000)
	big.Body = make([]byte, 8<<10)
	_, err = leader.Put(big)
	require.NoError(t, err)
	_, err = leader.Put(stamped("LAST", 2_000))
	require.NoError(t, err)
	_, snap, err := leader.Snapshot()
	require.NoError(t, err)
	info, err := DecodeSnapshot(snap)
	require.NoError(t, err)
	require.Contains(t, info.dedupe, dedupeKey("t", "LAST", 0))
	require.NotContains(t, info.dedupe, dedupeKey("t", "BIG", 0), "stored more than 4 KiB before the snapshot")
	require.NotContains(t, info.dedupe, dedupeKey("t", "K", 0))

	cfg.DedupeTableBytes = 0 // the default, 32 MiB
	require.NoError(t, leader.Close())
	leader = openSA(t, cfg)
	_, snap, err = leader.Snapshot()
	require.NoError(t, err)
	info, err = DecodeSnapshot(snap)
	require.NoError(t, err)
	require.Len(t, info.dedupe, 3)
	hit := info.dedupe[dedupeKey("t", "BIG", 0)]
	require.Len(t, hit, 1)
	require.Equal(t, int64(1), hit[0].QueueOffset)
	require.Equal(t, int64(dedupeBase+1_000), hit[0].StoreTimestamp)
}
