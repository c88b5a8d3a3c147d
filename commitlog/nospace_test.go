package commitlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// A full device is not a sticky failure: the append that found no space
// changed nothing, and the same entries append once space is freed.
func TestAppendNoSpaceIsRetryable(t *testing.T) {
	for _, flush := range []FlushMode{FlushSync, FlushAsync} {
		t.Run(flush.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			fs.SetCapacity(3*testSeg + 1024)
			l, w := openW(t, fs, Options{Flush: flush, WarmAhead: -1})
			size := func(uint64) int { return 300 }
			next := uint64(1)
			var err error
			for ; next < 1000; next++ {
				if err = w.AppendSync(mkEntries(next, next, 1, size)...); err != nil {
					break
				}
			}
			require.True(t, vfs.IsNoSpace(err), "append %d: %v", next, err)
			require.NoError(t, l.Err(), "a full device must not be a sticky failure")
			require.Equal(t, next-1, l.LastIndex())
			// Still full: the retry fails the same way and changes nothing.
			require.True(t, vfs.IsNoSpace(w.AppendSync(mkEntries(next, next+3, 1, size)...)))
			require.Equal(t, next-1, l.LastIndex())

			fs.SetCapacity(0)
			require.NoError(t, w.AppendSync(mkEntries(next, next+3, 1, size)...))
			checkEntries(t, l, 1, next+3, constTerm(1), size)
			require.NoError(t, l.Close())
			l = openT(t, fs, Options{Flush: flush, WarmAhead: -1})
			checkEntries(t, l, 1, next+3, constTerm(1), size)
			require.NoError(t, l.Close())
		})
	}
}
