package store

import (
	"bytes"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func TestRetentionConfigValidation(t *testing.T) {
	require.NoError(t, RetentionConfig{}.Validate(), "RocketMQ's defaults")
	require.NoError(t, RetentionConfig{CleanRatio: 0.5, ForceRatio: 0.5, FullRatio: 0.5, DeleteWhen: []int{0, 23}}.Validate())
	for _, c := range []struct {
		r    RetentionConfig
		want string
	}{
		{RetentionConfig{CleanRatio: 0.9}, "clean ratio ≤ force-clean ratio ≤ full ratio"},
		{RetentionConfig{ForceRatio: 0.95}, "clean ratio ≤ force-clean ratio ≤ full ratio"},
		{RetentionConfig{FullRatio: 1}, "full ratio must be between 0 and 1"},
		{RetentionConfig{CleanRatio: 1.5, ForceRatio: 1.6, FullRatio: 1.7}, "clean ratio must be between 0 and 1"},
		{RetentionConfig{DeleteWhen: []int{24}}, "delete hour 24"},
	} {
		require.ErrorContains(t, c.r.Validate(), c.want, "%+v", c.r)
	}
	_, err := Open(Config{Dir: t.TempDir(), Retention: RetentionConfig{CleanRatio: 0.95}})
	require.ErrorContains(t, err, "clean ratio ≤ force-clean ratio", "the store refuses to open")

	for s, want := range map[string][]int{"04": {4}, "4": {4}, "04;16": {4, 16}, " 0 ; 23 ": {0, 23}} {
		got, err := ParseDeleteWhen(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "24", "04;", "4pm", "-1"} {
		_, err := ParseDeleteWhen(s)
		require.Error(t, err, s)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// Above the force-clean ratio the floor gives way, and the node says so.
func TestForcedRetentionSaysWhenAFollowerLosesEntries(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	var logs syncBuf
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var floor atomic.Uint64 // a live follower at index 0
	cfg.Retention.Floor = floor.Load
	sa, clock := expiredSegments(t, cfg)
	defer sa.Close()
	clock.Set(time.Date(2026, 11, 23, 4, 0, 0, 0, time.Local))
	n, err := sa.CheckDisk()
	require.NoError(t, err)
	require.Zero(t, n)
	require.NotContains(t, logs.String(), "live follower")

	u, _ := fs.DiskUsage("/")
	fs.SetCapacity(uint64(float64(u.Total-u.Free) / 0.87))
	n, err = sa.CheckDisk()
	require.NoError(t, err)
	require.Greater(t, n, 0)
	require.Contains(t, logs.String(), "deleting entries a live follower still needs")
}
