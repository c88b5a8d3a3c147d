package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// store inspect --json: the report scripts read, with problems listed and
// ok false once a synced entry is corrupt.
func TestStoreInspectJSON(t *testing.T) {
	node := filepath.Join(t.TempDir(), "n1")
	require.NoError(t, run(t, "store", "demo", "--data", node, "--messages", "300", "--size", "100"))
	inspect := func() (map[string]any, error) {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetArgs([]string{"store", "inspect", "--json", node})
		err := root.Execute()
		var rep map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &rep), "%s", out.String())
		return rep, err
	}
	rep, err := inspect()
	require.NoError(t, err)
	require.Equal(t, true, rep["ok"])
	cl := rep["commitlog"].(map[string]any)
	require.EqualValues(t, 300, cl["messages"])
	require.NotEmpty(t, cl["segments"])
	require.NotEmpty(t, rep["consumeQueues"])
	require.NotNil(t, rep["meta"])

	seg := filepath.Join(node, "commitlog", "00000000000000000000")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xAB, 0xCD}, 500)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	rep, err = inspect()
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.code)
	require.Equal(t, false, rep["ok"])
	problems := rep["problems"].([]any)
	require.NotEmpty(t, problems)
	require.Contains(t, problems[0], seg)
}

// A long scan prints progress lines, then its final figures.
func TestScanProgress(t *testing.T) {
	var out bytes.Buffer
	p := newScanProgress(&out, 0)
	for i := 1; i <= 3*1024; i++ {
		p.update(i, int64(i)<<10)
	}
	p.done()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, "one per 1,024 entries with no interval, then the final line")
	require.Contains(t, lines[3], "3072 entries, 3 MiB scanned")

	out.Reset()
	p = newScanProgress(&out, time.Hour)
	for i := 1; i <= 4096; i++ {
		p.update(i, int64(i))
	}
	p.done()
	require.Empty(t, out.String(), "a short scan prints nothing")
}
