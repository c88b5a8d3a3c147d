package consumequeue

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpenFilesForLimit(t *testing.T) {
	require.Equal(t, DefaultMaxOpenFiles, openFilesForLimit(1024))
	require.Equal(t, DefaultMaxOpenFiles, openFilesForLimit(0))
	require.Equal(t, 10000, openFilesForLimit(20000))
	require.Equal(t, MaxDerivedOpenFiles, openFilesForLimit(1<<20))
	require.Equal(t, MaxDerivedOpenFiles, openFilesForLimit(^uint64(0))) // RLIM_INFINITY

	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	got := OpenFilesForProcess()
	require.Equal(t, openFilesForLimit(lim.Cur), got)
	require.LessOrEqual(t, uint64(got), max(lim.Cur, DefaultMaxOpenFiles), "within the descriptor limit")
}
