package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func testConfig(t testing.TB, fs vfs.FS) Config {
	return Config{
		Dir:             t.TempDir(),
		FS:              fs,
		SegmentSize:     64 << 10,
		CQUnitsPerFile:  50,
		IndexSlots:      64,
		IndexMaxEntries: 200,
		NoSyncMeta:      true,
		Clock:           &fakeClock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)},
	}
}

func openSA(t *testing.T, cfg Config) *Standalone {
	t.Helper()
	sa, err := OpenStandalone(cfg)
	require.NoError(t, err)
	return sa
}

func createTopic(t *testing.T, sa *Standalone, name string, queues int32) {
	t.Helper()
	tc := offsets.NewTopicConfig(name, queues)
	require.NoError(t, sa.Exec(&Command{Op: OpCreateTopic, Topic: &tc}))
}

func msg(topic string, q int32, i int, tags, uniq string) *message.Message {
	m := &message.Message{
		Topic:         topic,
		QueueID:       q,
		Body:          []byte(fmt.Sprintf("body-%d-%s", i, make([]byte, i%300))),
		BornTimestamp: 1700000000000 + int64(i),
		BornHost:      netip.MustParseAddrPort("10.0.0.1:5000"),
		Properties:    map[string]string{},
	}
	if tags != "" {
		m.Properties[message.PropertyTags] = tags
	}
	if uniq != "" {
		m.Properties[message.PropertyUniqKey] = uniq
	}
	m.Properties[message.PropertyKeys] = fmt.Sprintf("k%d order-%d", i, i%7)
	return m
}

func TestPutGetRoundTrip(t *testing.T) {
	sa := openSA(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	createTopic(t, sa, "orders", 4)
	var results []MessageResult
	for i := 0; i < 300; i++ {
		tags := []string{"A", "B"}[i%2]
		rs, err := sa.Put(msg("orders", int32(i%4), i, tags, fmt.Sprintf("U%d", i)))
		require.NoError(t, err)
		require.Len(t, rs, 1)
		require.NoError(t, rs[0].Err)
		require.Equal(t, int64(i/4), rs[0].QueueOffset, "queue offsets are dense per queue")
		results = append(results, rs[0])
	}
	for q := int32(0); q < 4; q++ {
		require.Equal(t, int64(75), sa.MaxOffset("orders", q))
		r, err := sa.GetMessages("orders", q, 0, 1000, 1<<30, nil)
		require.NoError(t, err)
		require.Equal(t, Found, r.Status)
		require.Len(t, r.Records, 75)
		require.Equal(t, bytes.Join(r.Records, nil), r.Body, "Body is the records back to back")
		for k, rec := range r.Records {
			m, _, err := message.Decode(rec)
			require.NoError(t, err)
			i := k*4 + int(q)
			require.Equal(t, msg("orders", q, i, "", "").Body, m.Body)
			require.Equal(t, int64(k), m.QueueOffset, "QUEUEOFFSET patched")
			require.Equal(t, results[i].PhyOffset, m.PhysicalOffset, "PHYSICALOFFSET patched")
		}
	}
	// Tag filter.
	codeA := message.TagsCode("A")
	r, err := sa.GetMessages("orders", 0, 0, 1000, 1<<30, func(c int64) bool { return c == codeA })
	require.NoError(t, err)
	for _, rec := range r.Records {
		m, _, _ := message.Decode(rec)
		require.Equal(t, "A", m.Tags())
	}
	require.NotEmpty(t, r.Records)
	// Status codes.
	r, _ = sa.GetMessages("orders", 0, 75, 10, 1<<30, nil)
	require.Equal(t, OffsetOverflowOne, r.Status)
	r, _ = sa.GetMessages("orders", 0, 99, 10, 1<<30, nil)
	require.Equal(t, OffsetOverflowBadly, r.Status)
	require.Equal(t, int64(75), r.NextBeginOffset)
	r, _ = sa.GetMessages("nope", 0, 0, 10, 1<<30, nil)
	require.Equal(t, NoMatchedLogicQueue, r.Status)
	// maxBytes limits, but at least one message.
	r, _ = sa.GetMessages("orders", 1, 0, 10, 1, nil)
	require.Len(t, r.Records, 1)
	require.Equal(t, int64(1), r.NextBeginOffset)
}

func TestRejectsBadInput(t *testing.T) {
	sa := openSA(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	createTopic(t, sa, "t", 2)
	rs, err := sa.Put(msg("unknown", 0, 1, "", ""))
	require.NoError(t, err)
	require.ErrorIs(t, rs[0].Err, ErrUnknownTopic)
	rs, err = sa.Put(msg("t", 2, 1, "", ""))
	require.NoError(t, err)
	require.ErrorIs(t, rs[0].Err, ErrBadQueue)
	big := msg("t", 0, 1, "", "")
	big.Body = make([]byte, 4<<20+1)
	_, err = sa.Put(big)
	require.ErrorIs(t, err, message.ErrMessageTooLarge)
	_, err = sa.Put(msg("bad topic!", 0, 1, "", ""))
	require.ErrorIs(t, err, message.ErrBadTopic)
	bad := offsets.NewTopicConfig("x", 0)
	require.ErrorIs(t, sa.Exec(&Command{Op: OpCreateTopic, Topic: &bad}), ErrBadCommand)
	require.ErrorIs(t, sa.Exec(&Command{Op: "explode"}), ErrBadCommand)
	require.Equal(t, int64(0), sa.MaxOffset("t", 0), "rejected sends are never queued")
}

func TestDedupeByUniqKey(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	cfg.DedupeWindow = time.Minute
	sa := openSA(t, cfg)
	defer sa.Close()
	createTopic(t, sa, "t", 2)
	first, err := sa.Put(msg("t", 0, 1, "", "KEY-1"))
	require.NoError(t, err)
	retry, err := sa.Put(msg("t", 1, 1, "", "KEY-1")) // a retry may pick another queue
	require.NoError(t, err)
	require.True(t, retry[0].Duplicate)
	require.Equal(t, first[0].QueueID, retry[0].QueueID)
	require.Equal(t, first[0].QueueOffset, retry[0].QueueOffset)
	require.Equal(t, first[0].MsgID(), retry[0].MsgID())
	require.Equal(t, int64(1), sa.MaxOffset("t", 0)+sa.MaxOffset("t", 1))
	// Outside the window it is a new message.
	late := msg("t", 0, 1, "", "KEY-1")
	late.StoreTimestamp = sa.cfg.Clock.Now().UnixMilli() + 10*time.Minute.Milliseconds()
	rs, err := sa.Put(late)
	require.NoError(t, err)
	require.False(t, rs[0].Duplicate)
	require.Equal(t, int64(1), rs[0].QueueOffset)
}

// With one hash slot every key collides: lookups must still return only
// the messages that really carry the key, and dedupe must not merge
// different keys.
func TestQueriesWithHashCollisions(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	cfg.IndexSlots = 1
	sa := openSA(t, cfg)
	defer sa.Close()
	createTopic(t, sa, "t", 1)
	// "Aa" and "BB" have the same Java hash, so the same index hash too.
	a, err := sa.Put(msg("t", 0, 1, "", "Aa"))
	require.NoError(t, err)
	b, err := sa.Put(msg("t", 0, 2, "", "BB"))
	require.NoError(t, err)
	require.False(t, b[0].Duplicate, "a colliding key is not a duplicate")
	m, err := sa.QueryByUniqKey("t", "Aa")
	require.NoError(t, err)
	require.Equal(t, a[0].PhyOffset, m.PhysicalOffset)
	m, err = sa.QueryByUniqKey("t", "BB")
	require.NoError(t, err)
	require.Equal(t, b[0].PhyOffset, m.PhysicalOffset)
	ms, err := sa.QueryByKey("t", "k2", 10, 0, 1<<62)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, "BB", ms[0].UniqKey())
	ms, err = sa.QueryByKey("t", "order-1", 10, 0, 1<<62)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	// Keys are separated by spaces only, as Message.Keys splits them.
	c := msg("t", 0, 3, "", "")
	c.Properties[message.PropertyKeys] = "tab\tkey  last "
	_, err = sa.Put(c)
	require.NoError(t, err)
	for key, n := range map[string]int{"tab\tkey": 1, "last": 1, "tab": 0, "key": 0} {
		ms, err = sa.QueryByKey("t", key, 10, 0, 1<<62)
		require.NoError(t, err)
		require.Len(t, ms, n, "key %q", key)
	}
	byID, err := sa.QueryByOffsetMsgID(b[0].MsgID())
	require.NoError(t, err)
	require.Equal(t, int64(1), byID.QueueOffset)
	_, err = sa.QueryByOffsetMsgID(message.OffsetMsgID(cfg.StoreHost, b[0].PhyOffset+3))
	require.ErrorIs(t, err, ErrNotFound)
	_, err = sa.QueryByOffsetMsgID("zz")
	require.Error(t, err)
}

func TestOffsetsAndConfigSurviveReopen(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	sa := openSA(t, cfg)
	createTopic(t, sa, "t", 2)
	for i := 0; i < 10; i++ {
		_, err := sa.Put(msg("t", 0, i, "", ""))
		require.NoError(t, err)
	}
	require.NoError(t, sa.Exec(&Command{Op: OpCommitOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "t", QueueID: 0, Offset: 7}}}))
	require.ErrorIs(t, sa.Exec(&Command{Op: OpCommitOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "t", QueueID: 0, Offset: 11}}}), ErrBadCommand)
	g := offsets.NewSubscriptionGroupConfig("g")
	require.NoError(t, sa.Exec(&Command{Op: OpUpdateGroup, Group: &g}))
	applied := sa.AppliedIndex()
	require.NoError(t, sa.Close())

	sa = openSA(t, cfg)
	defer sa.Close()
	require.True(t, sa.CleanStart())
	require.Equal(t, applied, sa.AppliedIndex())
	off, ok := sa.ConsumerOffset("g", "t", 0)
	require.True(t, ok)
	require.Equal(t, int64(7), off)
	_, ok = sa.SubscriptionGroup("g")
	require.True(t, ok)
	require.Equal(t, int64(10), sa.MaxOffset("t", 0))
	rs, err := sa.Put(msg("t", 0, 11, "", ""))
	require.NoError(t, err)
	require.Equal(t, int64(10), rs[0].QueueOffset)
}

// TestAdvanceOffsetsNeverMoveBack: a consumer commit (advanceOffsets) below
// the stored offset is ignored, in the same command as other commits too,
// while a reset (commitOffsets) moves the offset back.
func TestAdvanceOffsetsNeverMoveBack(t *testing.T) {
	sa := openSA(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	createTopic(t, sa, "t", 2)
	for i := 0; i < 10; i++ {
		_, err := sa.Put(msg("t", int32(i%2), i, "", ""))
		require.NoError(t, err)
	}
	adv := func(q int32, off int64) OffsetCommit {
		return OffsetCommit{Group: "g", Topic: "t", QueueID: q, Offset: off}
	}
	get := func(q int32) int64 {
		off, ok := sa.ConsumerOffset("g", "t", q)
		require.True(t, ok)
		return off
	}
	require.NoError(t, sa.Exec(&Command{Op: OpAdvanceOffsets, Offsets: []OffsetCommit{adv(0, 4)}}))
	require.Equal(t, int64(4), get(0))
	// A stale commit of queue 0 next to a fresh one of queue 1.
	require.NoError(t, sa.Exec(&Command{Op: OpAdvanceOffsets, Offsets: []OffsetCommit{adv(0, 2), adv(1, 3)}}))
	require.Equal(t, int64(4), get(0))
	require.Equal(t, int64(3), get(1))
	require.NoError(t, sa.Exec(&Command{Op: OpAdvanceOffsets, Offsets: []OffsetCommit{adv(0, 5)}}))
	require.Equal(t, int64(5), get(0))
	// Beyond the queue's end is refused whole, as for commitOffsets.
	require.ErrorIs(t, sa.Exec(&Command{Op: OpAdvanceOffsets, Offsets: []OffsetCommit{adv(1, 4), adv(0, 6)}}), ErrBadCommand)
	require.Equal(t, int64(3), get(1))
	// A reset moves back.
	require.NoError(t, sa.Exec(&Command{Op: OpCommitOffsets, Offsets: []OffsetCommit{adv(0, 1)}}))
	require.Equal(t, int64(1), get(0))
}

// crash simulates a power loss: the store is abandoned without Persist or
// Close (only bbolt's handle is released so the process can reopen it; its
// file holds what the last Persist committed), and the memory file system
// keeps only synced data plus a random part of the rest.
func crash(t *testing.T, sa *Standalone, fs *vfs.MemFS, rng *rand.Rand, keep float64) *vfs.MemFS {
	t.Helper()
	close(sa.stop)
	sa.wg.Wait()
	require.NoError(t, sa.db.Close())
	return fs.CrashClone(rng, keep)
}

func TestCrashRecoveryKeepsAckedMessages(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		fs := vfs.NewMem()
		cfg := testConfig(t, fs)
		cfg.PersistInterval = time.Hour // persist only when the test says
		sa := openSA(t, cfg)
		createTopic(t, sa, "t", 3)
		require.NoError(t, sa.Persist())
		type acked struct {
			r    MessageResult
			body []byte
		}
		var ok []acked
		for i := 0; i < 150; i++ {
			m := msg("t", int32(rng.IntN(3)), i, "", fmt.Sprintf("U%d", i))
			rs, err := sa.Put(m)
			require.NoError(t, err)
			ok = append(ok, acked{rs[0], m.Body})
			if rng.IntN(40) == 0 {
				require.NoError(t, sa.Persist())
			}
		}
		clone := crash(t, sa, fs, rng, []float64{0, 0.5, 1}[seed%3])
		cfg.FS = clone
		sa2, err := OpenStandalone(cfg)
		require.NoError(t, err, "seed %d", seed)
		require.False(t, sa2.CleanStart())
		for _, a := range ok {
			r, err := sa2.GetMessages("t", a.r.QueueID, a.r.QueueOffset, 1, 1<<30, nil)
			require.NoError(t, err)
			require.Equal(t, Found, r.Status, "seed %d: acked message %+v missing", seed, a.r)
			m, _, err := message.Decode(r.Records[0])
			require.NoError(t, err)
			require.Equal(t, a.body, m.Body, "seed %d", seed)
		}
		var total int64
		for q := int32(0); q < 3; q++ {
			total += sa2.MaxOffset("t", q)
		}
		require.Equal(t, int64(len(ok)), total, "seed %d: no extra or missing queue entries", seed)
		// Dedupe still recognises a retried send after recovery.
		rs, err := sa2.Put(msg("t", 0, 5, "", "U5"))
		require.NoError(t, err)
		require.True(t, rs[0].Duplicate, "seed %d", seed)
		require.Equal(t, ok[5].r.QueueOffset, rs[0].QueueOffset)
		require.NoError(t, sa2.Close())
	}
}

func TestCorruptLogRefusesToOpen(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	sa := filled(t, cfg, 20)
	seg := sa.Log().Segments()[0].Path
	require.NoError(t, sa.Close())
	f, err := fs.OpenReadWrite(seg)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0x5a}, 300)
	require.NoError(t, err)
	_, err = OpenStandalone(cfg)
	require.ErrorIs(t, err, commitlog.ErrCorrupt)
	require.Contains(t, err.Error(), seg)
}

// retentionStore opens a store with cfg, 16 KiB segments and deletion at
// 04:00.
func retentionStore(t *testing.T, cfg Config) (*Standalone, *fakeClock) {
	t.Helper()
	cfg.SegmentSize = 16 << 10
	cfg.Retention.DeleteWhen = []int{4}
	return openSA(t, cfg), cfg.Clock.(*fakeClock)
}

// expiredSegments opens a retentionStore with cfg and puts 600 messages
// stored 100 hours ago into topic "t".
func expiredSegments(t *testing.T, cfg Config) (*Standalone, *fakeClock) {
	t.Helper()
	sa, clock := retentionStore(t, cfg)
	createTopic(t, sa, "t", 1)
	old := clock.Now().Add(-100 * time.Hour).UnixMilli()
	for i := 0; i < 600; i++ {
		m := msg("t", 0, i, "", "")
		m.StoreTimestamp = old + int64(i)
		_, err := sa.Put(m)
		require.NoError(t, err)
	}
	return sa, clock
}

func TestRetentionAndDiskThresholds(t *testing.T) {
	sa, clock := expiredSegments(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	segs := len(sa.Log().Segments())
	require.Greater(t, segs, 4)
	// Noon, disk nearly empty: nothing is deleted.
	n, err := sa.CheckDisk()
	require.NoError(t, err)
	require.Zero(t, n)
	// 04:00: expired segments go, and the queue's min offset moves.
	clock.Set(time.Date(2026, 11, 23, 4, 0, 0, 0, time.Local))
	n, err = sa.CheckDisk()
	require.NoError(t, err)
	require.Greater(t, n, 0)
	require.Greater(t, sa.MinOffset("t", 0), int64(0))
	r, err := sa.GetMessages("t", 0, 0, 10, 1<<30, nil)
	require.NoError(t, err)
	require.Equal(t, OffsetTooSmall, r.Status)
	r, err = sa.GetMessages("t", 0, r.NextBeginOffset, 10, 1<<30, nil)
	require.NoError(t, err)
	require.Equal(t, Found, r.Status)
}

// freshSegments opens a store on a MemFS with 16 KiB segments and writes n
// fresh (unexpired) messages to topic "t", queue 0.
func freshSegments(t *testing.T, n int) (*vfs.MemFS, *Standalone) {
	t.Helper()
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	cfg.SegmentSize = 16 << 10
	return fs, filled(t, cfg, n)
}

// filled opens a store with cfg, creates topic "t" with one queue and puts
// n messages into it.
func filled(t *testing.T, cfg Config, n int) *Standalone {
	t.Helper()
	sa := openSA(t, cfg)
	createTopic(t, sa, "t", 1)
	for i := 0; i < n; i++ {
		_, err := sa.Put(msg("t", 0, i, "", ""))
		require.NoError(t, err)
	}
	return sa
}

func TestForceCleanAbove85Percent(t *testing.T) {
	fs, sa := freshSegments(t, 200)
	defer sa.Close()
	before := len(sa.Log().Segments())
	u, _ := fs.DiskUsage("/")
	fs.SetCapacity(uint64(float64(u.Total-u.Free) / 0.87))
	n, err := sa.CheckDisk()
	require.NoError(t, err)
	require.Equal(t, 1, n, "force clean deletes the oldest segment")
	require.Equal(t, before-1, len(sa.Log().Segments()))
}

func TestDiskFullRefusesWritesThenResumes(t *testing.T) {
	fs, sa := freshSegments(t, 2000)
	defer sa.Close()
	// Disk over 90 %: writes are refused with a clear error, and come back
	// when space frees.
	u, _ := fs.DiskUsage("/")
	used := u.Total - u.Free
	fs.SetCapacity(uint64(float64(used) / 0.99))
	_, err := sa.CheckDisk()
	require.NoError(t, err)
	require.True(t, sa.DiskFull())
	_, err = sa.Put(msg("t", 0, 1, "", ""))
	require.ErrorIs(t, err, ErrDiskFull)
	require.Contains(t, err.Error(), "disk full")
	fs.SetCapacity(used * 4)
	_, err = sa.CheckDisk()
	require.NoError(t, err)
	require.False(t, sa.DiskFull())
	_, err = sa.Put(msg("t", 0, 1, "", ""))
	require.NoError(t, err)
}

// A store opened on a device already over the full ratio refuses writes
// from the first one, without waiting for its periodic check, and reports
// the usage at once.
func TestOpenOnFullDiskRefusesWrites(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	sa := filled(t, cfg, 200)
	require.Greater(t, sa.DiskUsedRatio(), 0.0, "usage is measured when the store opens")
	require.False(t, sa.DiskFull())
	require.NoError(t, sa.Close())

	u, _ := fs.DiskUsage("/")
	fs.SetCapacity(uint64(float64(u.Total-u.Free) / 0.95))
	sa = openSA(t, cfg)
	defer sa.Close()
	require.True(t, sa.DiskFull(), "refusing before the first periodic check")
	require.InDelta(t, 0.95, sa.DiskUsedRatio(), 0.01)
	_, err := sa.Put(msg("t", 0, 1, "", ""))
	require.ErrorIs(t, err, ErrDiskFull)
}

func TestInspect(t *testing.T) {
	cfg := testConfig(t, vfs.Default())
	sa := openSA(t, cfg)
	createTopic(t, sa, "t", 2)
	for i := 0; i < 50; i++ {
		_, err := sa.Put(msg("t", int32(i%2), i, "", ""))
		require.NoError(t, err)
	}
	require.NoError(t, sa.Exec(&Command{Op: OpCommitOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "t", QueueID: 1, Offset: 3}}}))
	seg := sa.Log().Segments()[0].Path
	require.NoError(t, sa.Close())
	var out strings.Builder
	require.NoError(t, Inspect(vfs.Default(), cfg.Dir, &out))
	require.Contains(t, out.String(), "messages in t")
	require.Contains(t, out.String(), "50")
	require.Contains(t, out.String(), "consumer offset g t/1")
	require.Contains(t, out.String(), "OK")

	f, err := vfs.Default().OpenReadWrite(seg)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xee}, 200)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out.Reset()
	err = Inspect(vfs.Default(), cfg.Dir, &out)
	require.ErrorIs(t, err, ErrInspectFailed)
	require.Contains(t, out.String(), seg)
}

// The retention floor (what a leader's live followers still need) holds
// expired segments back, except above the force-clean ratio.
func TestRetentionFloorHoldsBackUnlessForced(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	var floor atomic.Uint64
	cfg.Retention.Floor = floor.Load
	sa, clock := expiredSegments(t, cfg)
	defer sa.Close()
	segs := sa.Log().Segments()
	require.Greater(t, len(segs), 4)
	clock.Set(time.Date(2026, 11, 23, 4, 0, 0, 0, time.Local)) // every segment expired, deletion hour
	n, err := sa.CheckDisk()
	require.NoError(t, err)
	require.Zero(t, n, "a follower at index 0 holds every segment")

	floor.Store(segs[1].FirstIndex + uint64(segs[1].Entries) - 1) // it has the first two segments
	n, err = sa.CheckDisk()
	require.NoError(t, err)
	require.Equal(t, 2, n, "only what the follower has goes")

	floor.Store(0)
	u, _ := fs.DiskUsage("/")
	fs.SetCapacity(uint64(float64(u.Total-u.Free) / 0.87))
	n, err = sa.CheckDisk()
	require.NoError(t, err)
	require.Greater(t, n, 0, "above 85 % the floor gives way")
}

// An offset commit or a config import naming a group that the offsets
// table cannot store (RocketMQ's group rule: 1..255 characters of
// [%|a-zA-Z0-9_-]) is refused whole at apply, alike on every replica.
// Applied, it failed every later checkpoint, and the node stopped
// ("store: checkpoint failed"): a client's one request stopped every
// replica (found by FuzzBrokerConnection).
func TestOffsetCommitOfInvalidGroupIsRefused(t *testing.T) {
	sa := openSA(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	createTopic(t, sa, "t", 1)
	_, err := sa.Put(msg("t", 0, 0, "", ""))
	require.NoError(t, err)
	for _, group := range []string{"fz\x0eg", "a b", strings.Repeat("g", 256)} {
		offs := []OffsetCommit{{Group: "ok", Topic: "t", QueueID: 0, Offset: 1}, {Group: group, Topic: "t", QueueID: 0, Offset: 1}}
		for _, op := range []string{OpCommitOffsets, OpAdvanceOffsets, OpImportConfig} {
			require.ErrorIs(t, sa.Exec(&Command{Op: op, Offsets: offs}), ErrBadCommand, "%s of group %q", op, group)
		}
	}
	_, ok := sa.ConsumerOffset("ok", "t", 0)
	require.False(t, ok, "a refused commit applies none of its offsets")
	require.NoError(t, sa.Persist())
	require.NoError(t, sa.Exec(&Command{Op: OpCommitOffsets, Offsets: []OffsetCommit{{Group: strings.Repeat("g", 255), Topic: "t", QueueID: 0, Offset: 1}}}))
	require.NoError(t, sa.Persist())
}
