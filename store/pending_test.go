package store

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

// internalEntry builds an entry body of kind: head, then msgs stamped and
// encoded.
func internalEntry(t *testing.T, sa *Standalone, kind byte, head []byte, msgs ...*message.Message) []byte {
	t.Helper()
	b := append(AppendBodyHeader(nil, kind, 0), head...)
	for _, m := range msgs {
		sa.StoreStamp(m)
		var err error
		b, err = message.Append(b, m)
		require.NoError(t, err)
	}
	return b
}

// scheduleEntry builds a schedule entry delivering msgs (already rewritten
// to their real topic, or hops) for d.
func scheduleEntry(t *testing.T, sa *Standalone, d *schedule.Delivery, msgs ...*message.Message) []byte {
	t.Helper()
	return internalEntry(t, sa, KindSchedule, schedule.AppendDelivery(nil, d), msgs...)
}

func txnEntry(t *testing.T, sa *Standalone, op *txn.Op, msgs ...*message.Message) []byte {
	t.Helper()
	return internalEntry(t, sa, KindTxn, txn.AppendOp(nil, op), msgs...)
}

// A delivery applies once: from its queue's cursor, moving it; the same
// entry again (a second leader proposing the same units) changes nothing.
// A hop appends a unit for the same record to a timer bucket, released at
// the entry's time plus the bucket's delay. The cursor survives a restart.
func TestScheduleDeliveryAppliesOnce(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	sa := openSA(t, cfg)
	createTopic(t, sa, "real", 2)
	createTopic(t, sa, schedule.Topic, schedule.QueueCount)

	lvl2 := schedule.LevelQueue(2)
	m := msg(schedule.Topic, lvl2, 1, "", "U1")
	rs, err := sa.Put(m)
	require.NoError(t, err)
	units, err := sa.ScheduleUnits(lvl2, 0, 10)
	require.NoError(t, err)
	require.Len(t, units, 1)
	require.Equal(t, m.StoreTimestamp+5000, units[0].TagsCode, "a delay-level unit carries its release time")
	require.Equal(t, rs[0].PhyOffset, units[0].PhyOffset)

	timerQ := schedule.Bucket(10_000)
	_, err = sa.Put(msg(schedule.Topic, timerQ, 2, "", "U2"))
	require.NoError(t, err)

	out := msg("real", 1, 1, "", "U1")
	d := &schedule.Delivery{Queue: lvl2, From: 0, Count: 1, Now: 1}
	r, err := sa.appendApply(scheduleEntry(t, sa, d, out))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	require.Len(t, r.Messages, 1)
	require.NoError(t, r.Messages[0].Err)
	require.Equal(t, int64(1), sa.MaxOffset("real", 1))
	require.Equal(t, int64(1), sa.ScheduleOffset(lvl2))

	r, err = sa.appendApply(scheduleEntry(t, sa, d, msg("real", 1, 1, "", "U1")))
	require.NoError(t, err)
	require.ErrorIs(t, r.Err, ErrScheduleMoved)
	require.Equal(t, int64(1), sa.MaxOffset("real", 1), "a repeated delivery must not deliver again")

	// A delivery past the queue's end, or whose records and hops do not
	// add up, is refused whole.
	r, err = sa.appendApply(scheduleEntry(t, sa, &schedule.Delivery{Queue: lvl2, From: 1, Count: 1, Now: 1}, msg("real", 1, 1, "", "U9")))
	require.NoError(t, err)
	require.ErrorIs(t, r.Err, ErrBadEntry)

	// A hop is a copy of the record to another bucket, released at its
	// new store time plus the bucket's delay.
	tu, err := sa.ScheduleUnits(timerQ, 0, 10)
	require.NoError(t, err)
	require.Len(t, tu, 1)
	to := schedule.Bucket(1000)
	hopMsg := msg(schedule.Topic, to, 2, "", "U2")
	r, err = sa.appendApply(scheduleEntry(t, sa, &schedule.Delivery{Queue: timerQ, From: 0, Count: 1, Now: 1}, hopMsg))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	hu, err := sa.ScheduleUnits(to, 0, 10)
	require.NoError(t, err)
	require.Len(t, hu, 1)
	require.Equal(t, r.Messages[0].PhyOffset, hu[0].PhyOffset)
	d2, _ := schedule.QueueDelay(to)
	require.Equal(t, hopMsg.StoreTimestamp+d2, hu[0].TagsCode)
	require.Equal(t, int64(1), sa.ScheduleOffset(timerQ))

	require.NoError(t, sa.Close())
	sa = openSA(t, cfg)
	defer sa.Close()
	require.Equal(t, int64(1), sa.ScheduleOffset(lvl2))
	require.Equal(t, int64(1), sa.ScheduleOffset(timerQ))
	require.Equal(t, int64(0), sa.ScheduleOffset(to))
}

// A half message makes a pending transaction; an op ends it once (a second
// commit, or a rollback after the commit, changes nothing), a check counts,
// and the table survives a restart.
func TestTransactionsEndOnce(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	sa := openSA(t, cfg)
	createTopic(t, sa, "real", 1)
	createTopic(t, sa, txn.HalfTopic, 1)
	createTopic(t, sa, txn.OpTopic, 1)
	var halves []MessageResult
	for i := range 3 {
		h := msg(txn.HalfTopic, 0, i, "", "H"+strconv.Itoa(i))
		h.Properties[message.PropertyProducerGroup] = "pg"
		if i == 2 {
			h.Properties[message.PropertyCheckImmunityTimeSeconds] = "30"
		}
		rs, err := sa.Put(h)
		require.NoError(t, err)
		halves = append(halves, rs[0])
	}
	p := sa.PendingTransactions()
	require.Len(t, p, 3)
	require.Equal(t, "pg", p[1].Group)
	require.Equal(t, halves[1].PhyOffset, p[1].Phy)
	require.Zero(t, p[1].ImmunityMs)
	require.EqualValues(t, 30_000, p[2].ImmunityMs, "CHECK_IMMUNITY_TIME_IN_SECONDS")
	require.Zero(t, sa.MaxOffset("real", 0))

	opMsg := func(half int64) *message.Message {
		return &message.Message{Topic: txn.OpTopic, Body: []byte(strconv.FormatInt(half, 10)), BornHost: msg("x", 0, 0, "", "").BornHost,
			Properties: map[string]string{message.PropertyTags: txn.OpTag}}
	}
	commit := &txn.Op{Action: txn.Commit, HalfOffset: 0, Now: 5}
	r, err := sa.appendApply(txnEntry(t, sa, commit, msg("real", 0, 0, "", "H0"), opMsg(0)))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	require.Equal(t, int64(1), sa.MaxOffset("real", 0))
	require.Equal(t, int64(1), sa.MaxOffset(txn.OpTopic, 0))

	for _, again := range []*txn.Op{commit, {Action: txn.Rollback, HalfOffset: 0, Now: 6}} {
		r, err = sa.appendApply(txnEntry(t, sa, again, msg("real", 0, 0, "", "H0"), opMsg(0)))
		require.NoError(t, err)
		require.ErrorIs(t, r.Err, ErrTxnNotPending)
	}
	require.Equal(t, int64(1), sa.MaxOffset("real", 0), "an ended transaction must not deliver again")

	r, err = sa.appendApply(txnEntry(t, sa, &txn.Op{Action: txn.Rollback, HalfOffset: 1, Now: 7}, opMsg(1)))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	r, err = sa.appendApply(txnEntry(t, sa, &txn.Op{Action: txn.Check, HalfOffset: 2, Now: 8}))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	rec, ok := sa.PendingTransaction(2)
	require.True(t, ok)
	require.EqualValues(t, 1, rec.Checks)
	require.EqualValues(t, 8, rec.LastCheckMs)

	require.NoError(t, sa.Close())
	sa = openSA(t, cfg)
	defer sa.Close()
	p = sa.PendingTransactions()
	require.Len(t, p, 1)
	require.EqualValues(t, 2, p[0].HalfOffset)
	require.EqualValues(t, 1, p[0].Checks)
	require.Equal(t, int64(1), sa.MaxOffset("real", 0))
}

// A retry keeps its message's UNIQ_KEY and counts one more consumption:
// deduplication tells it from a repeated send of the same retry.
func TestDedupeTellsRetriesApart(t *testing.T) {
	sa := openSA(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	cfg := sa.cfg
	require.Positive(t, cfg.DedupeWindow)
	createTopic(t, sa, "%RETRY%g", 1)
	first := msg("%RETRY%g", 0, 1, "", "SAME")
	first.ReconsumeTimes = 1
	_, err := sa.Put(first)
	require.NoError(t, err)
	again := msg("%RETRY%g", 0, 1, "", "SAME")
	again.ReconsumeTimes = 1
	rs, err := sa.Put(again)
	require.NoError(t, err)
	require.True(t, rs[0].Duplicate, "the same retry sent twice is one message")
	second := msg("%RETRY%g", 0, 1, "", "SAME")
	second.ReconsumeTimes = 2
	rs, err = sa.Put(second)
	require.NoError(t, err)
	require.False(t, rs[0].Duplicate, "the next retry of a message is a new message")
	require.Equal(t, int64(2), sa.MaxOffset("%RETRY%g", 0))
}

// Retention keeps the segments of delayed and half messages still
// waiting, however old, and lets them go once delivered or ended.
func TestRetentionKeepsWaitingMessages(t *testing.T) {
	sa, clock := retentionStore(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	createTopic(t, sa, "t", 1)
	createTopic(t, sa, schedule.Topic, schedule.QueueCount)
	createTopic(t, sa, txn.HalfTopic, 1)
	old := clock.Now().Add(-100 * time.Hour).UnixMilli()
	put := func(m *message.Message, i int) MessageResult {
		m.StoreTimestamp = old + int64(i)
		rs, err := sa.Put(m)
		require.NoError(t, err)
		return rs[0]
	}
	for i := range 100 {
		put(msg("t", 0, i, "", ""), i)
	}
	timerQ := schedule.Bucket(1 << 20)
	delayed := put(msg(schedule.Topic, timerQ, 100, "", "D"), 100)
	for i := 101; i < 300; i++ {
		put(msg("t", 0, i, "", ""), i)
	}
	half := put(msg(txn.HalfTopic, 0, 300, "", "H"), 300)
	for i := 301; i < 600; i++ {
		put(msg("t", 0, i, "", ""), i)
	}
	clock.Set(time.Date(2026, 11, 23, 4, 0, 0, 0, time.Local))
	retainAll(t, sa)
	require.LessOrEqual(t, sa.Log().MinPosition(), delayed.PhyOffset, "retention deleted a delayed message not delivered yet")
	_, err := sa.RecordAt(delayed.PhyOffset)
	require.NoError(t, err)

	// Delivered: only the half message holds retention back now.
	r, err := sa.appendApply(scheduleEntry(t, sa, &schedule.Delivery{Queue: timerQ, From: 0, Count: 1, Now: 1}, msg("t", 0, 1, "", "D")))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	retainAll(t, sa)
	require.Greater(t, sa.Log().MinPosition(), delayed.PhyOffset)
	require.LessOrEqual(t, sa.Log().MinPosition(), half.PhyOffset, "retention deleted a pending transaction's half message")
}

// A segment holding only delivery entries is as old as the messages they
// delivered, not expired: retention keeps the delivered messages for their
// own retention time.
func TestRetentionDatesDeliveredMessages(t *testing.T) {
	sa, clock := retentionStore(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	createTopic(t, sa, "real", 1)
	createTopic(t, sa, schedule.Topic, schedule.QueueCount)
	old := clock.Now().Add(-100 * time.Hour).UnixMilli()
	q := schedule.LevelQueue(1)
	const n = 300
	for i := range n {
		m := msg(schedule.Topic, q, i, "", "")
		m.StoreTimestamp = old + int64(i)
		_, err := sa.Put(m)
		require.NoError(t, err)
	}
	for from := 0; from < n; from += 10 {
		var out []*message.Message
		for i := from; i < from+10; i++ {
			out = append(out, msg("real", 0, i, "", "")) // stored now
		}
		r, err := sa.appendApply(scheduleEntry(t, sa, &schedule.Delivery{Queue: q, From: int64(from), Count: 10, Now: 1}, out...))
		require.NoError(t, err)
		require.NoError(t, r.Err)
	}
	require.Greater(t, len(sa.Log().Segments()), 6)
	clock.Set(time.Date(2026, 11, 23, 4, 0, 0, 0, time.Local))
	require.Positive(t, retainAll(t, sa), "the segments of the expired originals go")
	require.Zero(t, sa.MinOffset("real", 0), "retention deleted delivered messages stored 16 hours ago")
	gr, err := sa.GetMessages("real", 0, 0, 1, 1<<20, nil)
	require.NoError(t, err)
	require.Equal(t, Found, gr.Status)
}

// A snapshot carries the schedule's cursors, the pending transactions and
// the access-control state to the replica that installs it.
func TestSnapshotCarriesScheduleTransactionsAndACL(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	cfg.ApplyACL = func(cur, update []byte) ([]byte, error) { return append(append([]byte{}, cur...), update...), nil }
	sa := openSA(t, cfg)
	defer sa.Close()
	createTopic(t, sa, "real", 1)
	createTopic(t, sa, schedule.Topic, schedule.QueueCount)
	createTopic(t, sa, txn.HalfTopic, 1)
	q := schedule.LevelQueue(1)
	for i := range 3 {
		_, err := sa.Put(msg(schedule.Topic, q, i, "", ""))
		require.NoError(t, err)
	}
	r, err := sa.appendApply(scheduleEntry(t, sa, &schedule.Delivery{Queue: q, From: 0, Count: 2, Now: 1}, msg("real", 0, 0, "", ""), msg("real", 0, 1, "", "")))
	require.NoError(t, err)
	require.NoError(t, r.Err)
	h := msg(txn.HalfTopic, 0, 9, "", "H")
	h.Properties[message.PropertyProducerGroup] = "pg"
	_, err = sa.Put(h)
	require.NoError(t, err)
	require.NoError(t, sa.Exec(&Command{Op: OpACL, ACL: []byte(`"x"`)}))
	idx, snap, err := sa.Snapshot()
	require.NoError(t, err)

	cfg2 := testConfig(t, vfs.NewMem())
	cfg2.ApplyACL = cfg.ApplyACL
	sb := openSA(t, cfg2)
	defer sb.Close()
	_, v0 := sb.ACL()
	require.NoError(t, sb.Restore(snap, func(info SnapshotInfo) error { return sb.w.Reset(info.Index+1, info.Pos) }))
	require.Equal(t, idx, sb.AppliedIndex())
	require.Equal(t, int64(2), sb.ScheduleOffset(q))
	p := sb.PendingTransactions()
	require.Len(t, p, 1)
	require.Equal(t, "pg", p[0].Group)
	blob, v1 := sb.ACL()
	require.Equal(t, `"x"`, string(blob))
	require.NotEqual(t, v0, v1, "the ACL's version moves when a snapshot replaces it")
}

// retainAll runs retention until it deletes nothing more and returns how
// many segments it deleted.
func retainAll(t *testing.T, sa *Standalone) int {
	t.Helper()
	deleted := 0
	for {
		n, err := sa.CheckDisk()
		require.NoError(t, err)
		if n == 0 {
			return deleted
		}
		deleted += n
	}
}
