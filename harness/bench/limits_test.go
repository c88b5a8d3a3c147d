package bench

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The three probes on a real file system and a real loopback socket, kept
// short: each must have measured something, and the floors must follow
// from the probes' figures.
func TestMeasureLimits(t *testing.T) {
	dir := t.TempDir()
	l, err := MeasureLimits(context.Background(), LimitsConfig{Dir: dir, Duration: 100 * time.Millisecond, SeqSize: 256 << 10, SeqMax: 8 << 20})
	require.NoError(t, err)
	require.Positive(t, l.Syncs)
	require.Positive(t, l.SyncP50us)
	require.LessOrEqual(t, l.SyncP50us, l.SyncP99us)
	require.Positive(t, l.SeqWrites)
	require.LessOrEqual(t, l.SeqWrites, 32, "the bandwidth probe wrote past its cap")
	require.Positive(t, l.SeqMBps)
	require.Positive(t, l.RTTs)
	require.LessOrEqual(t, l.RTTP50us, l.RTTP99us)
	require.Equal(t, 4096, l.SyncSize)
	require.Equal(t, "goroutine", l.RTTPeer)
	require.InDelta(t, (l.SyncP50us+2*l.RTTP50us)/1000, l.OneAtATimeFloorMs, 1e-9)
	require.InDelta(t, l.SeqMBps/3, l.PipelinedMBps, 1e-9)
	require.InDelta(t, l.PipelinedMBps*1e6/1024, l.PipelinedMsgs, 1e-6)
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "the probes left files behind")
	require.Contains(t, l.String(), "floor of one send at a time")
}

// A far end given in the config is started, used and stopped; an echo
// that fails to start fails the measurement.
func TestMeasureLimitsEcho(t *testing.T) {
	started, stopped := 0, 0
	cfg := LimitsConfig{Dir: t.TempDir(), Duration: 50 * time.Millisecond, SeqSize: 64 << 10, SeqMax: 1 << 20, RTTSize: 100,
		Echo: func(n int) (string, func() error, error) {
			require.Equal(t, 100, n)
			started++
			addr, stop, err := echoGoroutine(n)
			return addr, func() error { stopped++; return stop() }, err
		}}
	l, err := MeasureLimits(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, 1, started)
	require.Equal(t, 1, stopped)
	require.Equal(t, "process", l.RTTPeer)
	require.Positive(t, l.RTTs)
	cfg.Echo = func(int) (string, func() error, error) { return "", nil, os.ErrNotExist }
	_, err = MeasureLimits(context.Background(), cfg)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestMeasureLimitsRefusesBadSettings(t *testing.T) {
	_, err := MeasureLimits(context.Background(), LimitsConfig{Dir: t.TempDir(), SeqSize: 1 << 20, SeqMax: 1 << 10})
	require.ErrorContains(t, err, "cap")
	_, err = MeasureLimits(context.Background(), LimitsConfig{Dir: t.TempDir(), SyncSize: -1})
	require.ErrorContains(t, err, "positive")
	_, err = MeasureLimits(context.Background(), LimitsConfig{Dir: "/nonexistent/raftmq-limits", Duration: time.Millisecond})
	require.ErrorContains(t, err, "fdatasync probe")
}

func TestLimitsAgainst(t *testing.T) {
	l := Limits{SyncP50us: 200, SeqMBps: 330, RTTP50us: 25, Replicas: 3, MsgBytes: 1024}
	l.derive()
	require.InDelta(t, 0.25, l.OneAtATimeFloorMs, 1e-9)
	require.InDelta(t, 110, l.PipelinedMBps, 1e-9)

	one := l.Against(Result{Mode: "sync", Window: 1, Messages: 100, P50: 0.5})
	require.Contains(t, one, "against a floor of 0.250 ms: 0.50 of the limit (2.0x the floor)")
	piped := l.Against(Result{Mode: "async", Window: 1000, AutoBatch: true, Messages: 100, MsgsPerSec: 53710, MBPerSec: 55})
	require.Contains(t, piped, "window 1000, auto-batch")
	require.Contains(t, piped, "ceiling of 110.0 MB/s")
	require.Contains(t, piped, ": 0.50 of the limit")
	// Batches are bound by bandwidth even one at a time.
	batched := l.Against(Result{Mode: "sync", Window: 1, Batch: 32, Messages: 100, P50: 3, MBPerSec: 99})
	require.Contains(t, batched, "batches of 32")
	require.Contains(t, batched, ": 0.90 of the limit")
	require.Contains(t, l.Against(Result{Window: 1}), "no p50")
}

func TestReadLimitsAndResults(t *testing.T) {
	l := Limits{Dir: "/d", Syncs: 10, SyncP50us: 100, SyncP99us: 300, SeqWrites: 5, SeqMBps: 300, RTTs: 50, RTTP50us: 20, Replicas: 3, MsgBytes: 1024}
	l.derive()
	b, err := json.Marshal(l)
	require.NoError(t, err)
	got, err := ReadLimits(strings.NewReader("progress line\n"+string(b)+"\n"), 0, 0)
	require.NoError(t, err)
	require.Equal(t, l, got)
	// Replicas and message bytes given anew change the ceiling.
	got, err = ReadLimits(strings.NewReader(string(b)), 1, 2048)
	require.NoError(t, err)
	require.InDelta(t, 300, got.PipelinedMBps, 1e-9)
	require.InDelta(t, 300e6/2048, got.PipelinedMsgs, 1e-6)

	_, err = ReadLimits(strings.NewReader("nothing here\n"), 0, 0)
	require.ErrorContains(t, err, "no JSON line")
	_, err = ReadLimits(strings.NewReader("{not json\n"), 0, 0)
	require.ErrorContains(t, err, "line 1")
	_, err = ReadLimits(strings.NewReader(`{"syncs":3,"seqWrites":0,"rtts":4}`), 0, 0)
	require.ErrorContains(t, err, "lacks a probe")

	rs, err := ReadResults(strings.NewReader("  1s: 1000 msgs/s\n" +
		`{"mode":"sync","messages":1200,"p50ms":0.8,"size":1024,"window":1}` + "\n" +
		`{"mode":"async","messages":500000,"msgsPerSec":50000,"mbPerSec":51.2,"size":1024,"window":1000}` + "\n"))
	require.NoError(t, err)
	require.Len(t, rs, 2)
	require.Equal(t, 0.8, rs[0].P50)
	require.Equal(t, 1000, rs[1].Window)
	_, err = ReadResults(strings.NewReader(`{"dir":"/d","syncs":3}`))
	require.ErrorContains(t, err, "not a produce run")
	_, err = ReadResults(strings.NewReader(""))
	require.ErrorContains(t, err, "no JSON line")
}
