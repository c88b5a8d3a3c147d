package main

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/harness/bench"
	"github.com/raftmq/raftmq/harness/localgroup"
)

// The test binary doubles as the raftmq binary for the broker processes
// the process-level tests start.
func TestMain(m *testing.M) {
	if os.Getenv("RAFTMQ_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// freeBasePort finds a base port whose group ports (client, raft, HTTP
// and gRPC of three nodes) and the extra offsets look free.
func freeBasePort(t *testing.T, extra ...int) int {
	offs := append([]int{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, extra...)
	// Below the kernel's ephemeral range (32768 and up by default), where
	// any outgoing connection of another process may take a port between
	// this check and the group's listen.
	start := os.Getpid() % 1200 * 10
	for i := range 130 {
		base := 20000 + (start+i*97)%12600
		ok := true
		for _, off := range offs {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+off)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free ports")
	return 0
}

// TestKillLeaderUnderLoad runs three real broker processes, kills the
// leader with SIGKILL three times under load, restarts it each time, and
// checks that every acknowledged send is on every node at its offset,
// nothing is duplicated, and the logs are byte-identical.
func TestKillLeaderUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	g := localgroup.New(localgroup.Config{Binary: os.Args[0], Env: []string{"RAFTMQ_TEST_MAIN=1"}, Dir: t.TempDir(),
		BasePort: freeBasePort(t), Args: []string{"--segment-size", "8388608"}})
	require.NoError(t, g.Start())
	defer g.StopAll()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := bench.Failover(ctx, g, 3, 4, nil)
	require.NoError(t, err)
	t.Log(r.String())
	require.Equal(t, 3, r.Kills)
	require.Greater(t, r.Acked, 100)
	require.Zero(t, r.Lost)
	require.Zero(t, r.Duplicated)
	require.True(t, r.LogsAgree, r.Problem)
}
