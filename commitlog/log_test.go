package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

const testSeg = 8192

func body(i uint64, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(i*31 + uint64(k))
	}
	return b
}

func mkEntries(from, to uint64, term uint64, size func(uint64) int) []Entry {
	var out []Entry
	for i := from; i <= to; i++ {
		out = append(out, Entry{Index: i, Term: term, Data: body(i, size(i))})
	}
	return out
}

func varSize(i uint64) int { return int(i*37) % 700 }

func openT(t *testing.T, fs vfs.FS, opts Options) *Log {
	t.Helper()
	if opts.SegmentSize == 0 {
		opts.SegmentSize = testSeg
	}
	l, err := Open(fs, "/log", opts)
	require.NoError(t, err)
	return l
}

// writerT takes l's writer for a test; the log's Close ends it.
func writerT(t testing.TB, l *Log) *Writer {
	t.Helper()
	w, err := l.Writer()
	require.NoError(t, err)
	return w
}

// openW is openT and the log's writer.
func openW(t *testing.T, fs vfs.FS, opts Options) (*Log, *Writer) {
	t.Helper()
	l := openT(t, fs, opts)
	return l, writerT(t, l)
}

func checkEntries(t *testing.T, l *Log, from, to uint64, term func(uint64) uint64, size func(uint64) int) {
	t.Helper()
	require.Equal(t, from, l.FirstIndex())
	require.Equal(t, to, l.LastIndex())
	if to < from {
		return
	}
	ents, err := l.Entries(from, to+1, 1<<40)
	require.NoError(t, err)
	require.Len(t, ents, int(to-from+1))
	for k, e := range ents {
		i := from + uint64(k)
		require.Equal(t, i, e.Index)
		require.Equal(t, term(i), e.Term, "term of %d", i)
		require.Equal(t, body(i, size(i)), e.Data, "body of %d", i)
	}
}

func constTerm(t uint64) func(uint64) uint64 { return func(uint64) uint64 { return t } }

// Both the OS and the memory file system run the same suite.
func fsKinds(t *testing.T) map[string]func() vfs.FS {
	return map[string]func() vfs.FS{
		"mem": func() vfs.FS { return vfs.NewMem() },
		"os": func() vfs.FS {
			dir := t.TempDir()
			return &chroot{FS: vfs.Default(), root: dir}
		},
	}
}

type (
	fsMode = os.FileMode
	fsInfo = os.FileInfo
)

// chroot maps "/log" paths into a temp dir for the OS FS.
type chroot struct {
	vfs.FS
	root string
}

func (c *chroot) p(n string) string                         { return c.root + n }
func (c *chroot) Create(n string) (vfs.File, error)         { return c.FS.Create(c.p(n)) }
func (c *chroot) Open(n string) (vfs.File, error)           { return c.FS.Open(c.p(n)) }
func (c *chroot) OpenReadWrite(n string) (vfs.File, error)  { return c.FS.OpenReadWrite(c.p(n)) }
func (c *chroot) Remove(n string) error                     { return c.FS.Remove(c.p(n)) }
func (c *chroot) Rename(a, b string) error                  { return c.FS.Rename(c.p(a), c.p(b)) }
func (c *chroot) MkdirAll(n string, m fsMode) error         { return c.FS.MkdirAll(c.p(n), m) }
func (c *chroot) List(n string) ([]string, error)           { return c.FS.List(c.p(n)) }
func (c *chroot) SyncDir(n string) error                    { return c.FS.SyncDir(c.p(n)) }
func (c *chroot) Stat(n string) (fsInfo, error)             { return c.FS.Stat(c.p(n)) }
func (c *chroot) DiskUsage(n string) (vfs.DiskUsage, error) { return c.FS.DiskUsage(c.root) }

func TestAppendReadReopen(t *testing.T) {
	for name, mk := range fsKinds(t) {
		t.Run(name, func(t *testing.T) {
			fs := mk()
			l := openT(t, fs, Options{})
			w := writerT(t, l)
			require.NoError(t, w.AppendSync(mkEntries(1, 200, 1, varSize)...))
			checkEntries(t, l, 1, 200, constTerm(1), varSize)
			require.Greater(t, len(l.Segments()), 5, "entries should span several segments")
			require.NoError(t, l.Close())

			l = openT(t, fs, Options{})
			w = writerT(t, l)
			checkEntries(t, l, 1, 200, constTerm(1), varSize)
			tm, err := l.Term(150)
			require.NoError(t, err)
			require.Equal(t, uint64(1), tm)
			_, err = l.Term(201)
			require.ErrorIs(t, err, ErrUnavailable)
			require.NoError(t, w.Append(mkEntries(201, 210, 2, varSize)...))
			require.NoError(t, l.Close())
			l = openT(t, fs, Options{})
			defer l.Close()
			checkEntries(t, l, 1, 210, func(i uint64) uint64 { return map[bool]uint64{true: 2, false: 1}[i > 200] }, varSize)
			require.NoError(t, l.Scan(1, true, func(EntryRef) error { return nil }))
		})
	}
}

func TestEntriesMaxSize(t *testing.T) {
	l := openT(t, vfs.NewMem(), Options{})
	w := writerT(t, l)
	defer l.Close()
	require.NoError(t, w.AppendSync(mkEntries(1, 10, 1, func(uint64) int { return 100 })...))
	ents, err := l.Entries(1, 11, 250)
	require.NoError(t, err)
	require.Len(t, ents, 2)
	ents, err = l.Entries(3, 11, 1)
	require.NoError(t, err)
	require.Len(t, ents, 1, "at least one entry even over maxSize")
	_, err = l.Entries(0, 2, 100)
	require.ErrorIs(t, err, ErrCompacted)
}

func TestAppendValidation(t *testing.T) {
	l := openT(t, vfs.NewMem(), Options{})
	w := writerT(t, l)
	defer l.Close()
	require.ErrorIs(t, w.Append(Entry{Index: 2, Term: 1}), ErrGap)
	require.ErrorIs(t, w.Append(Entry{Index: 1, Term: 1, Data: make([]byte, testSeg)}), ErrEntryTooLarge)
	require.NoError(t, w.Append(Entry{Index: 1, Term: 3}))
	require.Error(t, w.Append(Entry{Index: 2, Term: 2}), "term must not go backwards")
}

func TestTruncateSuffixAndConflict(t *testing.T) {
	for name, mk := range fsKinds(t) {
		t.Run(name, func(t *testing.T) {
			fs := mk()
			l := openT(t, fs, Options{})
			w := writerT(t, l)
			require.NoError(t, w.AppendSync(mkEntries(1, 100, 1, varSize)...))
			// A conflicting append from a new leader replaces the suffix.
			require.NoError(t, w.AppendSync(mkEntries(60, 70, 2, varSize)...))
			term := func(i uint64) uint64 { return map[bool]uint64{true: 2, false: 1}[i >= 60] }
			checkEntries(t, l, 1, 70, term, varSize)
			require.NoError(t, l.Close())
			l = openT(t, fs, Options{})
			checkEntries(t, l, 1, 70, term, varSize)
			require.NoError(t, l.Close())
		})
	}
}

// Positions are a function of the entries alone: a log that truncated and
// re-appended puts entries exactly where a log that never diverged does,
// including when the truncation empties a segment.
func TestPositionsDeterministicAcrossTruncation(t *testing.T) {
	for _, cutAt := range []uint64{2, 11, 12, 13, 40, 41} {
		a := openT(t, vfs.NewMem(), Options{SegmentSize: 4096})
		wa := writerT(t, a)
		b := openT(t, vfs.NewMem(), Options{SegmentSize: 4096})
		wb := writerT(t, b)
		big := func(uint64) int { return 1000 }
		small := func(uint64) int { return 10 }
		require.NoError(t, wa.AppendSync(mkEntries(1, 50, 1, big)...))
		require.NoError(t, wb.AppendSync(mkEntries(1, cutAt-1, 1, big)...))
		// a diverges at cutAt with big entries, then is overwritten by small ones.
		require.NoError(t, wa.AppendSync(mkEntries(cutAt, cutAt+20, 2, small)...))
		require.NoError(t, wb.AppendSync(mkEntries(cutAt, cutAt+20, 2, small)...))
		for i := uint64(1); i <= cutAt+20; i++ {
			pa, err := a.Position(i)
			require.NoError(t, err)
			pb, err := b.Position(i)
			require.NoError(t, err)
			require.Equal(t, pb, pa, "cut %d index %d", cutAt, i)
		}
		a.Close()
		b.Close()
	}
}

func TestDropPrefixAndReset(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs, Options{})
	w := writerT(t, l)
	require.NoError(t, w.AppendSync(mkEntries(1, 200, 1, varSize)...))
	freed, err := l.DropPrefix(100)
	require.NoError(t, err)
	require.Greater(t, freed, int64(0))
	first := l.FirstIndex()
	require.LessOrEqual(t, first, uint64(100))
	require.Greater(t, first, uint64(1))
	_, err = l.Term(first - 1)
	require.ErrorIs(t, err, ErrCompacted)
	require.NoError(t, l.Close())
	l = openT(t, fs, Options{})
	w = writerT(t, l)
	checkEntries(t, l, first, 200, constTerm(1), varSize)

	// Reset to a position in the middle of a segment, as a follower
	// installing a snapshot does.
	pos := int64(5*testSeg + 1234)
	require.NoError(t, w.Reset(1000, pos))
	require.Equal(t, uint64(1000), l.FirstIndex())
	require.Equal(t, uint64(999), l.LastIndex())
	require.NoError(t, l.Close())
	l = openT(t, fs, Options{})
	w = writerT(t, l)
	require.Equal(t, uint64(1000), l.FirstIndex())
	require.NoError(t, w.AppendSync(Entry{Index: 1000, Term: 5, Data: []byte("x")}))
	p, err := l.Position(1000)
	require.NoError(t, err)
	require.Equal(t, pos, p)
	require.NoError(t, l.Close())
}

func TestGroupCommitConcurrent(t *testing.T) {
	l := openT(t, vfs.NewMem(), Options{SegmentSize: 1 << 20})
	w := writerT(t, l)
	var mu sync.Mutex // the log has one writer: callers serialise Append (and index assignment)
	next := uint64(1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				mu.Lock()
				e := Entry{Index: next, Term: 1, Data: body(next, 100)}
				next++
				err := w.Append(e)
				mu.Unlock()
				require.NoError(t, err)
				require.NoError(t, l.waitDurable(e.Index))
				require.GreaterOrEqual(t, l.DurableIndex(), e.Index)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, uint64(800), l.LastIndex())
	require.NoError(t, l.Close())
}

func TestStickyWriteError(t *testing.T) {
	tog := &vfs.Toggle{}
	fs := vfs.WithErrors(vfs.NewMem(), tog)
	l := openT(t, fs, Options{})
	w := writerT(t, l)
	require.NoError(t, w.AppendSync(mkEntries(1, 5, 1, varSize)...))
	tog.Arm(vfs.OpSync)
	err := w.AppendSync(mkEntries(6, 6, 1, varSize)...)
	require.ErrorIs(t, err, vfs.ErrInjected)
	tog.Disarm()
	err = w.AppendSync(mkEntries(7, 7, 1, varSize)...)
	require.Error(t, err, "writes stay refused after a failed sync")
	require.ErrorIs(t, l.Err(), vfs.ErrInjected)

	tog2 := &vfs.Toggle{}
	l2 := openT(t, vfs.WithErrors(vfs.NewMem(), tog2), Options{})
	w2 := writerT(t, l2)
	tog2.Arm(vfs.OpWrite)
	require.ErrorIs(t, w2.Append(mkEntries(1, 1, 1, varSize)...), vfs.ErrInjected)
	tog2.Disarm()
	require.Error(t, w2.Append(mkEntries(1, 1, 1, varSize)...))
}

// Crash at random points: every synced entry survives, nothing torn is
// served, and the log accepts appends after recovery.
func TestCrashKeepsSyncedEntries(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		fs := vfs.NewMem()
		opts := Options{SegmentSize: 4096 + int64(rng.IntN(4096))}
		if seed%4 == 1 {
			// Direct appends (block rewrites) need whole 4 KiB blocks.
			opts = Options{SegmentSize: 8192, DirectIO: 1}
		}
		l := openT(t, fs, opts)
		w := writerT(t, l)
		next := uint64(1)
		synced := uint64(0)
		term := uint64(1)
		for step := 0; step < 30; step++ {
			n := uint64(1 + rng.IntN(6))
			if rng.IntN(8) == 0 && next > synced+1 {
				// a raft conflict: overwrite an unsynced suffix
				next = synced + 1 + uint64(rng.IntN(int(next-synced-1)+1))
				term++
			}
			ents := mkEntries(next, next+n-1, term, varSize)
			if rng.IntN(2) == 0 {
				require.NoError(t, w.AppendSync(ents...))
				synced = next + n - 1
			} else {
				require.NoError(t, w.Append(ents...))
			}
			next += n
		}
		crashed := fs.CrashClone(rng, []float64{0, 0.5, 1}[seed%3])
		l.Close() // the original is done with; the clone is what survived
		l2, err := Open(crashed, "/log", Options{SegmentSize: 4096})
		require.NoError(t, err, "seed %d", seed)
		w2 := writerT(t, l2)
		require.GreaterOrEqual(t, l2.LastIndex(), synced, "seed %d: synced entries lost", seed)
		require.NoError(t, l2.Scan(l2.FirstIndex(), true, func(e EntryRef) error {
			if e.Index <= synced {
				want := body(e.Index, varSize(e.Index))
				if !bytes.Equal(e.Body, want) {
					return fmt.Errorf("entry %d changed", e.Index)
				}
			}
			return nil
		}), "seed %d", seed)
		last := l2.LastIndex()
		require.NoError(t, w2.AppendSync(mkEntries(last+1, last+3, term+1, varSize)...))
		require.NoError(t, l2.Close())
		l3, err := Open(crashed, "/log", Options{SegmentSize: 4096})
		require.NoError(t, err, "seed %d", seed)
		require.Equal(t, last+3, l3.LastIndex())
		require.NoError(t, l3.Close())
	}
}

// Cut the file at every byte of the last entry: recovery keeps the entries
// before it and drops the torn one.
func TestTornTailEveryByte(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs, Options{})
	w := writerT(t, l)
	require.NoError(t, w.AppendSync(mkEntries(1, 5, 1, func(uint64) int { return 50 })...))
	p5, _ := l.Position(5)
	require.NoError(t, l.Close())
	seg := "/log/" + segmentName(0)
	orig, err := vfs.ReadFile(fs, seg)
	require.NoError(t, err)
	size := int64(EncodedSize(50))
	for cut := p5; cut < p5+size; cut++ {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/log", 0o755))
		b := append([]byte(nil), orig...)
		clear(b[cut:])
		f, err := mem.Create(seg)
		require.NoError(t, err)
		_, err = f.WriteAt(b, 0)
		require.NoError(t, err)
		l, err := Open(mem, "/log", Options{SegmentSize: testSeg, DurableIndex: 4})
		require.NoError(t, err, "cut at %d", cut)
		require.Equal(t, uint64(4), l.LastIndex(), "cut at %d", cut)
		require.NoError(t, l.Close())
	}
}

// A flipped bit in a synced entry is corruption: Open refuses, names the
// file and offset, and truncates nothing.
func TestBitFlipDetected(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs, Options{})
	w := writerT(t, l)
	require.NoError(t, w.AppendSync(mkEntries(1, 40, 1, varSize)...))
	segs := l.Segments()
	require.NoError(t, l.Close())
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 100; trial++ {
		s := segs[rng.IntN(len(segs))]
		clone := fs.CrashClone(rng, 1)
		f, err := clone.OpenReadWrite(s.Path)
		require.NoError(t, err)
		off := SegmentHeaderSize + rng.Int64N(s.Written-SegmentHeaderSize)
		var b [1]byte
		_, _ = f.ReadAt(b[:], off)
		b[0] ^= 1 << rng.IntN(8)
		_, _ = f.WriteAt(b[:], off)
		// Sidecars skip scanning sealed segments; remove them to make the
		// open verify every entry (what `store inspect` does).
		for _, s2 := range segs {
			_ = clone.Remove(s2.Path + ".idx")
		}
		_, err = Open(clone, "/log", Options{SegmentSize: testSeg})
		require.Error(t, err, "trial %d: flip at %s:%d not detected", trial, s.Path, off)
		var ce *CorruptError
		require.True(t, errors.As(err, &ce), "trial %d: %v", trial, err)
		require.True(t, errors.Is(err, ErrCorrupt))
		after, err := vfs.ReadFile(clone, s.Path)
		require.NoError(t, err)
		require.Equal(t, b[0], after[off], "corrupt data must not be rewritten")
	}
}

func TestScanDetectsCorruptionInSealedSegment(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs, Options{})
	w := writerT(t, l)
	require.NoError(t, w.AppendSync(mkEntries(1, 40, 1, varSize)...))
	s := l.Segments()[0]
	require.NoError(t, l.Close())
	f, err := fs.OpenReadWrite(s.Path)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff}, SegmentHeaderSize+HeaderSize+1)
	require.NoError(t, err)
	l, err = Open(fs, "/log", Options{SegmentSize: testSeg}) // sidecar: no scan at open
	require.NoError(t, err)
	defer l.Close()
	err = l.Scan(1, true, func(EntryRef) error { return nil })
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestMissingMiddleSegment(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs, Options{})
	w := writerT(t, l)
	require.NoError(t, w.AppendSync(mkEntries(1, 60, 1, varSize)...))
	segs := l.Segments()
	require.NoError(t, l.Close())
	require.NoError(t, fs.Remove(segs[1].Path))
	_, err := Open(fs, "/log", Options{SegmentSize: testSeg})
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestAsyncFlush(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs, Options{Flush: FlushAsync})
	w := writerT(t, l)
	require.NoError(t, w.AppendSync(mkEntries(1, 20, 1, varSize)...))
	require.NoError(t, l.Sync())
	require.Equal(t, uint64(20), l.DurableIndex())
	require.NoError(t, l.Close())
}

func TestReadAt(t *testing.T) {
	l := openT(t, vfs.NewMem(), Options{})
	w := writerT(t, l)
	defer l.Close()
	require.NoError(t, w.AppendSync(mkEntries(1, 30, 1, varSize)...))
	for i := uint64(1); i <= 30; i++ {
		p, err := l.Position(i)
		require.NoError(t, err)
		buf := make([]byte, varSize(i))
		require.NoError(t, l.ReadAt(buf, p+HeaderSize))
		require.Equal(t, body(i, varSize(i)), buf)
	}
	require.ErrorIs(t, l.ReadAt(make([]byte, 10), 1<<40), ErrBadPosition)
}

// A truncation whose checkpoint write finds the device full changes
// nothing and can be tried again; a no-space failure the log cannot retry
// (here a sync) leaves it refusing writes with an error that does not pass
// for a full device, so that a caller retrying on no space does not wait
// forever.
func TestTruncateNoSpaceRetries(t *testing.T) {
	tog := &vfs.Toggle{Err: vfs.ErrNoSpace}
	l := openT(t, vfs.WithErrors(vfs.NewMem(), tog), Options{})
	w := writerT(t, l)
	require.NoError(t, w.AppendSync(mkEntries(1, 5, 1, varSize)...))
	tog.Arm(vfs.OpWrite)
	require.True(t, vfs.IsNoSpace(w.TruncateSuffix(3)))
	require.NoError(t, l.Err(), "a truncation that wrote nothing failed the log")
	require.Equal(t, uint64(5), l.LastIndex())
	tog.Disarm()
	require.NoError(t, w.TruncateSuffix(3))
	require.NoError(t, w.AppendSync(mkEntries(3, 4, 2, varSize)...))
	require.Equal(t, uint64(4), l.LastIndex())

	tog.Arm(vfs.OpSync)
	require.True(t, vfs.IsNoSpace(w.AppendSync(mkEntries(5, 5, 2, varSize)...)))
	tog.Disarm()
	err := w.AppendSync(mkEntries(6, 6, 2, varSize)...)
	require.Error(t, err)
	require.False(t, vfs.IsNoSpace(err), "a sticky failure passes for a full device: %v", err)
	require.Contains(t, err.Error(), "full device")
}
