package index

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// Every key whose Put returned is found by a query that starts after it,
// while the writer goes on putting, flushing, syncing and rolling files
// (read-your-writes of the index); run it with -race.
func TestQueryFindsEveryReturnedPut(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		x := openT(t, fs, dir, Options{SlotCount: 5000, MaxEntries: 700})
		defer x.Close()
		const n = 6000
		key := func(i int) string { return fmt.Sprintf("TopicTest#order-%d", i) }
		var done atomic.Int64 // keys 0..done-1 were put
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for r := range 3 {
			wg.Go(func() {
				for j := 0; ; j++ {
					d := done.Load()
					if d == n {
						return
					}
					if d == 0 {
						continue
					}
					i := int((int64(j)*7919 + int64(r)) % d)
					if j%3 == 0 {
						i = int(d - 1) // the newest, most likely still buffered
					}
					got, err := x.Query(key(i), 64, 0, math.MaxInt64)
					if err != nil {
						errs <- err
						return
					}
					if !slices.Contains(got, int64(i)*100) {
						errs <- fmt.Errorf("key %d (of %d put): got %v, want offset %d", i, d, got, i*100)
						return
					}
				}
			})
		}
		for i := range n {
			require.NoError(t, x.Put(key(i), int64(i)*100, baseTS+int64(i)))
			done.Store(int64(i + 1))
			switch {
			case i%211 == 0:
				_, err := x.Sync()
				require.NoError(t, err)
			case i%53 == 0:
				require.NoError(t, x.Flush())
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}
