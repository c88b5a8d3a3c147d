//go:build mutant

package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/internal/vfs"
)

// Failpoints are per store: in one process a store with no-dedupe queues a
// retry again while a correct store beside it answers it as a duplicate.
func TestFailpointsArePerStore(t *testing.T) {
	retries := func(fp failpoint.Set) (dup bool, queued int64) {
		cfg := testConfig(t, vfs.NewMem())
		cfg.DedupeWindow = time.Minute
		cfg.Failpoints = fp
		sa := openSA(t, cfg)
		defer sa.Close()
		createTopic(t, sa, "t", 1)
		_, err := sa.Put(msg("t", 0, 1, "", "KEY-1"))
		require.NoError(t, err)
		rs, err := sa.Put(msg("t", 0, 1, "", "KEY-1"))
		require.NoError(t, err)
		return rs[0].Duplicate, sa.MaxOffset("t", 0)
	}
	mutDup, mutQueued := retries(failpoint.Of(failpoint.NoDedupe))
	okDup, okQueued := retries(failpoint.Set{})
	require.True(t, okDup, "the correct store answers the retry as a duplicate")
	require.Equal(t, int64(1), okQueued)
	require.False(t, mutDup, "the no-dedupe store takes the retry as new")
	require.Equal(t, int64(2), mutQueued)
}
