package cluster

import (
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requirePrivate walks dir and requires every directory in it to be
// 0700 and every file 0600 (vfs.DirMode, vfs.FileMode); it returns how
// many files it saw.
func requirePrivate(t *testing.T, dir string) int {
	t.Helper()
	files := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			files++
		}
		require.Equal(t, want.String(), fi.Mode().Perm().String(), "%s", path)
		return nil
	}))
	return files
}

// Every file and directory of a node's store is its owner's only: the
// commitlog, consume queues, index, the bbolt state, the raft state, and
// the snapshot a lagging node installs.
func TestStoreFilesPrivate(t *testing.T) {
	g := newGroup(t, 13)
	_, lag, at := g.compactPastFollower(t, "-key%d", true)
	g.start(lag)
	g.waitConverged(15 * time.Second)
	require.Greater(t, g.rep(lag).Store().Log().FirstIndex(), at, "the lagging node must have installed a snapshot")
	for id := uint64(1); id <= 3; id++ {
		g.stop(id)
	}
	for id := uint64(1); id <= 3; id++ {
		require.Greater(t, requirePrivate(t, g.dirs[id]), 5, "node %d's store", id)
	}
}
