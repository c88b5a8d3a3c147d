package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/jepsen/history"
)

// fakeMembers stands in for the admin client's membership requests.
type fakeMembers struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeMembers) RemoveNode(_ context.Context, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("remove %d", id))
	return nil
}

func (f *fakeMembers) AddNode(_ context.Context, id uint64, _, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("add %d", id))
	return nil
}

// watchedTest is a test whose three "brokers" are real processes that
// only sleep, with the crash watcher running.
func watchedTest(t *testing.T) (*test, *fakeMembers) {
	t.Helper()
	dir := t.TempDir()
	hw, err := history.Create(filepath.Join(dir, history.HistoryFile))
	require.NoError(t, err)
	nw, err := history.Create(filepath.Join(dir, history.NemesisFile))
	require.NoError(t, err)
	t.Cleanup(func() { hw.Close(); nw.Close() })
	g := localgroup.New(localgroup.Config{
		Binary: "/bin/sh", Prefix: []string{"-c", "exec sleep 600", "sh"},
		Dir: filepath.Join(dir, "nodes"), BasePort: 29700, Nodes: 3,
	})
	members := &fakeMembers{}
	rec := newRecorder(hw, nw)
	tt := &test{rec: rec, g: g}
	tt.env = &env{g: g, rec: rec, rng: rand.New(rand.NewPCG(1, 2)), members: members,
		stopped: map[int]bool{}, corrupted: map[int]bool{}, joinArgs: map[int]bool{},
		log: func(string, ...any) {}}
	require.NoError(t, g.Start())
	stop := tt.watch()
	t.Cleanup(func() {
		stop()
		_ = g.StopAll()
	})
	return tt, members
}

// crashCount returns the cluster-health checker's crash count and errors.
func (t *test) crashCount() (int64, []string) {
	r := t.health()[healthChecker]
	return r.Counts["crashes"], r.Errors
}

// waitCrashes waits until the health checker counts want crashes.
func waitCrashes(t *testing.T, tt *test, want int64) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, errs := tt.crashCount()
		if got == want || time.Now().After(deadline) {
			require.Equal(t, want, got, "crashes counted: %q", errs)
			return errs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A member the membership nemesis removed and added back is watched like
// any other node: the stop of the old process is the harness's, but when
// the new one exits on its own, cluster-health counts a crash. (The
// watcher used to leave a re-added member marked down for the rest of the
// run: a chaos run whose re-added node died of a failed checkpoint reported
// "crashes=0".)
func TestWatchCountsCrashOfReaddedMember(t *testing.T) {
	tt, members := watchedTest(t)
	f, err := tt.env.inject(context.Background(), NemMembership)
	require.NoError(t, err)
	require.NoError(t, f.heal())
	require.Len(t, f.ev.Nodes, 1)
	n := f.ev.Nodes[0]
	require.Equal(t, []string{fmt.Sprintf("remove %d", n), fmt.Sprintf("add %d", n)}, members.calls)
	node := tt.g.Node(uint64(n))
	require.True(t, node.Running(), "the re-added member runs")

	// The removed process's end was the harness's doing: no crash.
	time.Sleep(400 * time.Millisecond)
	waitCrashes(t, tt, 0)

	// The re-added member dies on its own.
	require.NoError(t, syscall.Kill(node.PID(), syscall.SIGKILL))
	errs := waitCrashes(t, tt, 1)
	require.True(t, strings.HasPrefix(errs[0], fmt.Sprintf("n%d exited on its own", n)), errs[0])
}

// The kill nemesis's own kills are not crashes; the process its heal
// starts is watched again.
func TestWatchCountsCrashAfterKillNemesis(t *testing.T) {
	tt, _ := watchedTest(t)
	f, err := tt.env.kill(context.Background(), history.Event{Kind: NemKill}, false, 1)
	require.NoError(t, err)
	n := f.ev.Nodes[0]
	node := tt.g.Node(uint64(n))
	require.False(t, node.Running())
	time.Sleep(400 * time.Millisecond)
	waitCrashes(t, tt, 0)
	require.NoError(t, f.heal())
	require.True(t, node.Running())
	time.Sleep(400 * time.Millisecond)
	waitCrashes(t, tt, 0)

	require.NoError(t, syscall.Kill(node.PID(), syscall.SIGKILL))
	waitCrashes(t, tt, 1)
}

// A node that dies and is restarted by the harness at once (the closing
// heal restarts every node that is down) still counts as a crash, though
// a running node is all the watcher can see by the time it looks.
func TestWatchCountsCrashRestartedAtOnce(t *testing.T) {
	tt, _ := watchedTest(t)
	node := tt.g.Node(2)
	pid := node.PID()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	for node.Running() {
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, tt.env.restart(context.Background(), 2))
	require.True(t, node.Running())
	errs := waitCrashes(t, tt, 1)
	require.Contains(t, errs[0], "n2 exited on its own")
	require.Contains(t, errs[0], "signal: killed")
}
