package commitlog

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/stretchr/testify/require"
)

// A log with a small tail cache (so that it evicts) and direct appends
// (block rewrites, direct.go), and one with neither, must answer every
// Entries, Term and ReadAt call alike and leave byte-identical segment
// files, through appends across segment rolls, conflicting appends,
// truncations, prefix drops and resets; and a body handed out from the
// cache never changes afterwards.
func TestTailCacheAgreesWithSegments(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfs, pfs := vfs.NewMem(), vfs.NewMem()
		cached := openT(t, cfs, Options{SegmentSize: 8192, TailCache: 3000, WarmAhead: -1, DirectIO: 1})
		plain := openT(t, pfs, Options{SegmentSize: 8192, TailCache: -1, WarmAhead: -1, DirectIO: -1})
		cw, pw := writerT(t, cached), writerT(t, plain)
		require.Positive(t, cached.opts.DirectIO)
		type held struct {
			data []byte
			want []byte
		}
		var kept []held
		term := uint64(1)
		both := func(f func(l *Log, w *Writer) error) {
			t.Helper()
			ea, eb := f(cached, cw), f(plain, pw)
			require.Equal(t, eb == nil, ea == nil, "seed %d: %v vs %v", seed, ea, eb)
		}
		for step := 0; step < 60; step++ {
			last := plain.LastIndex()
			switch op := rng.IntN(10); {
			case op < 6: // append, sometimes replacing a suffix
				from := last + 1
				if op == 0 && last >= plain.FirstIndex()+2 {
					from = last - uint64(rng.IntN(3))
					term++
				}
				n := 1 + rng.IntN(8)
				size := func(i uint64) int { return int(i*13+seed) % 900 }
				both(func(_ *Log, w *Writer) error { return w.AppendSync(mkEntries(from, from+uint64(n)-1, term, size)...) })
			case op < 8 && last > plain.FirstIndex():
				from := plain.FirstIndex() + 1 + uint64(rng.IntN(int(last-plain.FirstIndex())))
				both(func(_ *Log, w *Writer) error { return w.TruncateSuffix(from) })
			case op < 9 && last > plain.FirstIndex()+5:
				i := last - uint64(rng.IntN(5))
				both(func(l *Log, _ *Writer) error { _, err := l.DropPrefix(i); return err })
			case op == 9 && rng.IntN(2) == 0:
				next := last + 10
				if rng.IntN(2) == 0 && last > 2 {
					next = 2 + uint64(rng.IntN(int(last-1))) // back below entries once held
				}
				pos := int64(next) * 5000
				both(func(_ *Log, w *Writer) error { return w.Reset(next, pos) })
			}
			require.Equal(t, plain.FirstIndex(), cached.FirstIndex())
			require.Equal(t, plain.LastIndex(), cached.LastIndex())
			first, last := plain.FirstIndex(), plain.LastIndex()
			if last < first {
				continue
			}
			want, err := plain.Entries(first, last+1, 1<<40)
			require.NoError(t, err)
			got, err := cached.Entries(first, last+1, 1<<40)
			require.NoError(t, err)
			require.Equal(t, want, got, "seed %d step %d", seed, step)
			requireSameSegments(t, pfs, cfs)
			i := first + uint64(rng.IntN(int(last-first+1)))
			tp, err := plain.Term(i)
			require.NoError(t, err)
			tc, err := cached.Term(i)
			require.NoError(t, err)
			require.Equal(t, tp, tc)
			if e := want[i-first]; len(e.Data) > 0 {
				lo := rng.IntN(len(e.Data))
				n := 1 + rng.IntN(len(e.Data)-lo)
				bp, bc := make([]byte, n), make([]byte, n)
				require.NoError(t, plain.ReadAt(bp, e.Pos+HeaderSize+int64(lo)))
				require.NoError(t, cached.ReadAt(bc, e.Pos+HeaderSize+int64(lo)))
				require.Equal(t, bp, bc)
			}
			// The size limit counts the same way.
			lim := uint64(rng.IntN(2000))
			want, _ = plain.Entries(first, last+1, lim)
			got, _ = cached.Entries(first, last+1, lim)
			require.Equal(t, len(want), len(got))
			kept = append(kept, held{got[len(got)-1].Data, bytes.Clone(got[len(got)-1].Data)})
			cached.mu.RLock()
			n, biggest := 0, 0
			for _, c := range cached.mu.tail {
				n += len(c.buf)
				biggest = max(biggest, len(c.buf))
			}
			require.Equal(t, n, cached.mu.tailBytes)
			require.LessOrEqual(t, n, 3000+biggest)
			cached.mu.RUnlock()
		}
		for _, h := range kept {
			require.Equal(t, h.want, h.data, "a body handed out changed")
		}
		require.NoError(t, cached.Close())
		require.NoError(t, plain.Close())
	}
}

// requireSameSegments checks that two logs in /log hold the same segment
// files with the same bytes.
func requireSameSegments(t *testing.T, a, b vfs.FS) {
	t.Helper()
	segs := func(fs vfs.FS) map[string][]byte {
		names, err := fs.List("/log")
		require.NoError(t, err)
		out := map[string][]byte{}
		for _, n := range names {
			if _, ok := parseSegmentName(n); ok {
				out[n], err = vfs.ReadFile(fs, vfs.Join("/log", n))
				require.NoError(t, err)
			}
		}
		return out
	}
	sa, sb := segs(a), segs(b)
	require.Equal(t, len(sa), len(sb))
	for n, da := range sa {
		require.True(t, bytes.Equal(da, sb[n]), "segment %s differs", n)
	}
}
