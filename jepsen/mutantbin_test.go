package jepsen

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Only runs with a mutant or the clock nemesis start the mutant build,
// and only they get the fault endpoint.
func TestBrokerBinary(t *testing.T) {
	require.False(t, NeedsMutantBuild("", []string{NemKill, NemPartition, NemPowerLoss}))
	require.True(t, NeedsMutantBuild("no-dedupe", nil))
	require.True(t, NeedsMutantBuild("", []string{NemKill, NemClock}))

	o := Options{Binary: "/bin/raftmq", MutantBinary: "/bin/raftmq-mutant", Nemesis: []string{NemKill}}
	bin, faults, err := o.brokerBinary(context.Background())
	require.NoError(t, err)
	require.Equal(t, "/bin/raftmq", bin)
	require.False(t, faults)

	o.Nemesis = []string{NemClock}
	bin, faults, err = o.brokerBinary(context.Background())
	require.NoError(t, err)
	require.Equal(t, "/bin/raftmq-mutant", bin)
	require.True(t, faults)
}

// The source tree BuildMutantBinary builds is found from the working
// directory (a test runs in its package's directory) and only for this
// module.
func TestSourceTree(t *testing.T) {
	dir, err := sourceTree()
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "cmd", "raftmq", "main.go"))
	require.NoError(t, err)

	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(other, "sub"), 0o755))
	_, ok := moduleRoot(filepath.Join(other, "sub"))
	require.False(t, ok)
}
