package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/localgroup"
)

// A node removed from the group notices, says so once and exits 0: a
// follower (which may never learn its removal committed), the same node
// restarted on its old data (the others tell it), and the leader (which
// applies its own removal).
func TestRemovedNodeStops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	var join sync.Map // node id -> start it with --join
	g := localgroup.New(localgroup.Config{Binary: os.Args[0], Env: []string{"RAFTMQ_TEST_MAIN=1"}, Dir: t.TempDir(),
		BasePort: freeBasePort(t), Args: []string{"--segment-size", "8388608"}, NodeArgs: func(id uint64) []string {
			if _, ok := join.Load(id); ok {
				return []string{"--join"}
			}
			return nil
		}})
	require.NoError(t, g.Start())
	defer g.StopAll()
	leader, err := g.WaitLeader(20 * time.Second)
	require.NoError(t, err)
	cl, err := client.New(client.Options{Addrs: g.Addrs()})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	stops := func(id uint64, times int) {
		t.Helper()
		n := g.Node(id)
		require.Eventually(t, func() bool { return !n.Running() }, 30*time.Second, 50*time.Millisecond,
			"node %d keeps running after its removal; log:\n%s", id, localgroup.Tail(n.LogPath, 10))
		require.Equal(t, 0, n.ExitCode(), "node %d: %s", id, n.Exited())
		data, err := os.ReadFile(n.LogPath)
		require.NoError(t, err)
		line := fmt.Sprintf("node %d was removed from the group; stopping", id)
		require.Equal(t, times, strings.Count(string(data), line), "node %d's log:\n%s", id, localgroup.Tail(n.LogPath, 10))
	}

	follower := leader%3 + 1
	require.NoError(t, cl.RemoveNode(ctx, follower))
	stops(follower, 1)
	// Restarted on its data, it is told by the others and stops again.
	require.NoError(t, g.StartNode(follower))
	stops(follower, 2)

	// Wiped and added back under its id, it replays its old removal but
	// is a member again: it keeps running and becomes a voter.
	n := g.Node(follower)
	ents, err := os.ReadDir(n.Dir)
	require.NoError(t, err)
	for _, e := range ents {
		if e.Name() != filepath.Base(n.LogPath) {
			require.NoError(t, os.RemoveAll(filepath.Join(n.Dir, e.Name())))
		}
	}
	require.NoError(t, cl.AddNode(ctx, follower, n.Client, n.Raft))
	join.Store(follower, true)
	require.NoError(t, g.StartNode(follower))
	require.Eventually(t, func() bool {
		st, err := g.Status(leader)
		return err == nil && slices.Contains(st.Status.Voters, follower)
	}, 20*time.Second, 50*time.Millisecond, "the re-added node is promoted")
	time.Sleep(3 * time.Second) // longer than two removal checks
	require.True(t, n.Running(), "the re-added node stopped: %s\n%s", n.Exited(), localgroup.Tail(n.LogPath, 10))

	require.NoError(t, cl.RemoveNode(ctx, leader))
	stops(leader, 1)
	require.Eventually(t, func() bool {
		l, err := g.WaitLeader(time.Second)
		return err == nil && l != leader
	}, 20*time.Second, 50*time.Millisecond, "the two members left elect a leader")
}
