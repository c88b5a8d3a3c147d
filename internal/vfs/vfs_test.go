package vfs

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemFSCrashKeepsOnlySynced(t *testing.T) {
	m := NewMem()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	f, err := m.Create("/d/a")
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("synced"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir("/d"))
	_, err = f.WriteAt([]byte("-lost"), 6)
	require.NoError(t, err)
	g, err := m.Create("/d/b") // never dir-synced
	require.NoError(t, err)
	require.NoError(t, g.Sync())

	c := m.CrashClone(rand.New(rand.NewPCG(1, 1)), 0)
	b, err := ReadFile(c, "/d/a")
	require.NoError(t, err)
	require.Equal(t, "synced", string(b))
	_, err = c.Stat("/d/b")
	require.ErrorIs(t, err, ErrNotExist, "a file whose directory entry was never synced is lost")

	c = m.CrashClone(rand.New(rand.NewPCG(1, 1)), 1)
	b, err = ReadFile(c, "/d/a")
	require.NoError(t, err)
	require.Equal(t, "synced-lost", string(b), "keep=1 keeps unsynced writes")
}

func TestWriteFileAtomicAndReadOnly(t *testing.T) {
	for _, fs := range []FS{NewMem(), Default()} {
		dir := t.TempDir()
		if _, ok := fs.(*MemFS); ok {
			dir = "/x"
			require.NoError(t, fs.MkdirAll(dir, 0o755))
		}
		require.NoError(t, WriteFileAtomic(fs, dir, "f", []byte("one")))
		require.NoError(t, WriteFileAtomic(fs, dir, "f", []byte("two")))
		b, err := ReadFile(fs, Join(dir, "f"))
		require.NoError(t, err)
		require.Equal(t, "two", string(b))
		ro := ReadOnly(fs)
		err = WriteFileAtomic(ro, dir, "f", []byte("three"))
		require.True(t, errors.Is(err, ErrReadOnly))
		names, err := ro.List(dir)
		require.NoError(t, err)
		require.Equal(t, []string{"f"}, names)
	}
}

func TestMemFSCapacity(t *testing.T) {
	m := NewMem()
	m.SetCapacity(100)
	f, err := m.Create("/a")
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 80), 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 30), 80)
	require.ErrorIs(t, err, ErrNoSpace)
	u, err := m.DiskUsage("/")
	require.NoError(t, err)
	require.InDelta(t, 0.8, u.UsedRatio(), 0.001)
}

func TestSyncFSMakesEverythingDurable(t *testing.T) {
	m := NewMem()
	require.NoError(t, m.MkdirAll("/d/e", 0o755))
	f, err := m.Create("/d/a")
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("written"), 0)
	require.NoError(t, err)
	g, err := m.Create("/d/e/b") // no File.Sync, no SyncDir
	require.NoError(t, err)
	_, err = g.WriteAt([]byte("too"), 0)
	require.NoError(t, err)
	require.NoError(t, m.Remove("/d/a"))
	h, err := m.Create("/d/a2")
	require.NoError(t, err)
	_, err = h.WriteAt([]byte("renamed"), 0)
	require.NoError(t, err)
	require.NoError(t, m.SyncFS("/d"))
	_, err = h.WriteAt([]byte("-after"), 7) // after the SyncFS: may be lost
	require.NoError(t, err)

	c := m.CrashClone(rand.New(rand.NewPCG(1, 1)), 0)
	b, err := ReadFile(c, "/d/e/b")
	require.NoError(t, err)
	require.Equal(t, "too", string(b))
	b, err = ReadFile(c, "/d/a2")
	require.NoError(t, err)
	require.Equal(t, "renamed", string(b), "data written after SyncFS is not durable")
	_, err = c.Stat("/d/a")
	require.ErrorIs(t, err, ErrNotExist, "a removal before SyncFS is durable")

	// The operating system's: syncfs(2) on a real directory succeeds.
	require.NoError(t, Default().SyncFS(t.TempDir()))
	require.Error(t, Default().SyncFS("/nonexistent/raftmq"))
}

// The used fraction is df's Use%: blocks reserved for root count as
// neither used nor available.
func TestUsedRatioLikeDF(t *testing.T) {
	u := DiskUsage{Total: 100, Free: 81, Used: 14} // 5 blocks reserved
	require.InDelta(t, 14.0/95, u.UsedRatio(), 1e-9)
	require.Zero(t, DiskUsage{}.UsedRatio())
	os, err := Default().DiskUsage(t.TempDir())
	require.NoError(t, err)
	require.LessOrEqual(t, os.Used+os.Free, os.Total)
	require.InDelta(t, float64(os.Used)/float64(os.Used+os.Free), os.UsedRatio(), 1e-9)
}
