package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/store/schedule"
)

// A recall applies in log order against the deliveries: a delivery entry
// carrying a recalled message is refused whole (the leader built it before
// the recall applied); one without it applies and moves the horizon; a
// recall due by the horizon is too late. The recalled set survives a
// restart (the checkpoint) and travels in a snapshot.
func TestScheduleRecallInLogOrder(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	sa := openSA(t, cfg)
	createTopic(t, sa, "real", 1)
	createTopic(t, sa, schedule.Topic, schedule.QueueCount)
	q := schedule.LevelQueue(1)
	for i, u := range []string{"U1", "U2"} {
		_, err := sa.Put(msg(schedule.Topic, q, i, "", u))
		require.NoError(t, err)
	}
	recall := func(id string, due, now int64) error {
		return sa.Exec(&Command{Op: OpRecall, Recall: &schedule.Recall{Topic: "real", MsgID: id, Due: due, Now: now}})
	}
	require.NoError(t, recall("U1", 1000, 10))
	require.NoError(t, recall("U1", 1000, 10), "a recall again")
	require.True(t, sa.Recalled("real", "U1"))
	require.False(t, sa.Recalled("real", "U2"))
	require.ErrorIs(t, sa.Exec(&Command{Op: OpRecall}), ErrBadCommand)

	r, err := sa.appendApply(scheduleEntry(t, sa, &schedule.Delivery{Queue: q, From: 0, Count: 2, Now: 1000},
		msg("real", 0, 0, "", "U1"), msg("real", 0, 1, "", "U2")))
	require.NoError(t, err)
	require.ErrorIs(t, r.Err, ErrScheduleMoved, "a delivery of a recalled message")
	require.Equal(t, int64(0), sa.ScheduleOffset(q))
	require.Equal(t, int64(0), sa.MaxOffset("real", 0))

	r, err = sa.appendApply(scheduleEntry(t, sa, &schedule.Delivery{Queue: q, From: 0, Count: 2, Now: 1000, Skips: 1},
		msg("real", 0, 1, "", "U2")))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	require.Equal(t, int64(1), sa.MaxOffset("real", 0))

	require.ErrorIs(t, recall("U2", 1000, 10), schedule.ErrRecallTooLate, "due by the horizon")
	require.ErrorIs(t, recall("U3", 500, 600), schedule.ErrRecallTooLate, "due by the recall's time")
	require.NoError(t, recall("U4", 5000, 1000))

	require.NoError(t, sa.Close())
	sa = openSA(t, cfg)
	defer sa.Close()
	require.True(t, sa.Recalled("real", "U1"), "after a restart")
	require.True(t, sa.Recalled("real", "U4"))
	require.ErrorIs(t, recall("U5", 1000, 10), schedule.ErrRecallTooLate, "the horizon after a restart")

	_, snap, err := sa.Snapshot()
	require.NoError(t, err)
	sb := openSA(t, testConfig(t, vfs.NewMem()))
	defer sb.Close()
	require.NoError(t, sb.Restore(snap, func(info SnapshotInfo) error { return sb.w.Reset(info.Index+1, info.Pos) }))
	require.True(t, sb.Recalled("real", "U1"), "from a snapshot")
	require.True(t, sb.Recalled("real", "U4"))
	require.False(t, sb.Recalled("real", "U2"))
}
