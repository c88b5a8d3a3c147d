package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store/pop"
)

func popEntry(t *testing.T, sa *Standalone, b *pop.Batch, msgs ...*message.Message) []byte {
	t.Helper()
	head, err := pop.AppendBatch(nil, b)
	require.NoError(t, err)
	return internalEntry(t, sa, KindPop, head, msgs...)
}

// Pop entries change the pop state through Apply: pops hide, acks remove,
// a dead-letter revive stores its copy only if it applies, the group's
// consumer offset follows the low water, and the state survives a restart
// and travels in a snapshot.
func TestPopStateAppliesPersistsAndSnapshots(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	sa := openSA(t, cfg)
	createTopic(t, sa, "T", 2)
	createTopic(t, sa, "%DLQ%g", 1)
	for i := range 4 {
		_, err := sa.Put(msg("T", 0, i, "", ""))
		require.NoError(t, err)
	}
	k := pop.Key{Group: "g", Topic: "T", Queue: 0}
	r, err := sa.appendApply(popEntry(t, sa, &pop.Batch{Now: 100, Ops: []pop.Op{
		{Type: pop.OpPop, Group: "g", Topic: "T", From: 0, To: 3, Init: true, Offsets: []int64{0, 1, 2}, Invisible: 50},
		{Type: pop.OpPop, Group: "g", Topic: "nope", From: 0, To: 1, Init: true, Offsets: []int64{0}, Invisible: 50},
		{Type: pop.OpPop, Group: "bad group!", Topic: "T", From: 0, To: 1, Init: true, Offsets: []int64{0}, Invisible: 50},
	}}))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	require.Len(t, r.Pop, 3)
	require.NoError(t, r.Pop[0].Err)
	require.Len(t, r.Pop[0].Popped, 3)
	require.ErrorIs(t, r.Pop[1].Err, ErrUnknownTopic)
	require.ErrorIs(t, r.Pop[2].Err, pop.ErrBadOp)
	off, ok := sa.ConsumerOffset("g", "T", 0)
	require.True(t, ok)
	require.Equal(t, int64(0), off)

	// Ack 0 and revive 1 to the dead-letter topic; a revive of 2 with a
	// wrong receipt does not apply, and its copy is not stored.
	r, err = sa.appendApply(popEntry(t, sa, &pop.Batch{Now: 200, Ops: []pop.Op{
		{Type: pop.OpAck, Group: "g", Topic: "T", Offset: 0, PopTime: 100},
		{Type: pop.OpRevive, Group: "g", Topic: "T", Offset: 1, PopTime: 100, DLQ: true},
		{Type: pop.OpRevive, Group: "g", Topic: "T", Offset: 2, PopTime: 99, DLQ: true},
	}}, msg("%DLQ%g", 0, 1, "", ""), msg("%DLQ%g", 0, 2, "", "")))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	require.NoError(t, r.Pop[0].Err)
	require.True(t, r.Pop[1].DLQ)
	require.ErrorIs(t, r.Pop[2].Err, pop.ErrStale)
	require.Len(t, r.Messages, 1)
	require.Equal(t, int64(1), sa.MaxOffset("%DLQ%g", 0))
	off, _ = sa.ConsumerOffset("g", "T", 0)
	require.Equal(t, int64(2), off, "the consumer offset follows the low water")

	// A dead-letter revive without its record is malformed: nothing applies.
	r, err = sa.appendApply(popEntry(t, sa, &pop.Batch{Now: 300, Ops: []pop.Op{
		{Type: pop.OpRevive, Group: "g", Topic: "T", Offset: 2, PopTime: 100, DLQ: true},
	}}))
	require.NoError(t, err)
	require.ErrorIs(t, r.Err, ErrBadEntry)
	q, ok := sa.PopQueue(k)
	require.True(t, ok)
	require.Len(t, q.InFlight, 1)
	require.Equal(t, int64(3), q.Next)

	require.NoError(t, sa.Close())
	sa = openSA(t, cfg)
	defer sa.Close()
	q2, ok := sa.PopQueue(k)
	require.True(t, ok)
	require.Equal(t, q, q2, "the pop state survives a restart")
	require.Equal(t, map[pop.Key]int{k: 1}, sa.PopInFlight("g"))
	require.Equal(t, PopView{Exists: true, Next: 3, Busy: true}, sa.PopView(k, 10, 1000))
	require.Equal(t, PopView{}, sa.PopView(pop.Key{Group: "h", Topic: "T"}, 10, 1000))
	due := sa.PopDue(150, 10)
	require.Len(t, due[k], 1)
	require.Equal(t, int64(2), due[k][0].Offset)

	_, snap, err := sa.Snapshot()
	require.NoError(t, err)
	sb := openSA(t, testConfig(t, vfs.NewMem()))
	defer sb.Close()
	require.NoError(t, sb.Restore(snap, func(info SnapshotInfo) error { return sb.w.Reset(info.Index+1, info.Pos) }))
	q3, ok := sb.PopQueue(k)
	require.True(t, ok)
	require.Equal(t, q, q3, "the pop state travels in a snapshot")
	r, err = sb.appendApply(popEntry(t, sb, &pop.Batch{Now: 160, Ops: []pop.Op{{Type: pop.OpRevive, Group: "g", Topic: "T", Offset: 2, PopTime: 100}}}))
	require.NoError(t, err)
	require.NoError(t, r.Pop[0].Err)
	v := sb.PopView(k, 10, 161)
	require.False(t, v.Busy)
	require.Len(t, v.Revived, 1)
	require.Empty(t, sb.PopView(k, 10, 100).Revived, "not popped again at its own pop time")
	// The restored state goes on: the receipt acks on the new replica.
	r, err = sb.appendApply(popEntry(t, sb, &pop.Batch{Now: 400, Ops: []pop.Op{{Type: pop.OpAck, Group: "g", Topic: "T", Offset: 2, PopTime: 100}}}))
	require.NoError(t, err)
	require.NoError(t, r.Pop[0].Err)
	require.False(t, r.Pop[0].Done)
}

// After a power loss at any point, the pop state is what the synced log
// says: the checkpoint's state plus the replay of the pop entries after
// it, equal to the state before the crash.
func TestPopStateSurvivesCrash(t *testing.T) {
	for seed := uint64(0); seed < 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		fs := vfs.NewMem()
		cfg := testConfig(t, fs)
		cfg.PersistInterval = time.Hour // persist only when the test says
		sa := openSA(t, cfg)
		createTopic(t, sa, "T", 2)
		for i := range 40 {
			_, err := sa.Put(msg("T", int32(i%2), i, "", ""))
			require.NoError(t, err)
		}
		require.NoError(t, sa.Persist())
		now := int64(1000)
		for range 60 {
			now += int64(rng.IntN(30))
			q := int32(rng.IntN(2))
			k := pop.Key{Group: "g", Topic: "T", Queue: q}
			state, ok := sa.PopQueue(k)
			var op pop.Op
			switch {
			case !ok || rng.IntN(3) == 0:
				from, init := int64(0), !ok
				if ok {
					from = state.Next
				}
				to := min(from+int64(1+rng.IntN(4)), 20)
				op = pop.Op{Type: pop.OpPop, Group: "g", Topic: "T", Queue: q, From: from, To: to, Init: init, Invisible: int64(10 + rng.IntN(50))}
				for off := from; off < to; off++ {
					op.Offsets = append(op.Offsets, off)
				}
			default:
				recs := state.Sorted()
				if len(recs) == 0 {
					continue
				}
				r := recs[rng.IntN(len(recs))]
				op = pop.Op{Group: "g", Topic: "T", Queue: q, Offset: r.Offset, PopTime: r.PopTime}
				switch rng.IntN(3) {
				case 0:
					op.Type = pop.OpAck
				case 1:
					op.Type, op.Invisible = pop.OpChange, int64(rng.IntN(40))
				default:
					op.Type = pop.OpRevive
				}
			}
			_, err := sa.appendApply(popEntry(t, sa, &pop.Batch{Now: now, Ops: []pop.Op{op}}))
			require.NoError(t, err)
			if rng.IntN(15) == 0 {
				require.NoError(t, sa.Persist())
			}
		}
		var want [2][]byte
		for q := range int32(2) {
			st, ok := sa.PopQueue(pop.Key{Group: "g", Topic: "T", Queue: q})
			require.True(t, ok)
			require.Positive(t, st.Next, "seed %d: queue %d was popped", seed, q)
			want[q] = st.Encode()
		}
		wantOff, _ := sa.ConsumerOffset("g", "T", 0)
		cfg.FS = crash(t, sa, fs, rng, []float64{0, 0.5, 1}[seed%3])
		sa2, err := OpenStandalone(cfg)
		require.NoError(t, err, "seed %d", seed)
		for q := range int32(2) {
			st, ok := sa2.PopQueue(pop.Key{Group: "g", Topic: "T", Queue: q})
			require.True(t, ok, "seed %d queue %d", seed, q)
			require.Equal(t, want[q], st.Encode(), "seed %d queue %d", seed, q)
		}
		off, _ := sa2.ConsumerOffset("g", "T", 0)
		require.Equal(t, wantOff, off, "seed %d", seed)
		require.NoError(t, sa2.Close())
	}
}

// Forced retention that deletes popped messages not yet acked counts them
// as unconsumed, even when the group's offset was committed past them;
// PopGone then lists the records whose messages are gone (and only
// those), and a drop entry removes them so that the group's offset moves
// on.
func TestPopRecordsOfDeletedMessages(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	cfg.SegmentSize = 16 << 10
	sa := openSA(t, cfg)
	defer sa.Close()
	createTopic(t, sa, "T", 1)
	for i := range 200 {
		_, err := sa.Put(msg("T", 0, i, "", ""))
		require.NoError(t, err)
	}
	k := pop.Key{Group: "g", Topic: "T", Queue: 0}
	r, err := sa.appendApply(popEntry(t, sa, &pop.Batch{Now: 100, Ops: []pop.Op{
		{Type: pop.OpPop, Group: "g", Topic: "T", From: 0, To: 200, Init: true, Offsets: []int64{3, 4, 150}, Invisible: 50},
	}}))
	require.NoError(t, err)
	require.NoError(t, r.Pop[0].Err)
	// Revive 4, so that both a hidden and a revived record are gone.
	r, err = sa.appendApply(popEntry(t, sa, &pop.Batch{Now: 200, Ops: []pop.Op{
		{Type: pop.OpRevive, Group: "g", Topic: "T", Offset: 4, PopTime: 100},
	}}))
	require.NoError(t, err)
	require.NoError(t, r.Pop[0].Err)
	// An offset committed past the records (a reset, a pull commit).
	require.NoError(t, sa.Exec(&Command{Op: OpCommitOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "T", QueueID: 0, Offset: 190}}}))
	gone, walked := sa.PopGone(10, nil)
	require.Empty(t, gone, "nothing deleted yet")
	require.Equal(t, map[pop.Key]int64{k: 0}, walked)

	u, _ := fs.DiskUsage("/")
	fs.SetCapacity(uint64(float64(u.Total-u.Free) / 0.87))
	n, err := sa.CheckDisk()
	require.NoError(t, err)
	require.Equal(t, 1, n, "force clean deletes the oldest segment")
	minOff := sa.MinOffset("T", 0)
	require.Greater(t, minOff, int64(4))
	require.Less(t, minOff, int64(150))
	require.Equal(t, uint64(minOff-3), sa.ForcedUnconsumedMessages(), "popped, unacked messages count from the lowest one")

	gone, _ = sa.PopGone(10, nil)
	require.Len(t, gone, 1)
	require.Equal(t, []int64{3, 4}, []int64{gone[k][0].Offset, gone[k][1].Offset})
	gone, _ = sa.PopGone(1, nil)
	require.Len(t, gone[k], 1, "limit")
	gone, walked = sa.PopGone(10, func(pop.Key, int64) bool { return true })
	require.Empty(t, gone, "skipped")
	require.Empty(t, walked)

	fs.SetCapacity(u.Total * 4)
	_, err = sa.CheckDisk()
	require.NoError(t, err)

	r, err = sa.appendApply(popEntry(t, sa, &pop.Batch{Now: 300, Ops: []pop.Op{
		{Type: pop.OpDrop, Group: "g", Topic: "T", Offset: 3, PopTime: 100},
		{Type: pop.OpDrop, Group: "g", Topic: "T", Offset: 4, PopTime: 99},
		{Type: pop.OpDrop, Group: "g", Topic: "T", Offset: 4, PopTime: 100},
		{Type: pop.OpDrop, Group: "g", Topic: "T", Offset: 4, PopTime: 100},
	}}))
	require.NoError(t, err)
	require.True(t, r.Pop[0].Dropped)
	require.ErrorIs(t, r.Pop[1].Err, pop.ErrStale, "a drop names the delivery it saw")
	require.True(t, r.Pop[2].Dropped)
	require.True(t, r.Pop[3].Done, "a repeated drop does nothing")
	gone, _ = sa.PopGone(10, nil)
	require.Empty(t, gone)
	q, ok := sa.PopQueue(k)
	require.True(t, ok)
	require.Len(t, q.InFlight, 1)
	require.Equal(t, int64(150), q.LowWater())
}

// TopicChanged closes for an entry that touches its topic (a message, a
// pop op, an offset commit) or for a configuration change, not for the
// traffic of another topic.
func TestTopicChanged(t *testing.T) {
	sa := openSA(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	createTopic(t, sa, "A", 1)
	createTopic(t, sa, "B", 1)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	a := sa.TopicChanged("A")
	_, err := sa.Put(msg("B", 0, 0, "", ""))
	require.NoError(t, err)
	require.NoError(t, sa.Exec(&Command{Op: OpCommitOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "B", QueueID: 0, Offset: 1}}}))
	_, err = sa.appendApply(popEntry(t, sa, &pop.Batch{Now: 1, Ops: []pop.Op{{Type: pop.OpPop, Group: "g", Topic: "B", From: 0, To: 1, Init: true, Offsets: []int64{0}, Invisible: 9}}}))
	require.NoError(t, err)
	require.False(t, closed(a), "B's traffic")
	_, err = sa.Put(msg("A", 0, 0, "", ""))
	require.NoError(t, err)
	require.True(t, closed(a), "a message of A")
	a = sa.TopicChanged("A")
	require.False(t, closed(a))
	_, err = sa.Put(msg("A", 0, 1, "", ""))
	require.NoError(t, err)
	require.True(t, closed(a), "the next message of A, in the next Apply")
	a = sa.TopicChanged("A")
	_, err = sa.appendApply(popEntry(t, sa, &pop.Batch{Now: 1, Ops: []pop.Op{{Type: pop.OpPop, Group: "g", Topic: "A", From: 0, To: 1, Init: true, Offsets: []int64{0}, Invisible: 9}}}))
	require.NoError(t, err)
	require.True(t, closed(a), "a pop op of A")
	a = sa.TopicChanged("A")
	require.NoError(t, sa.Exec(&Command{Op: OpCommitOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "A", QueueID: 0, Offset: 1}}}))
	require.True(t, closed(a), "an offset of A")
	a = sa.TopicChanged("A")
	createTopic(t, sa, "C", 1)
	require.True(t, closed(a), "a configuration change")
}

// Checkpoints counts each Persist when it begins and when it ends, so
// that a leader's pop traces can tell which requests ran beside one.
func TestCheckpointsCounted(t *testing.T) {
	sa := openSA(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	s0, d0 := sa.Checkpoints()
	require.NoError(t, sa.Persist())
	s1, d1 := sa.Checkpoints()
	require.GreaterOrEqual(t, s1, s0+1, "begun")
	require.GreaterOrEqual(t, d1, d0+1, "ended")
}
