package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/jepsen"
	"github.com/raftmq/raftmq/jepsen/history"
)

// jepsenRun runs `raftmq jepsen run` in proxy mode (no namespace needed;
// the harness's own tests cover netns mode) with real broker processes (the
// test binary acting as raftmq) and returns the exit status.
func jepsenRun(t *testing.T, out string, args ...string) int {
	t.Helper()
	t.Setenv("RAFTMQ_TEST_MAIN", "1") // the brokers it starts run main()
	base := []string{"jepsen", "run", "--net", "proxy", "--out", out, "--base-port", fmt.Sprint(freeBasePort(t)),
		"--time-limit", "12s", "--interval", "2s", "--rate", "150"}
	err := run(t, append(base, args...)...)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	t.Fatalf("jepsen run: %v", err)
	return -1
}

func loadResults(t *testing.T, dir string) history.Results {
	t.Helper()
	res, err := jepsen.Check(dir, nil) // also proves offline re-checking works
	require.NoError(t, err)
	return res
}

// A correct group under kills and partitions: exit 0, every checker valid,
// the report written, and the history really exercised faults.
func TestJepsenRunCorrectBuildIsValid(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 12 s campaign")
	}
	out := filepath.Join(t.TempDir(), "run")
	code := jepsenRun(t, out, "--nemesis", "kill-leader,partition", "--workload", "queue", "--seed", "3")
	require.Equal(t, exitValid, code, "a correct build must not be flagged; see %s", out)
	res := loadResults(t, out)
	require.True(t, res.Valid)
	require.Greater(t, res.Ops["send.ok"], int64(200), "the workload must have run")
	require.Greater(t, res.Faults["kill"]+res.Faults["partition"], int64(0), "faults must have been injected")
	for _, f := range []string{history.ReportFile, history.ResultsFile, history.ReplicasFile, "linearizability.html"} {
		_, err := os.Stat(filepath.Join(out, f))
		require.NoError(t, err, f)
	}
}

// A broker that acknowledges before a quorum has the data loses
// acknowledged sends when its leader is isolated: exit 1, lost > 0.
func TestJepsenRunCatchesAckBeforeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 12 s campaign")
	}
	out := filepath.Join(t.TempDir(), "run")
	code := jepsenRun(t, out, "--nemesis", "partition-leader", "--workload", "queue", "--seed", "1", "--mutant", "ack-before-commit")
	require.Equal(t, exitViolation, code, "the mutant must be caught; see %s", out)
	res := loadResults(t, out)
	require.False(t, res.Valid)
	require.Greater(t, res.Checkers["total-queue"].Counts["lost"], int64(0))
}

// Bad input is a harness failure (exit 2), not a verdict.
func TestJepsenRunRejectsBadInput(t *testing.T) {
	err := run(t, "jepsen", "run", "--net", "proxy", "--nemesis", "earthquake", "--out", t.TempDir())
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, exitHarness, ee.code)
	err = run(t, "jepsen", "check", t.TempDir())
	require.ErrorAs(t, err, &ee)
	require.Equal(t, exitHarness, ee.code)
}
