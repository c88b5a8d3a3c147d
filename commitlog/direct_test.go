package commitlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// On a real file system with direct I/O, appended bytes do not enter the
// page cache, every entry reads back intact (recent ones from the tail
// cache, older ones from the disk through the mapping), and a reopened log
// recovers them all.
func TestDirectAppendsBypassPageCache(t *testing.T) {
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe")
	f, err := vfs.Default().Create(probe)
	require.NoError(t, err)
	f.Close()
	if d, err := vfs.OpenDirect(vfs.Default(), probe); errors.Is(err, vfs.ErrDirectUnsupported) {
		t.Skipf("no direct I/O here: %v", err)
	} else {
		require.NoError(t, err)
		d.Close()
	}
	const seg = 8 << 20
	opts := Options{SegmentSize: seg, TailCache: 256 << 10, DirectIO: 1, CacheWindow: -1}
	l, err := Open(vfs.Default(), dir, opts)
	require.NoError(t, err)
	w := writerT(t, l)
	rng := rand.New(rand.NewPCG(3, 3))
	size := func(i uint64) int { return int(i*7919) % 3000 }
	next := uint64(1)
	for l.EndPosition() < seg+seg/2 { // into the second segment
		n := uint64(1 + rng.IntN(40))
		require.NoError(t, w.AppendSync(mkEntries(next, next+n-1, 1, size)...))
		next += n
	}
	last := next - 1
	// The sealed first segment was written and synced without the page
	// cache. (Its header, seal and the warm-up's zeros are not cached either,
	// but for the header's block, a small part.)
	require.Less(t, resident(t, filepath.Join(dir, segmentName(0)), 0, seg), 0.05)

	check := func(l *Log) {
		t.Helper()
		ents, err := l.Entries(1, last+1, 1<<40)
		require.NoError(t, err)
		require.Len(t, ents, int(last))
		for _, e := range ents {
			require.True(t, bytes.Equal(body(e.Index, size(e.Index)), e.Data), "entry %d", e.Index)
			if len(e.Data) > 0 {
				b := make([]byte, len(e.Data))
				require.NoError(t, l.ReadAt(b, e.Pos+HeaderSize))
				require.True(t, bytes.Equal(e.Data, b), "ReadAt of entry %d", e.Index)
			}
			term, err := l.Term(e.Index)
			require.NoError(t, err)
			require.EqualValues(t, 1, term)
		}
	}
	check(l)
	// A conflicting suffix replaced through the direct path reads back too.
	cut := last - 30
	require.NoError(t, w.TruncateSuffix(cut))
	next, last = cut, cut-1
	for range 3 {
		n := uint64(1 + rng.IntN(40))
		require.NoError(t, w.AppendSync(mkEntries(next, next+n-1, 1, size)...))
		next += n
	}
	last = next - 1
	check(l)
	require.NoError(t, l.Close())

	opts.DirectIO = -1
	l, err = Open(vfs.Default(), dir, opts)
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, last, l.LastIndex())
	check(l)
}
