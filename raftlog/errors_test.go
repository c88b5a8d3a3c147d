package raftlog

import (
	"path"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/vfs"
)

// stateFileFS counts the state files opened through it and not closed yet.
type stateFileFS struct {
	vfs.FS
	open atomic.Int64
}

func (t *stateFileFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := t.FS.OpenReadWrite(name)
	if err != nil || path.Base(name) != stateName {
		return f, err
	}
	t.open.Add(1)
	return &stateFile{File: f, fs: t}, nil
}

type stateFile struct {
	vfs.File
	fs     *stateFileFS
	closed bool
}

func (f *stateFile) Close() error {
	if !f.closed {
		f.closed = true
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

// OpenStorage closes the state file on every error path after opening it.
func TestOpenStorageClosesStateFileOnError(t *testing.T) {
	openLog := func(t *testing.T, fs vfs.FS) *commitlog.Log {
		l, err := commitlog.Open(fs, "/n/log", commitlog.Options{SegmentSize: 4096})
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		return l
	}
	for _, tc := range []struct {
		name string
		// setup prepares fs and returns the FS to open the storage through
		// (its state file count is checked) and the error expected.
		setup func(t *testing.T, mem *vfs.MemFS) (vfs.FS, error)
	}{
		{"state file corrupt", func(t *testing.T, mem *vfs.MemFS) (vfs.FS, error) {
			require.NoError(t, mem.MkdirAll("/n", 0o755))
			f, err := mem.Create("/n/" + stateName)
			require.NoError(t, err)
			_, err = f.WriteAt(make([]byte, 100), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			return mem, ErrStateCorrupt
		}},
		{"sync dir fails", func(t *testing.T, mem *vfs.MemFS) (vfs.FS, error) {
			var tg vfs.Toggle
			tg.Arm(vfs.OpSyncDir)
			return vfs.WithErrors(mem, &tg), vfs.ErrInjected
		}},
		{"log starts after the compaction point", func(t *testing.T, mem *vfs.MemFS) (vfs.FS, error) {
			s, l := openStorage(t, mem)
			require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(4)}))
			require.NoError(t, s.Append(ents(1, 200, 4)))
			require.NoError(t, s.Close())
			// Segments dropped behind the storage's back: the state file
			// still says nothing was compacted.
			_, err := l.DropPrefix(150)
			require.NoError(t, err)
			require.Greater(t, l.FirstIndex(), uint64(1))
			require.NoError(t, l.Close())
			return mem, commitlog.ErrCorrupt
		}},
		{"state term behind the log", func(t *testing.T, mem *vfs.MemFS) (vfs.FS, error) {
			s, l := openStorage(t, mem)
			require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(3)}))
			require.NoError(t, s.Append(ents(1, 10, 3)))
			require.NoError(t, s.Append(ents(11, 12, 5)))
			require.NoError(t, s.Close())
			require.NoError(t, l.Close())
			return mem, ErrStateCorrupt
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fs, want := tc.setup(t, mem)
			l := openLog(t, mem)
			tfs := &stateFileFS{FS: fs}
			s, err := OpenStorage(tfs, "/n", l)
			require.ErrorIs(t, err, want)
			require.Nil(t, s)
			require.Zero(t, tfs.open.Load(), "state file left open")
			w, err := l.Writer()
			require.NoError(t, err, "the log's writer left taken")
			w.Release()
		})
	}

	// The success path keeps it open until Close.
	mem := vfs.NewMem()
	l := openLog(t, mem)
	tfs := &stateFileFS{FS: mem}
	s, err := OpenStorage(tfs, "/n", l)
	require.NoError(t, err)
	require.Equal(t, int64(1), tfs.open.Load())
	require.NoError(t, s.Close())
	require.Zero(t, tfs.open.Load())
}

// NewNode returns the storage's error when InitialState or LastIndex fails
// (a closed storage), instead of ignoring it and letting raft panic on it.
func TestNewNodeStorageError(t *testing.T) {
	for _, applied := range []uint64{0, 5} {
		fs := vfs.NewMem()
		s, l := openStorage(t, fs)
		require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(1)}))
		require.NoError(t, s.Append(ents(1, 10, 1)))
		require.NoError(t, s.Close())

		_, _, err := s.InitialState()
		require.ErrorIs(t, err, ErrClosed)
		_, err = s.LastIndex()
		require.ErrorIs(t, err, ErrClosed)
		_, err = s.FirstIndex()
		require.ErrorIs(t, err, ErrClosed)

		var n *Node
		require.NotPanics(t, func() {
			n, err = NewNode(Config{ID: 1, Storage: s, Applied: applied, Bootstrap: []raft.Peer{{ID: 1}}})
		}, "applied %d", applied)
		require.ErrorIs(t, err, ErrClosed, "applied %d", applied)
		require.Nil(t, n)
		require.NoError(t, l.Close())
	}
}
