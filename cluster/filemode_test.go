package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/commitlog/message"
	"github.com/raftmq/raftmq/store"
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
	l := g.leader(5 * time.Second)
	createTopic(t, l, "T", 2)
	var lag uint64
	for id := uint64(1); id <= 3; id++ {
		if id != l.cfg.ID {
			lag = id
		}
	}
	g.stop(lag)
	body := strings.Repeat("x", 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3000; i += 50 {
		var ms []*message.Message
		for k := i; k < i+50; k++ {
			ms = append(ms, testMsg("T", int32(k%2), fmt.Sprintf("%d-%s-key%d", k, body, k)))
		}
		_, err := l.Send(ctx, ms)
		require.NoError(t, err)
	}
	require.NoError(t, l.Exec(ctx, &store.Command{Op: store.OpCommitOffsets, Offsets: []store.OffsetCommit{{Group: "g", Topic: "T", QueueID: 1, Offset: 42}}}))
	require.NoError(t, l.Store().Persist())
	at, err := l.rs.Compact(l.Node().Applied())
	require.NoError(t, err)
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
