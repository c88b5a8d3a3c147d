package main

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// memoryLimitFlag parses --memory-limit as `raftmq broker` does.
func memoryLimitFlag(t *testing.T, args ...string) (memoryLimit, error) {
	t.Helper()
	var f brokerFlags
	cmd := &cobra.Command{Use: "broker"}
	f.register(cmd)
	require.NoError(t, cmd.ParseFlags(append([]string{"--id", "1", "--peer", "1=127.0.0.1:10911/127.0.0.1:10921"}, args...)))
	_, err := f.config(slog.New(slog.DiscardHandler))
	return f.memLimitV, err
}

// --memory-limit takes a size in binary units, off or auto (the default);
// anything else, or a size outside 64MiB..1PiB, is refused with a message
// naming the flag and the range.
func TestMemoryLimitFlag(t *testing.T) {
	for arg, want := range map[string]memoryLimit{
		"2GiB":       {bytes: 2 << 30},
		"512mib":     {bytes: 512 << 20},
		"1.5GiB":     {bytes: 3 << 29},
		"67108864":   {bytes: 64 << 20},
		"1PiB":       {bytes: 1 << 50},
		"off":        {},
		"auto":       {auto: true},
		" 4 GiB ":    {bytes: 4 << 30},
		"1048576KiB": {bytes: 1 << 30},
	} {
		got, err := memoryLimitFlag(t, "--memory-limit", arg)
		require.NoError(t, err, arg)
		require.Equal(t, want, got, arg)
	}
	got, err := memoryLimitFlag(t)
	require.NoError(t, err)
	require.Equal(t, memoryLimit{auto: true}, got, "default")

	for _, arg := range []string{"10MiB", "63MiB", "2PiB", "0", "-1GiB", "2GB", "2G", "lots", "NaN", "1e30"} {
		_, err := memoryLimitFlag(t, "--memory-limit", arg)
		require.Error(t, err, arg)
		require.ErrorContains(t, err, "--memory-limit", arg)
		require.ErrorContains(t, err, "64MiB to 1PiB", arg)
	}
}

// The limit reaches the runtime: an explicit size as given, auto as 90%
// of the cgroup's limit, off as none; auto without a cgroup limit leaves
// the runtime's (GOMEMLIMIT's) limit alone.
func TestApplyMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := slog.New(slog.DiscardHandler)

	applyMemoryLimit(memoryLimit{bytes: 2 << 30}, "", 8<<30, log)
	require.Equal(t, int64(2<<30), debug.SetMemoryLimit(-1), "explicit size wins over the cgroup")
	applyMemoryLimit(memoryLimit{auto: true}, "", 10<<30, log)
	require.Equal(t, int64(9<<30), debug.SetMemoryLimit(-1), "auto: 90% of the cgroup's limit")
	applyMemoryLimit(memoryLimit{}, "", 10<<30, log)
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "off")
	debug.SetMemoryLimit(3 << 30) // as GOMEMLIMIT=3GiB would at start
	applyMemoryLimit(memoryLimit{auto: true}, "3GiB", 0, log)
	require.Equal(t, int64(3<<30), debug.SetMemoryLimit(-1), "auto keeps $GOMEMLIMIT")
}

func TestCgroupMemoryLimit(t *testing.T) {
	write := func(t *testing.T, path, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	t.Run("v2", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "system.slice", "raftmq.service", "memory.max"), "4294967296\n")
		require.Equal(t, int64(4<<30), cgroupMemoryLimit(root, []byte("0::/system.slice/raftmq.service\n")))
	})
	t.Run("v2 max", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "user.slice", "memory.max"), "max\n")
		require.Zero(t, cgroupMemoryLimit(root, []byte("0::/user.slice\n")))
	})
	t.Run("v2 container", func(t *testing.T) {
		// The container's own group is mounted at root; the path in
		// /proc/self/cgroup names it on the host.
		root := t.TempDir()
		write(t, filepath.Join(root, "memory.max"), "1073741824\n")
		require.Equal(t, int64(1<<30), cgroupMemoryLimit(root, []byte("0::/docker/abc\n")))
	})
	t.Run("v1", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "memory", "docker", "abc", "memory.limit_in_bytes"), "536870912\n")
		require.Equal(t, int64(512<<20), cgroupMemoryLimit(root, []byte("12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n")))
	})
	t.Run("v1 none", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "memory", "memory.limit_in_bytes"), "9223372036854771712\n")
		require.Zero(t, cgroupMemoryLimit(root, []byte("4:memory:/\n")))
	})
	t.Run("none", func(t *testing.T) {
		require.Zero(t, cgroupMemoryLimit(t.TempDir(), []byte("0::/\n")))
	})
}
