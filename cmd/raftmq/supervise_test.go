package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer collects a process's output for the test to read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// startClusterCmd runs `raftmq cluster` (the test binary as raftmq).
func startClusterCmd(t *testing.T, dir string, base int, demo int, extra ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	args := append([]string{"cluster", "--data", dir, "--base-port", strconv.Itoa(base), "--demo", strconv.Itoa(demo)}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RAFTMQ_TEST_MAIN=1")
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	return cmd, out
}

// brokerPID finds the broker process whose data directory is dir.
func brokerPID(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i, a := range args {
			if a == "--data" && i+1 < len(args) && args[i+1] == dir {
				return pid
			}
		}
	}
	return 0
}

func stopClusterCmd(t *testing.T, cmd *exec.Cmd, out *syncBuffer) {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("raftmq cluster did not stop within 30 s:\n%s", out.String())
	}
}

// TestClusterSupervisesNodes: `raftmq cluster` restarts a node killed with
// SIGKILL, and with a node whose data is corrupt it runs the two healthy
// ones (a quorum), says which node and why, and does not restart it.
func TestClusterSupervisesNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir, base := t.TempDir(), freeBasePort(t)
	cmd, out := startClusterCmd(t, dir, base, 50)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "read 50 of them back") }, 30*time.Second, 50*time.Millisecond, out.String())
	n2 := filepath.Join(dir, "n2")
	pid := brokerPID(t, n2)
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "group 1 node 2 restarted") }, 15*time.Second, 50*time.Millisecond, out.String())
	require.Eventually(t, func() bool { p := brokerPID(t, n2); return p != 0 && p != pid }, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(lastStatusLine(out.String()), "n2 follower") }, 15*time.Second, 100*time.Millisecond,
		"the restarted node rejoins: %s", out.String())
	stopClusterCmd(t, cmd, out)

	// Corrupt node 3's log: a synced entry fails its CRC, so it refuses
	// to start (exit 3).
	segs, err := filepath.Glob(filepath.Join(dir, "n3", "commitlog", "0*"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("GARBAGE-GARBAGE-GARBAGE"), 300)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	cmd, out = startClusterCmd(t, dir, base, 50)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "read 50 of them back") }, 30*time.Second, 50*time.Millisecond, out.String())
	require.Contains(t, out.String(), "group 1 node 3 exited (exit status 3); not restarted: its data is corrupt")
	time.Sleep(2 * time.Second)
	require.Nil(t, cmd.ProcessState, "the supervisor is still running")
	require.NotZero(t, brokerPID(t, filepath.Join(dir, "n1")))
	require.NotZero(t, brokerPID(t, filepath.Join(dir, "n2")))
	require.NotContains(t, out.String(), "node 3 restarted")
	stopClusterCmd(t, cmd, out)
}

// lastStatusLine returns the last status line the cluster command printed.
func lastStatusLine(out string) string {
	lines := strings.Split(strings.ReplaceAll(out, "\r", "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], " leader n") && strings.Contains(lines[i], " | ") {
			return lines[i]
		}
	}
	return ""
}
