package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// captureStdout runs f with os.Stdout sent to a pipe and returns what it
// printed.
func captureStdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	ferr := f()
	os.Stdout = old
	require.NoError(t, w.Close())
	return string(<-done), ferr
}

// bench limits --limits FILE --against FILE, as scripts/limits.sh runs it:
// a saved measurement and two produce runs, each stated against its limit.
func TestBenchLimitsAgainst(t *testing.T) {
	dir := t.TempDir()
	limits := filepath.Join(dir, "limits.json")
	runs := filepath.Join(dir, "runs.jsonl")
	require.NoError(t, os.WriteFile(limits, []byte(`{"dir":"/d","seconds":3,"syncSize":4096,"syncs":3000,"syncP50us":150,"syncP99us":900,`+
		`"seqSize":1048576,"seqWrites":300,"seqMBps":300,"rttSize":1024,"rttPeer":"process","rtts":9000,"rttP50us":25,"rttP99us":80}`+"\n"), 0o644))
	require.NoError(t, os.WriteFile(runs, []byte(
		`{"mode":"produce one at a time","messages":9000,"p50ms":0.8,"size":1024,"window":1,"batch":1}`+"\n"+
			`{"mode":"produce pipelined","messages":500000,"msgsPerSec":48828,"mbPerSec":50,"size":1024,"window":1000,"batch":1,"autoBatch":true}`+"\n"), 0o644))
	out, err := captureStdout(t, func() error { return run(t, "bench", "limits", "--limits", limits, "--against", runs) })
	require.NoError(t, err)
	require.Contains(t, out, "floor of one send at a time (fdatasync p50 + 2 round trips p50): 0.200 ms")
	require.Contains(t, out, "ceiling of pipelined sends (bandwidth / 3 replicas on one disk): 100.0 MB/s")
	require.Contains(t, out, "window 1: p50 0.800 ms against a floor of 0.200 ms: 0.25 of the limit (4.0x the floor)")
	require.Contains(t, out, "window 1000, auto-batch: 48.8 k msgs/s, 50.0 MB/s against a ceiling of 100.0 MB/s")
	require.Contains(t, out, ": 0.50 of the limit")

	// Two replicas on the disk: the ceiling is half the bandwidth.
	out, err = captureStdout(t, func() error { return run(t, "bench", "limits", "--limits", limits, "--replicas", "2") })
	require.NoError(t, err)
	require.Contains(t, out, "bandwidth / 2 replicas on one disk): 150.0 MB/s")

	require.NoError(t, os.WriteFile(runs, []byte("no results here\n"), 0o644))
	_, err = captureStdout(t, func() error { return run(t, "bench", "limits", "--limits", limits, "--against", runs) })
	require.ErrorContains(t, err, "no JSON line of a run")
	_, err = captureStdout(t, func() error { return run(t, "bench", "limits", "--limits", filepath.Join(dir, "missing")) })
	require.Error(t, err)
}
