package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func run(t *testing.T, args ...string) error {
	t.Helper()
	root := newRoot()
	root.SetArgs(args)
	return root.Execute()
}

// The single-node store demo, then inspect, export and import, as a user runs them.
func TestDemoInspectExportImport(t *testing.T) {
	data := t.TempDir()
	node := filepath.Join(data, "n1")
	require.NoError(t, run(t, "store", "demo", "--data", node, "--messages", "200", "--size", "100"))
	require.NoError(t, run(t, "store", "demo", "--data", node, "--messages", "50", "--size", "100"), "a second run continues")
	require.NoError(t, run(t, "store", "inspect", node))

	out := t.TempDir()
	require.NoError(t, run(t, "admin", "export-config", "--data", node, out))
	for _, f := range []string{"topics.json", "consumerOffset.json", "subscriptionGroup.json"} {
		_, err := os.Stat(filepath.Join(out, f))
		require.NoError(t, err)
	}
	fresh := t.TempDir()
	require.NoError(t, run(t, "admin", "import-config-offline", "--data", fresh, out))

	// Corrupt a synced entry: inspect exits 1 and says where.
	seg := filepath.Join(node, "commitlog", "00000000000000000000")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xAB, 0xCD}, 500)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	err = run(t, "store", "inspect", node)
	var ee *exitError
	require.True(t, errors.As(err, &ee), "got %v", err)
	require.Equal(t, 1, ee.code)
	// And the node refuses to start rather than serve or cut it.
	err = run(t, "store", "demo", "--data", node, "--messages", "1")
	require.ErrorContains(t, err, "corrupt")
}

// --log-format json writes one JSON object per line; --log-level and -v
// set the level, which the LevelVar changes at runtime.
func TestLogFlags(t *testing.T) {
	var buf bytes.Buffer
	lv := new(slog.LevelVar)
	l, err := newLogger(&buf, "warn", "json", false, lv)
	require.NoError(t, err)
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	lv.Set(slog.LevelDebug)
	l.Debug("now shown")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, buf.String())
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &rec))
	require.Equal(t, "WARN", rec["level"])
	require.Equal(t, "shown", rec["msg"])
	require.Equal(t, 1.0, rec["k"])

	buf.Reset()
	l, err = newLogger(&buf, "error", "text", true, lv)
	require.NoError(t, err)
	l.Debug("verbose wins")
	require.Contains(t, buf.String(), "level=DEBUG msg=\"verbose wins\"")
	_, err = newLogger(&buf, "info", "xml", false, lv)
	require.Error(t, err)
}
