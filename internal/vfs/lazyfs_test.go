package vfs

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// osContent reads a file straight from the operating system, bypassing any
// LazyFS: what a machine would find on disk.
func osContent(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}

// writeAt writes s at off and fails the test on error.
func writeAt(t *testing.T, f File, s string, off int64) {
	t.Helper()
	n, err := f.WriteAt([]byte(s), off)
	require.NoError(t, err)
	require.Equal(t, len(s), n)
}

// readAll reads the whole file through f.
func readAll(t *testing.T, f File) []byte {
	t.Helper()
	size, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != io.EOF {
		require.NoError(t, err)
	}
	require.EqualValues(t, size, n)
	return b
}

func TestLazyWritesStayInMemoryUntilSync(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "a")
	l := NewLazy(Default())
	f, err := l.Create(name)
	require.NoError(t, err)
	defer f.Close()
	require.Empty(t, osContent(t, name), "Create makes the file on disk at once, empty")

	writeAt(t, f, "hello", 0)
	writeAt(t, f, "world", 10) // leaves a hole of zeros
	want := []byte("hello\x00\x00\x00\x00\x00world")
	require.Equal(t, want, readAll(t, f), "read-your-writes")
	require.Empty(t, osContent(t, name), "nothing reaches disk before Sync")

	fi, err := l.Stat(name)
	require.NoError(t, err)
	require.EqualValues(t, len(want), fi.Size(), "Stat reports the overlay size")
	fi, err = Default().Stat(name)
	require.NoError(t, err)
	require.EqualValues(t, 0, fi.Size())

	g, err := l.Open(name) // a second handle shares the overlay
	require.NoError(t, err)
	require.Equal(t, want, readAll(t, g))
	b, err := ReadFile(l, name)
	require.NoError(t, err)
	require.Equal(t, want, b)

	require.NoError(t, g.Sync(), "Sync through any handle flushes the file")
	require.NoError(t, g.Close())
	require.Equal(t, want, osContent(t, name))

	writeAt(t, f, "HE", 0)
	require.Equal(t, want, osContent(t, name))
	require.NoError(t, f.Sync())
	require.Equal(t, "HEllo", string(osContent(t, name)[:5]))
}

func TestLazyPowerLoss(t *testing.T) {
	dir := t.TempDir()
	seg, meta := filepath.Join(dir, "seg"), filepath.Join(dir, "meta")
	a := bytes.Repeat([]byte("A"), 3000)
	b := bytes.Repeat([]byte("B"), 5000)

	l := NewLazy(Default())
	f, err := l.OpenReadWrite(seg)
	require.NoError(t, err)
	_, err = f.WriteAt(a, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	_, err = f.WriteAt(b, int64(len(a))) // extends the file: lost
	require.NoError(t, err)
	writeAt(t, f, "zz", 0) // overwrites synced data: lost
	g, err := l.Create(meta)
	require.NoError(t, err)
	writeAt(t, g, "never synced", 0)
	require.NoError(t, g.Close()) // closing does not write either

	// The process dies: its LazyFS and everything in it are gone. A new
	// process opens the directory afresh.
	l2 := NewLazy(Default())
	got, err := ReadFile(l2, seg)
	require.NoError(t, err)
	require.Equal(t, a, got, "synced A survives, unsynced B and the overwrite do not")
	got, err = ReadFile(l2, meta)
	require.NoError(t, err)
	require.Empty(t, got, "the created file exists, without its unsynced data")

	// The old process would still have seen its own writes.
	want := append([]byte("zz"), append(a[2:], b...)...)
	require.Equal(t, want, readAll(t, f))
	require.NoError(t, f.Close())
}

func TestLazyClosedFileKeepsUnsyncedData(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "c")
	l := NewLazy(Default())
	f, err := l.Create(name)
	require.NoError(t, err)
	writeAt(t, f, "cached", 0)
	require.NoError(t, f.Close())
	require.Error(t, f.Close(), "double close")
	_, err = f.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, os.ErrClosed)

	b, err := ReadFile(l, name)
	require.NoError(t, err)
	require.Equal(t, "cached", string(b), "as with a page cache, reopening sees the data")
	require.Empty(t, osContent(t, name))

	require.NoError(t, l.SyncAll())
	require.Equal(t, "cached", string(osContent(t, name)))
	l.mu.Lock()
	require.Empty(t, l.nodes, "a clean, closed file is released")
	l.mu.Unlock()
}

func TestLazyTruncate(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "t")
	l := NewLazy(Default())
	f, err := l.Create(name)
	require.NoError(t, err)
	defer f.Close()
	x := bytes.Repeat([]byte("x"), 100)
	_, err = f.WriteAt(x, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())

	writeAt(t, f, "dirty", 90) // cut off before it is ever synced
	require.NoError(t, f.Truncate(10))
	size, err := f.Size()
	require.NoError(t, err)
	require.EqualValues(t, 10, size)
	require.Len(t, osContent(t, name), 100, "the truncate is not on disk before Sync")
	require.NoError(t, f.Sync())
	require.Equal(t, x[:10], osContent(t, name))

	// Shrink and regrow between syncs: the cut bytes must read as zeros on
	// disk too, not as the old data.
	_, err = f.WriteAt(x, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Truncate(20))
	writeAt(t, f, "lost", 30) // beyond the cut: dropped by the next shrink
	require.NoError(t, f.Truncate(25))
	require.NoError(t, f.Truncate(60))
	writeAt(t, f, "y", 40)
	want := append(bytes.Repeat([]byte("x"), 20), make([]byte, 40)...)
	want[40] = 'y'
	require.Equal(t, want, readAll(t, f))
	require.NoError(t, f.Sync())
	require.Equal(t, want, osContent(t, name))

	// Growing by Truncate alone.
	require.NoError(t, f.Truncate(4096))
	require.NoError(t, f.Sync())
	require.Equal(t, append(want, make([]byte, 4096-60)...), osContent(t, name))
}

func TestLazyMapSeesLaterWrites(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "m")
	l := NewLazy(Default())
	f, err := l.Create(name)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(4096))
	require.NoError(t, f.Sync())
	m, err := f.Map(4096)
	require.NoError(t, err)
	_, err = f.Map(4097)
	require.Error(t, err, "cannot map beyond the size")
	writeAt(t, f, "abc", 100)
	require.Equal(t, "abc", string(m.Bytes()[100:103]))

	// Zeroing a tail the way commitlog does (shrink, regrow) shows in the map.
	require.NoError(t, f.Truncate(101))
	require.NoError(t, f.Truncate(4096))
	require.Equal(t, []byte("a\x00\x00"), m.Bytes()[100:103])

	// Growing past the buffer's capacity reallocates it; the old mapping
	// still sees later writes within its range.
	writeAt(t, f, "grow", 1<<20)
	writeAt(t, f, "after", 200)
	require.Equal(t, "after", string(m.Bytes()[200:205]))
	m2, err := f.Map(1<<20 + 4)
	require.NoError(t, err)
	writeAt(t, f, "both", 300)
	require.Equal(t, "both", string(m.Bytes()[300:304]))
	require.Equal(t, "both", string(m2.Bytes()[300:304]))
	require.NoError(t, f.Truncate(250))
	require.Equal(t, make([]byte, 10), m.Bytes()[250:260], "cut bytes read as zeros")
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "closing twice is harmless")
	require.NoError(t, m2.Close())

	e, err := f.Map(0)
	require.NoError(t, err)
	require.Empty(t, e.Bytes())
	require.NoError(t, e.Close())

	l.mu.Lock()
	n := l.nodes[lazyKey(name)]
	l.mu.Unlock()
	n.mu.RLock()
	require.Empty(t, n.maps)
	require.Empty(t, n.stale)
	n.mu.RUnlock()
}

func TestLazyWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	l := NewLazy(Default())
	require.NoError(t, WriteFileAtomic(l, dir, "f", []byte("one")))
	require.NoError(t, WriteFileAtomic(l, dir, "f", []byte("two")))
	b, err := ReadFile(l, Join(dir, "f"))
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	require.Equal(t, "two", string(osContent(t, Join(dir, "f"))), "WriteFileAtomic syncs")
	names, err := l.List(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"f"}, names)
	l.mu.Lock()
	require.Empty(t, l.nodes)
	l.mu.Unlock()
}

func TestLazyNamespace(t *testing.T) {
	dir := t.TempDir()
	l := NewLazy(Default())
	_, err := l.Open(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, ErrNotExist)

	// Rename carries unsynced data along with the file.
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	f, err := l.Create(a)
	require.NoError(t, err)
	writeAt(t, f, "data", 0)
	require.NoError(t, l.Rename(a, b))
	_, err = l.Open(a)
	require.ErrorIs(t, err, ErrNotExist)
	got, err := ReadFile(l, b)
	require.NoError(t, err)
	require.Equal(t, "data", string(got))
	require.NoError(t, f.Sync())
	require.Equal(t, "data", string(osContent(t, b)))

	// A file renamed over a cached one replaces it.
	c := filepath.Join(dir, "c")
	require.NoError(t, WriteFileAtomic(l, dir, "c", []byte("new")))
	require.NoError(t, l.Rename(c, b))
	got, err = ReadFile(l, b)
	require.NoError(t, err)
	require.Equal(t, "new", string(got))
	writeAt(t, f, "DATA", 0) // the old handle writes to the unlinked file
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.Equal(t, "new", string(osContent(t, b)))

	// Remove drops the cache; a new file at the path starts empty.
	g, err := l.OpenReadWrite(b)
	require.NoError(t, err)
	writeAt(t, g, "unsynced", 0)
	require.NoError(t, l.Remove(b))
	h, err := l.OpenReadWrite(b)
	require.NoError(t, err)
	require.Empty(t, readAll(t, h))
	require.Equal(t, "unsynced", string(readAll(t, g)))
	require.NoError(t, g.Close())
	require.NoError(t, h.Close())

	// Renaming a directory moves its cached files; RemoveAll drops them.
	sub, moved := filepath.Join(dir, "sub"), filepath.Join(dir, "moved")
	require.NoError(t, l.MkdirAll(sub, 0o755))
	k, err := l.Create(filepath.Join(sub, "k"))
	require.NoError(t, err)
	writeAt(t, k, "kept", 0)
	require.NoError(t, k.Close())
	require.NoError(t, l.Rename(sub, moved))
	got, err = ReadFile(l, filepath.Join(moved, "k"))
	require.NoError(t, err)
	require.Equal(t, "kept", string(got))
	require.NoError(t, l.RemoveAll(moved))
	_, err = l.Stat(filepath.Join(moved, "k"))
	require.ErrorIs(t, err, ErrNotExist)

	// Create over a cached file truncates it for every handle.
	r, err := l.Create(a)
	require.NoError(t, err)
	writeAt(t, r, "0123456789", 0)
	require.NoError(t, r.Sync())
	ro, err := l.Open(a)
	require.NoError(t, err)
	_, err = ro.WriteAt([]byte("x"), 0)
	require.ErrorIs(t, err, os.ErrPermission, "Open is read-only")
	require.ErrorIs(t, ro.Truncate(0), os.ErrPermission)
	w, err := l.Create(a)
	require.NoError(t, err)
	require.Empty(t, readAll(t, ro))
	require.Empty(t, osContent(t, a))
	for _, x := range []File{r, ro, w} {
		require.NoError(t, x.Close())
	}

	l.mu.Lock()
	require.Empty(t, l.nodes, "everything closed and clean")
	l.mu.Unlock()
}

// TestLazyReadOnlyUpgrade opens a file read-only first, then for writing: the
// shared node must get a writable underlying file for Sync to work.
func TestLazyReadOnlyUpgrade(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "u")
	require.NoError(t, os.WriteFile(name, []byte("old"), 0o644))
	l := NewLazy(Default())
	ro, err := l.Open(name)
	require.NoError(t, err)
	rw, err := l.OpenReadWrite(name)
	require.NoError(t, err)
	writeAt(t, rw, "new", 0)
	require.Equal(t, "new", string(readAll(t, ro)))
	require.NoError(t, ro.Sync())
	require.Equal(t, "new", string(osContent(t, name)))
	require.NoError(t, ro.Close())
	require.NoError(t, rw.Close())
}

// TestLazyConcurrent runs, under -race, the access pattern of a commitlog
// segment: one appender, a flusher syncing concurrently with the appends,
// readers using ReadAt, a mapping and fresh handles, and unrelated namespace
// traffic in the same directory.
func TestLazyConcurrent(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "seg")
	l := NewLazy(Default())
	const size = 256 << 10
	f, err := l.Create(name)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Sync())
	m, err := f.Map(size)
	require.NoError(t, err)
	pattern := func(off int64) byte { return byte(off*7 + off>>9 + 1) }

	var end atomic.Int64 // bytes written so far
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	stop := make(chan struct{})

	wg.Add(1)
	go func() { // appender
		defer wg.Done()
		defer close(stop)
		rng := rand.New(rand.NewPCG(1, 2))
		var off int64
		for off < size {
			n := min(int64(1+rng.IntN(700)), size-off)
			p := make([]byte, n)
			for i := range p {
				p[i] = pattern(off + int64(i))
			}
			if _, err := f.WriteAt(p, off); err != nil {
				report(err)
				return
			}
			off += n
			end.Store(off)
		}
	}()
	wg.Add(1)
	go func() { // flusher
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := f.Sync(); err != nil {
				report(err)
				return
			}
		}
	}()
	for r := range 3 {
		wg.Add(1)
		go func() { // readers
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			buf := make([]byte, 512)
			for {
				select {
				case <-stop:
					return
				default:
				}
				e := end.Load()
				if e == 0 {
					continue
				}
				off := rng.Int64N(e)
				p := buf[:min(int64(len(buf)), e-off)]
				if _, err := f.ReadAt(p, off); err != nil && err != io.EOF {
					report(err)
					return
				}
				mb := m.Bytes()[off : off+int64(len(p))]
				for i := range p {
					if want := pattern(off + int64(i)); p[i] != want || mb[i] != want {
						report(fmt.Errorf("offset %d: read %d, mapped %d, want %d", off+int64(i), p[i], mb[i], want))
						return
					}
				}
				if r == 0 { // a fresh handle, and Stat, see the overlay too
					g, err := l.Open(name)
					if err != nil {
						report(err)
						return
					}
					var one [1]byte
					if _, err := g.ReadAt(one[:], off); err != nil || one[0] != pattern(off) {
						report(fmt.Errorf("second handle at %d: %v %d", off, err, one[0]))
					}
					g.Close()
					if fi, err := l.Stat(name); err != nil || fi.Size() != size {
						report(fmt.Errorf("stat: %v", err))
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // namespace traffic on other files
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := WriteFileAtomic(l, dir, "meta", []byte(fmt.Sprint(i))); err != nil {
				report(err)
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}

	require.NoError(t, f.Sync())
	want := make([]byte, size)
	for i := range want {
		want[i] = pattern(int64(i))
	}
	require.Equal(t, want, osContent(t, name))
	require.NoError(t, m.Close())
	require.NoError(t, f.Close())
}

// TestSpans checks addSpan and clipSpans against a bitmap.
func TestSpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for round := 0; round < 200; round++ {
		const n = 200
		var bits [n]bool
		var s []span
		for op := 0; op < 30; op++ {
			if rng.IntN(8) == 0 {
				size := int64(rng.IntN(n))
				s = clipSpans(s, size)
				for i := size; i < n; i++ {
					bits[i] = false
				}
			} else {
				a := int64(rng.IntN(n))
				b := min(a+int64(rng.IntN(40)), n)
				s = addSpan(s, a, b)
				for i := a; i < b; i++ {
					bits[i] = true
				}
			}
			var got [n]bool
			for i, x := range s {
				require.Less(t, x.start, x.end, "spans are not empty: %v", s)
				if i > 0 {
					require.Less(t, s[i-1].end, x.start, "spans are sorted, disjoint, not adjacent: %v", s)
				}
				for j := x.start; j < x.end; j++ {
					got[j] = true
				}
			}
			require.Equal(t, bits, got, "round %d op %d: %v", round, op, s)
		}
	}
}
