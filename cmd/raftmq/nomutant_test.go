package main

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/jepsen"
)

// goTool is the go command that builds binaries in tests.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Skip("no go command to build raftmq with")
	}
	return p
}

// mutantProbes are what only a mutant build may contain: the failpoints'
// names (read from the name table's source; the default build's stubs of
// the failpoints carry them too, so they prove the stubs were dropped),
// strings of hooks that the default build must compile out, and the
// functions of the failpoints and of the fault endpoint.
func mutantProbes(t *testing.T) (strs, syms []string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "internal", "failpoint", "on.go"))
	require.NoError(t, err)
	names := regexp.MustCompile(`(?m)^\t\t[A-Za-z]+: +"([a-z-]+)",$`).FindAllSubmatch(src, -1)
	require.GreaterOrEqual(t, len(names), 15, "the failpoint names in internal/failpoint/on.go")
	for _, m := range names {
		// The read-consistency checker (jepsen/checker) also counts
		// "uncommitted-reads": the word, not the mutant.
		if n := string(m[1]); n != "uncommitted-reads" {
			strs = append(strs, n)
		}
	}
	strs = append(strs,
		"failpoint: unknown mutant",                  // failpoint.Parse of the name table
		"MUTANT broker: known-bad behaviours are on", // cluster.Start's warning
		"cluster: fault injected",                    // the fault endpoint's log line
	)
	syms = []string{
		"github.com/raftmq/raftmq/internal/failpoint.Parse",
		"github.com/raftmq/raftmq/cluster.(*skewClock).Now",
		"github.com/raftmq/raftmq/cluster.(*memOffsets).set",
		"github.com/raftmq/raftmq/cluster.(*memOffsets).get",
		"github.com/raftmq/raftmq/cluster.(*Broker).forgetMembers",
		"github.com/raftmq/raftmq/cluster.(*Broker).ackInMemory",
		"github.com/raftmq/raftmq/cluster.(*Broker).popBeforeCommit",
		"github.com/raftmq/raftmq/cluster.(*Broker).injectFault",
		"github.com/raftmq/raftmq/cluster.uncommittedReads",
		"github.com/raftmq/raftmq/store.(*Store).UncommittedRecords",
		"main.readdedNodeCrash",
	}
	return strs, syms
}

// found returns the probes that occur in the binary at path.
func found(t *testing.T, path string, strs, syms []string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, s := range strs {
		if bytes.Contains(data, []byte(s)) {
			out = append(out, "string "+s)
		}
	}
	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	symbols, err := f.Symbols()
	require.NoError(t, err)
	have := map[string]bool{}
	for _, s := range symbols {
		have[s.Name] = true
	}
	for _, s := range syms {
		if have[s] {
			out = append(out, "symbol "+s)
		}
	}
	return out
}

// The default build (go build ./cmd/raftmq) contains no mutant and no
// fault endpoint, and refuses the flags that would turn them on with a
// clear error; the mutant build contains every probe, so the probes are
// real.
func TestDefaultBinaryHasNoMutant(t *testing.T) {
	start := time.Now()
	bin := filepath.Join(t.TempDir(), "raftmq")
	build := exec.Command(goTool(t), "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	strs, syms := mutantProbes(t)
	require.Empty(t, found(t, bin, strs, syms), "the default binary contains mutant code")

	for _, flag := range [][]string{{"--mutant", "no-dedupe"}, {"--fault-endpoint"}} {
		cmd := exec.Command(bin, append([]string{"broker", "--id", "1", "--peer", "1=127.0.0.1:1/127.0.0.1:2", "--data", t.TempDir()}, flag...)...)
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "broker %v must refuse to start", flag)
		require.Contains(t, string(out), "this binary was built without -tags mutant", "broker %v", flag)
		require.Contains(t, string(out), flag[0])
	}

	if testing.Short() {
		return
	}
	// The positive control: the mutant build has them all.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mbin, err := jepsen.BuildMutantBinary(ctx, nil)
	require.NoError(t, err)
	got := found(t, mbin, strs, syms)
	require.Len(t, got, len(strs)+len(syms), "the mutant build lacks some probes: has only %s", strings.Join(got, "; "))
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}
