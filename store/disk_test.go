package store

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/internal/vfs/vfstest"
	"github.com/raftmq/raftmq/message"
)

// The send path sees a disk filling within spaceRefresh, without waiting
// for the retention check, refuses with ErrDiskFull and a reason, and
// resumes by itself when space frees.
func TestCheckWriteSeesSpaceOnTheWritePath(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	cfg.Retention.CheckInterval = time.Hour
	sa := filled(t, cfg, 50)
	defer sa.Close()
	require.NoError(t, sa.CheckWrite(1000))

	u, _ := fs.DiskUsage("/")
	used := u.Total - u.Free
	// 512 KiB free: below the 1 MiB minimum reserve.
	fs.SetCapacity(used + 512<<10)
	deadline := time.Now().Add(2 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = sa.CheckWrite(1000); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.ErrorIs(t, err, ErrDiskFull)
	require.Contains(t, err.Error(), "below the reserve")
	_, err = sa.Put(msg("t", 0, 1, "", ""))
	require.ErrorIs(t, err, ErrDiskFull)
	require.True(t, sa.DiskFull())

	fs.SetCapacity(used * 100)
	require.Eventually(t, func() bool { return sa.CheckWrite(1000) == nil }, 2*time.Second, 10*time.Millisecond)
	require.False(t, sa.DiskFull(), "the flag turns off without a write (spaceLoop)")
	_, err = sa.Put(msg("t", 0, 2, "", ""))
	require.NoError(t, err)
}

// Writes accepted since the last measurement count against the free space:
// a burst cannot write past the reserve between two measurements.
func TestCheckWriteCountsAcceptedBytes(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	sa := filled(t, cfg, 10)
	defer sa.Close()
	u, _ := fs.DiskUsage("/")
	fs.SetCapacity(u.Total - u.Free + 20<<20)
	require.NoError(t, sa.Store.refreshSpace())
	free, reserve := sa.DiskFreeBytes(), sa.DiskReserveBytes()
	require.Greater(t, free, reserve)
	accepted := int64(0)
	for i := 0; i < 100; i++ {
		if sa.CheckWrite(1<<20) != nil {
			break
		}
		accepted += 1 << 20
	}
	require.LessOrEqual(t, accepted, free-reserve, "accepted %d bytes with %d free and a reserve of %d", accepted, free, reserve)
	require.Greater(t, accepted, int64(0))
}

// A consume-queue or index write that finds the disk full waits (the store
// counts as full meanwhile) and completes when space frees: no applied
// entry's unit or key is lost, and reads are served meanwhile.
func TestDerivedWritesWaitForSpace(t *testing.T) {
	mem := vfs.NewMem()
	tg := &vfs.Toggle{Err: vfs.ErrNoSpace}
	fs := vfs.WithErrors(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if strings.Contains(path, "/consumequeue/") || strings.Contains(path, "/index/") {
			return tg.MaybeError(op, path)
		}
		return nil
	}))
	cfg := testConfig(t, fs)
	cfg.PersistInterval = time.Hour
	sa := filled(t, cfg, 20)
	tg.Arm(vfs.OpWrite, vfs.OpCreate, vfs.OpTruncate)
	for i := 20; i < 40; i++ {
		_, err := sa.Put(msg("t", 0, i, "", ""))
		require.NoError(t, err)
	}
	done := make(chan error, 1)
	go func() { done <- sa.Persist() }()
	require.Eventually(t, sa.DiskFull, 5*time.Second, 5*time.Millisecond)
	_, err := sa.Put(msg("t", 0, 99, "", ""))
	require.ErrorIs(t, err, ErrDiskFull)
	require.Contains(t, err.Error(), "waiting for space")
	select {
	case err := <-done:
		t.Fatalf("checkpoint returned %v on a full disk, want it to wait", err)
	default:
	}
	// Reads are served meanwhile (units from the queue's memory).
	got, err := sa.GetMessages("t", 0, 0, 64, 1<<20, nil)
	require.NoError(t, err)
	require.Len(t, got.Records, 40)

	tg.Disarm()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("checkpoint still waiting after space was freed")
	}
	require.Eventually(t, func() bool { return !sa.DiskFull() }, 2*time.Second, 10*time.Millisecond)
	_, err = sa.Put(msg("t", 0, 40, "", ""))
	require.NoError(t, err)
	require.NoError(t, sa.Close())

	sa = openSA(t, cfg)
	defer sa.Close()
	got, err = sa.GetMessages("t", 0, 0, 64, 1<<20, nil)
	require.NoError(t, err)
	require.Len(t, got.Records, 41)
}

// A checkpoint delta that was not written goes back: the next delta holds
// its keys and the applied index again.
func TestRestoreDeltaRewritesNextTime(t *testing.T) {
	sa := filled(t, testConfig(t, vfs.NewMem()), 5)
	defer sa.Close()
	st := sa.Store.state
	sa.Store.applyMu.Lock()
	defer sa.Store.applyMu.Unlock()
	// Everything so far is persisted by filled's checkpoints or not; take
	// what is dirty, then put it back as a failed write would.
	d := st.takeDelta()
	st.restoreDelta(d)
	d2 := st.takeDelta()
	require.Equal(t, d.writeApplied, d2.writeApplied)
	require.Equal(t, d.applied, d2.applied)
	require.Equal(t, len(d.topics), len(d2.topics))
	require.Equal(t, d.queues, d2.queues)
	require.Equal(t, d.consumer, d2.consumer)
	require.Equal(t, d.prevPersisted, d2.prevPersisted)
	require.True(t, len(d.queues) > 0 || d.writeApplied, "nothing was dirty: the test proves nothing")
}

// store inspect on a full tmpfs reports; it does not crash on the sparse
// files (index slot table, segment tails) it reads.
func TestInspectOnFullTmpfs(t *testing.T) {
	dir := vfstest.SmallTmpfs(t, 16<<20)
	cfg := testConfig(t, vfs.Default())
	cfg.Dir = dir + "/n1"
	cfg.IndexSlots = 4_000_000 // a 16 MiB slot table: holes but a few pages
	cfg.IndexMaxEntries = 1000
	cfg.SegmentSize = 32 << 20 // sparse past what is written
	cfg.WarmAhead = -1
	sa := filled(t, cfg, 100)
	require.NoError(t, sa.Close())
	vfstest.FillDisk(t, dir)
	var out strings.Builder
	err := Inspect(vfs.Default(), cfg.Dir, &out)
	require.NoError(t, err, out.String())
	require.Regexp(t, `messages in t +100`, out.String())
	require.Contains(t, out.String(), "OK: every CRC verified")
}

// A store whose derived writes wait for space still closes: Close ends the
// wait (the write fails; derived state is rebuilt from the log at the next
// open), and nothing acknowledged is lost.
func TestCloseWhileWaitingForSpace(t *testing.T) {
	mem := vfs.NewMem()
	tg := &vfs.Toggle{Err: vfs.ErrNoSpace}
	fs := vfs.WithErrors(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if strings.Contains(path, "/consumequeue/") {
			return tg.MaybeError(op, path)
		}
		return nil
	}))
	cfg := testConfig(t, fs)
	cfg.PersistInterval = time.Hour
	sa := filled(t, cfg, 10)
	tg.Arm(vfs.OpWrite, vfs.OpCreate, vfs.OpTruncate)
	_, err := sa.Put(msg("t", 0, 10, "", ""))
	require.NoError(t, err)
	persisted := make(chan error, 1)
	go func() { persisted <- sa.Persist() }()
	require.Eventually(t, sa.DiskFull, 5*time.Second, 5*time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- sa.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs while a write waits for space")
	}
	require.True(t, vfs.IsNoSpace(<-persisted))

	tg.Disarm()
	sa = openSA(t, cfg)
	defer sa.Close()
	got, err := sa.GetMessages("t", 0, 0, 64, 1<<20, nil)
	require.NoError(t, err)
	require.Len(t, got.Records, 11)
}

// A store reopened on a full disk opens, says it is full, refuses writes
// and serves reads; once space frees it takes writes again. The queue has
// 500 units in files of 4,096, so its file grew to 816 units and its last
// page is a hole, which recovery must not read through the mapping (a
// SIGBUS on tmpfs).
func TestReopenOnFullTmpfs(t *testing.T) {
	dir := vfstest.SmallTmpfs(t, 16<<20)
	cfg := testConfig(t, vfs.Default())
	cfg.Dir = dir + "/n1"
	cfg.SegmentSize = 1 << 20
	cfg.CQUnitsPerFile = 4096
	const n = 500
	sa := filled(t, cfg, n)
	require.NoError(t, sa.Close())
	ballast := vfstest.FillDisk(t, dir)

	sa = openSA(t, cfg)
	require.True(t, sa.DiskFull())
	_, err := sa.Put(msg("t", 0, n, "", ""))
	require.ErrorIs(t, err, ErrDiskFull)
	got, err := sa.GetMessages("t", 0, 0, 2*n, 1<<20, nil)
	require.NoError(t, err)
	require.Len(t, got.Records, n)

	require.NoError(t, os.Remove(ballast))
	require.Eventually(t, func() bool { return !sa.DiskFull() }, 2*time.Second, 10*time.Millisecond)
	_, err = sa.Put(msg("t", 0, n, "", ""))
	require.NoError(t, err)
	require.NoError(t, sa.Close())
}

// A checkpoint whose SyncFS finds no space (power-loss mode reports a full
// device at sync) is not fatal: Apply goes on, the store counts as full,
// and the checkpoint is taken again until it is written, with nothing
// more to apply meanwhile. Then everything applied survives a reopen.
func TestCheckpointWaitsForSpaceAtSync(t *testing.T) {
	mem := vfs.NewMem()
	tg := &vfs.Toggle{Err: vfs.ErrNoSpace}
	var dir string
	fs := vfs.WithErrors(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if path == dir { // SyncFS only, not the log's syncs
			return tg.MaybeError(op, path)
		}
		return nil
	}))
	cfg := testConfig(t, fs)
	dir = cfg.Dir
	cfg.PersistInterval = 5 * time.Millisecond
	sa := filled(t, cfg, 10)
	tg.Arm(vfs.OpSync)
	time.Sleep(2 * cfg.PersistInterval)
	_, err := sa.Put(msg("t", 0, 10, "", "")) // kicks a checkpoint, which fails
	require.NoError(t, err)
	require.Eventually(t, sa.DiskFull, 5*time.Second, 5*time.Millisecond, "a checkpoint without space does not make the store full")
	_, err = sa.Put(msg("t", 0, 11, "", ""))
	require.ErrorIs(t, err, ErrDiskFull)
	require.Contains(t, err.Error(), "checkpoint is waiting for space")
	// A committed entry (as a follower applies it) is still applied.
	applyCommitted(t, sa, msg("t", 0, 11, "", ""))

	applied := sa.AppliedIndex()
	tg.Disarm()
	require.Eventually(t, func() bool { return !sa.DiskFull() }, 5*time.Second, 5*time.Millisecond, "checkpoints not retried after space was freed")
	sa.Store.state.mu.Lock()
	persisted := sa.Store.state.persisted
	sa.Store.state.mu.Unlock()
	require.Equal(t, applied, persisted, "the retried checkpoint does not cover what was applied")
	_, err = sa.Put(msg("t", 0, 12, "", ""))
	require.NoError(t, err)
	require.NoError(t, sa.Close())

	sa = openSA(t, cfg)
	defer sa.Close()
	got, err := sa.GetMessages("t", 0, 0, 64, 1<<20, nil)
	require.NoError(t, err)
	require.Len(t, got.Records, 13)
}

// applyCommitted appends msgs as one entry and applies it, without the
// send path's space check: a committed entry a node must apply.
func applyCommitted(t *testing.T, sa *Standalone, msgs ...*message.Message) {
	t.Helper()
	for _, m := range msgs {
		sa.StoreStamp(m)
	}
	body, err := EncodeMessages(1<<40, msgs)
	require.NoError(t, err)
	sa.mu.Lock()
	defer sa.mu.Unlock()
	idx := sa.clog.LastIndex() + 1
	require.NoError(t, sa.w.AppendSync(commitlog.Entry{Index: idx, Term: 1, Data: body}))
	_, err = sa.Apply(idx)
	require.NoError(t, err, "a committed entry is not applied while a checkpoint waits for space")
}
