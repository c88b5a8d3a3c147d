package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/localgroup"
)

// TestBrokerOnAnotherGroupsDataRefuses runs two groups as real processes,
// as `raftmq cluster` does (each with its own random cluster ID): group
// A's node 1 data directory, copied over group B's node 3's, makes B's
// node 3 exit with status 4 and a log line naming both IDs, while B's two
// other nodes keep taking sends. Before the cluster ID, that node started
// and served A's data.
func TestBrokerOnAnotherGroupsDataRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	env := []string{"RAFTMQ_TEST_MAIN=1"}
	base := freeBasePort(t)
	ga := localgroup.New(localgroup.Config{Binary: os.Args[0], Env: env, Dir: t.TempDir(), BasePort: base, Nodes: 1,
		Args: []string{"--segment-size", "8388608", "--tick", "20ms"}})
	require.NoError(t, ga.Start())
	defer ga.StopAll()
	_, err := ga.WaitLeader(20 * time.Second)
	require.NoError(t, err)
	baseB := freeBasePort(t) // while A holds its ports
	require.NoError(t, ga.StopAll())

	gb := localgroup.New(localgroup.Config{Binary: os.Args[0], Env: env, Dir: t.TempDir(), BasePort: baseB, Nodes: 3,
		Args: []string{"--segment-size", "8388608", "--tick", "20ms"}})
	require.NoError(t, gb.Start())
	defer gb.StopAll()
	_, err = gb.WaitLeader(20 * time.Second)
	require.NoError(t, err)
	require.NotEqual(t, ga.ClusterID(), gb.ClusterID())
	require.NotEmpty(t, ga.ClusterID())

	require.NoError(t, gb.Stop(3, 10*time.Second))
	n3 := gb.Node(3)
	require.NoError(t, os.RemoveAll(n3.Dir))
	require.NoError(t, os.CopyFS(n3.Dir, os.DirFS(ga.Node(1).Dir)))
	require.NoError(t, os.Remove(filepath.Join(n3.Dir, "broker.log"))) // A's log
	require.NoError(t, gb.StartNode(3))
	require.Eventually(t, func() bool { return !n3.Running() }, 20*time.Second, 20*time.Millisecond, "node 3 did not refuse to start")
	require.Equal(t, exitOtherCluster, n3.ExitCode())
	log, err := os.ReadFile(n3.LogPath)
	require.NoError(t, err)
	require.Contains(t, string(log), ga.ClusterID(), "the refusal names the directory's cluster")
	require.Contains(t, string(log), gb.ClusterID(), "the refusal names the node's cluster")
	t.Log(strings.TrimSpace(localgroup.Tail(n3.LogPath, 2)))

	cl, err := client.New(client.Options{Addrs: gb.Addrs()[:2]})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := cl.NewProducer(client.ProducerOptions{Group: "P"})
	for range 5 {
		_, err := p.Send(ctx, &client.Message{Topic: "demo", Body: []byte("x")})
		require.NoError(t, err)
	}
}
