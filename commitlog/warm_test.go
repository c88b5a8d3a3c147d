package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// guardFS checks the warm-up's one safety property on every write: zeros
// are only ever written over zeros. A write to a segment file of at least a
// block of zeros is the warmer's (the writer's buffers always hold a magic
// number); before it is applied, the bytes it covers are read back, under a
// lock that every write and truncation of every file takes, and any
// non-zero byte is a violation. Warm writes can be delayed (to make the
// writer catch up with the warmer) or held until released.
type guardFS struct {
	vfs.FS
	delay time.Duration

	mu         sync.Mutex // serialises writes and truncations
	violations []string
	warmWrites int

	hold    atomic.Bool   // hold warm writes until release is closed
	held    chan struct{} // receives when a warm write is being held
	release chan struct{}
}

type guardFile struct {
	vfs.File
	g    *guardFS
	name string
}

func newGuard(fs vfs.FS) *guardFS {
	return &guardFS{FS: fs, held: make(chan struct{}, 1), release: make(chan struct{})}
}

func (g *guardFS) Create(name string) (vfs.File, error) {
	f, err := g.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &guardFile{File: f, g: g, name: name}, nil
}

func (g *guardFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := g.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &guardFile{File: f, g: g, name: name}, nil
}

func (g *guardFS) check() (int, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.warmWrites, append([]string(nil), g.violations...)
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (f *guardFile) WriteAt(p []byte, off int64) (int, error) {
	g := f.g
	_, segFile := parseSegmentName(path.Base(f.name))
	warm := segFile && len(p) >= warmAlign && isZero(p)
	if warm {
		if g.hold.Load() {
			select {
			case g.held <- struct{}{}:
			default:
			}
			<-g.release
		}
		if g.delay > 0 {
			time.Sleep(g.delay)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if warm {
		g.warmWrites++
		cur := make([]byte, len(p))
		n, _ := f.File.ReadAt(cur, off)
		if !isZero(cur[:n]) {
			g.violations = append(g.violations, fmt.Sprintf("%s: zeros written over data in [%d, %d)", f.name, off, off+int64(len(p))))
		}
	}
	return f.File.WriteAt(p, off)
}

func (f *guardFile) Truncate(size int64) error {
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	return f.File.Truncate(size)
}

func waitWarmIdle(t *testing.T, l *Log) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !l.warmIdle() {
		if time.Now().After(deadline) {
			t.Fatalf("warm-up did not settle: %+v", l.warmStatus())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestWarmOptions(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want int64
	}{
		{Options{}, DefaultWarmAhead},
		{Options{Flush: FlushAsync}, 0},
		{Options{Flush: FlushAsync, WarmAhead: 1 << 20}, 1 << 20},
		{Options{WarmAhead: -1}, -1},
		{Options{WarmAhead: 5000}, 5000},
	} {
		o := c.opts
		require.NoError(t, o.fill())
		require.Equal(t, c.want, o.WarmAhead, "%+v", c.opts)
	}
	l := openT(t, vfs.NewMem(), Options{WarmAhead: 5000})
	require.Equal(t, int64(8192), l.warm.ahead, "rounded up to blocks")
	require.Equal(t, int64(warmAlign), l.warm.chunk)
	require.NoError(t, l.Close())
	l = openT(t, vfs.NewMem(), Options{})
	require.Equal(t, int64(DefaultWarmAhead), l.warm.ahead)
	require.Equal(t, int64(warmChunkMax), l.warm.chunk)
	require.NoError(t, l.Close())
	l = openT(t, vfs.NewMem(), Options{Flush: FlushAsync})
	w := writerT(t, l)
	require.LessOrEqual(t, l.warm.ahead, int64(0))
	require.NoError(t, w.AppendSync(mkEntries(1, 5, 1, varSize)...))
	require.Equal(t, int64(-1), l.warmStatus().Base, "off: no target")
	require.NoError(t, l.Close())
}

// The warmer keeps [end, end+ahead) of the active segment zeroed and
// synced, follows the writer across segment rolls, and changes no byte.
func TestWarmZeroesAheadOfWriter(t *testing.T) {
	g := newGuard(vfs.NewMem())
	const seg, ahead = 64 << 10, 16 << 10
	l := openT(t, g, Options{SegmentSize: seg, WarmAhead: ahead})
	w := writerT(t, l)
	fixed := func(uint64) int { return 500 }
	require.NoError(t, w.AppendSync(mkEntries(1, 10, 1, fixed)...))
	waitWarmIdle(t, l)
	st := l.warmStatus()
	end := l.EndPosition()
	require.Equal(t, int64(0), st.Base)
	require.Equal(t, end, st.End)
	require.GreaterOrEqual(t, st.Zeroed, end+ahead-l.warm.chunk)
	require.Equal(t, st.Zeroed, st.Synced)
	require.Greater(t, st.Chunks, 0)

	// Fill past the first segment: the warmer moves to the next one.
	require.NoError(t, w.AppendSync(mkEntries(11, 200, 1, fixed)...))
	waitWarmIdle(t, l)
	st = l.warmStatus()
	segs := l.Segments()
	require.Greater(t, len(segs), 1)
	last := segs[len(segs)-1]
	require.Equal(t, last.Base, st.Base)
	require.Equal(t, last.Written, st.End)
	require.GreaterOrEqual(t, st.Zeroed, min(last.Written+ahead-l.warm.chunk, seg))
	checkEntries(t, l, 1, 200, constTerm(1), fixed)
	require.NoError(t, l.Close())
	n, bad := g.check()
	require.Empty(t, bad)
	require.Greater(t, n, 0)

	l = openT(t, g, Options{SegmentSize: seg, WarmAhead: ahead})
	checkEntries(t, l, 1, 200, constTerm(1), fixed)
	require.NoError(t, l.Close())
}

// A writer that reaches a range the warmer has claimed waits for that
// chunk to be written, then writes over it.
func TestWarmWriterWaitsForClaim(t *testing.T) {
	g := newGuard(vfs.NewMem())
	g.hold.Store(true)
	l := openT(t, g, Options{SegmentSize: 64 << 10, WarmAhead: 16 << 10})
	w := writerT(t, l)
	defer l.Close()
	var once sync.Once
	release := func() {
		once.Do(func() {
			g.hold.Store(false)
			close(g.release)
		})
	}
	defer release() // before Close, should the test fail while holding
	require.NoError(t, w.Append(Entry{Index: 1, Term: 1, Data: body(1, 1)}))
	select {
	case <-g.held: // the warmer holds a claim on [4096, 8192)
	case <-time.After(5 * time.Second):
		t.Fatal("the warmer never claimed a range")
	}
	done := make(chan error, 1)
	go func() {
		// 3 entries of 2000 bytes reach past 4096.
		done <- w.Append(mkEntries(2, 4, 1, func(uint64) int { return 2000 })...)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for l.warmStatus().Waits == 0 {
		require.True(t, time.Now().Before(deadline), "writer never waited")
		time.Sleep(100 * time.Microsecond)
	}
	select {
	case err := <-done:
		t.Fatalf("append returned while the claim was held: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	require.NoError(t, <-done)
	require.NoError(t, l.Sync())
	checkEntries(t, l, 1, 4, constTerm(1), func(i uint64) int {
		if i == 1 {
			return 1
		}
		return 2000
	})
	_, bad := g.check()
	require.Empty(t, bad)
}

// Truncations move the warmer back to the new end, also when they empty
// the active segment and reopen the previous one.
func TestWarmTruncateSuffix(t *testing.T) {
	g := newGuard(vfs.NewMem())
	const seg, ahead = 16 << 10, 8 << 10
	l := openT(t, g, Options{SegmentSize: seg, WarmAhead: ahead})
	w := writerT(t, l)
	fixed := func(uint64) int { return 300 }
	require.NoError(t, w.AppendSync(mkEntries(1, 100, 1, fixed)...))
	waitWarmIdle(t, l)
	segs := l.Segments()
	require.Greater(t, len(segs), 2)
	active := segs[len(segs)-1]
	// Cut inside the active segment.
	from := active.FirstIndex + uint64(active.Entries)/2
	require.NoError(t, w.TruncateSuffix(from))
	st := l.warmStatus()
	require.Equal(t, active.Base, st.Base)
	require.Equal(t, l.EndPosition()-active.Base, st.End)
	waitWarmIdle(t, l)
	require.NoError(t, w.AppendSync(mkEntries(from, from+5, 2, fixed)...))
	// Cut at the active segment's first entry: it goes, the previous one
	// becomes active again.
	require.NoError(t, w.TruncateSuffix(active.FirstIndex))
	prev := segs[len(segs)-2]
	st = l.warmStatus()
	require.Equal(t, prev.Base, st.Base)
	require.Equal(t, prev.Written, st.End)
	waitWarmIdle(t, l)
	last := active.FirstIndex + 30
	require.NoError(t, w.AppendSync(mkEntries(active.FirstIndex, last, 3, fixed)...))
	term := func(i uint64) uint64 {
		if i >= active.FirstIndex {
			return 3
		}
		return 1
	}
	checkEntries(t, l, 1, last, term, fixed)
	require.NoError(t, l.Close())
	_, bad := g.check()
	require.Empty(t, bad)
	l = openT(t, g, Options{SegmentSize: seg, WarmAhead: ahead})
	checkEntries(t, l, 1, last, term, fixed)
	require.NoError(t, l.Close())
}

var errBodyChanged = errors.New("body changed")

// Appends, conflicting appends (truncations), rolls, prefix drops, resets
// and readers, all concurrent with a slowed-down warmer that the writer
// keeps catching up with. Run with -race.
func TestWarmRaces(t *testing.T) {
	for seed := uint64(0); seed < 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			mem := vfs.NewMem()
			g := newGuard(mem)
			g.delay = 50 * time.Microsecond
			const seg = 32 << 10
			l := openT(t, g, Options{SegmentSize: seg, WarmAhead: 8 << 10})
			w := writerT(t, l)
			var terms sync.Map // index -> term of the entry last appended there

			stop := make(chan struct{})
			readerErr := make(chan error, 1)
			go func() {
				for {
					select {
					case <-stop:
						readerErr <- nil
						return
					default:
					}
					first, last := l.FirstIndex(), l.LastIndex()
					if last < first {
						continue
					}
					// A concurrent truncation, prefix drop or reset can make
					// the range unavailable; what matters is that no entry
					// read has changed.
					err := l.Scan(first, true, func(e EntryRef) error {
						if want := body(e.Index, varSize(e.Index)); !bytes.Equal(e.Body, want) {
							return fmt.Errorf("%w: entry %d", errBodyChanged, e.Index)
						}
						return nil
					})
					if errors.Is(err, errBodyChanged) || errors.Is(err, ErrCorrupt) {
						readerErr <- err
						return
					}
				}
			}()

			term := uint64(1)
			synced := uint64(0)
			for step := 0; step < 300; step++ {
				first, last := l.FirstIndex(), l.LastIndex()
				next := last + 1
				switch r := rng.IntN(100); {
				case r < 12 && last >= first && last > synced:
					// A conflict: a new leader overwrites an unsynced suffix.
					lo := max(first, synced+1)
					next = lo + uint64(rng.IntN(int(last-lo)+1))
					term++
				case r < 14 && last > first+10:
					_, err := l.DropPrefix(last - 10)
					require.NoError(t, err)
					continue
				case r < 15:
					pos := l.EndPosition() + int64(rng.IntN(3000))
					if pos%seg < SegmentHeaderSize {
						pos += SegmentHeaderSize
					}
					require.NoError(t, w.Reset(next+5, pos))
					synced = next + 4
					continue
				}
				n := uint64(1 + rng.IntN(8))
				ents := mkEntries(next, next+n-1, term, varSize)
				if rng.IntN(3) == 0 {
					require.NoError(t, w.AppendSync(ents...))
					synced = next + n - 1
				} else {
					require.NoError(t, w.Append(ents...))
				}
				for i := next; i < next+n; i++ {
					terms.Store(i, term)
				}
			}
			close(stop)
			require.NoError(t, <-readerErr)
			waitWarmIdle(t, l)
			st := l.warmStatus()
			require.NoError(t, st.Err)
			t.Logf("warm chunks %d, writer waits %d", st.Chunks, st.Waits)
			termOf := func(i uint64) uint64 { v, _ := terms.Load(i); return v.(uint64) }
			first, last := l.FirstIndex(), l.LastIndex()
			checkEntries(t, l, first, last, termOf, varSize)
			require.NoError(t, l.Sync())
			crashed := mem.CrashClone(rng, 0.5)
			require.NoError(t, l.Close())
			warmWrites, bad := g.check()
			require.Empty(t, bad)
			require.Greater(t, warmWrites, 0)

			for _, fs := range []vfs.FS{g, crashed} {
				l2 := openT(t, fs, Options{SegmentSize: seg, WarmAhead: 8 << 10})
				checkEntries(t, l2, first, last, termOf, varSize)
				require.NoError(t, l2.Close())
			}
		})
	}
}

// With all the filler's operations of one kind failing, the log keeps
// working: the error is logged, the warm-up stops, appends and recovery are
// as without it.
func TestWarmFailureIsNotFatal(t *testing.T) {
	for _, c := range []struct {
		name string
		op   vfs.Op
		err  error
	}{
		{"write-eio", vfs.OpWrite, syscall.EIO},
		{"sync-eio", vfs.OpSync, syscall.EIO},
		{"open-emfile", vfs.OpOpen, syscall.EMFILE},
	} {
		t.Run(c.name, func(t *testing.T) {
			var armed atomic.Bool
			var injected atomic.Int32
			inj := vfs.InjectorFunc(func(op vfs.Op, p string) error {
				if !armed.Load() || op != c.op {
					return nil
				}
				// Only the warmer's calls fail: its goroutine, or its open.
				st := string(debug.Stack())
				if !strings.Contains(st, ".warmLoop(") && !strings.Contains(st, ".warmRetargetLocked(") {
					return nil
				}
				injected.Add(1)
				return &os.PathError{Op: op.String(), Path: p, Err: c.err}
			})
			mem := vfs.NewMem()
			var logBuf syncBuffer
			logger := slog.New(slog.NewTextHandler(&logBuf, nil))
			opts := Options{SegmentSize: 16 << 10, WarmAhead: 8 << 10, Logger: logger}
			l := openT(t, vfs.WithErrors(mem, inj), opts)
			w := writerT(t, l)
			fixed := func(uint64) int { return 300 }
			require.NoError(t, w.AppendSync(mkEntries(1, 10, 1, fixed)...))
			waitWarmIdle(t, l)
			require.NoError(t, l.warmStatus().Err)
			armed.Store(true)
			// Appends through several rolls (for the open case) and past the
			// warmed range (for the write and sync cases).
			for i := uint64(11); i <= 200; i += 10 {
				require.NoError(t, w.AppendSync(mkEntries(i, i+9, 1, fixed)...))
			}
			deadline := time.Now().Add(10 * time.Second)
			for l.warmStatus().Err == nil {
				require.True(t, time.Now().Before(deadline), "the warmer never failed")
				time.Sleep(100 * time.Microsecond)
			}
			st := l.warmStatus()
			require.ErrorIs(t, st.Err, c.err)
			require.Equal(t, int64(-1), st.Base)
			require.Equal(t, int32(1), injected.Load(), "the warmer stops after its first error")
			require.NoError(t, l.Err(), "the log is not failed")
			require.NoError(t, w.AppendSync(mkEntries(201, 300, 1, fixed)...))
			checkEntries(t, l, 1, 300, constTerm(1), fixed)
			// The error is published before it is logged.
			require.Eventually(t, func() bool { return strings.Contains(logBuf.String(), "warm-up stopped") },
				5*time.Second, time.Millisecond)
			require.Contains(t, logBuf.String(), c.err.Error())
			require.NoError(t, l.Close())
			armed.Store(false)

			l = openT(t, mem, opts)
			checkEntries(t, l, 1, 300, constTerm(1), fixed)
			require.NoError(t, l.Close())
		})
	}
}

// A full device pauses the warm-up instead of stopping it: it tries again
// and warms ahead once space frees; the log is never failed.
func TestWarmPausesOnFullDevice(t *testing.T) {
	var armed atomic.Bool
	var injected atomic.Int32
	inj := vfs.InjectorFunc(func(op vfs.Op, p string) error {
		if !armed.Load() || op != vfs.OpWrite || !strings.Contains(string(debug.Stack()), ".warmLoop(") {
			return nil
		}
		injected.Add(1)
		return &os.PathError{Op: op.String(), Path: p, Err: vfs.ErrNoSpace}
	})
	mem := vfs.NewMem()
	var logBuf syncBuffer
	opts := Options{SegmentSize: 64 << 10, WarmAhead: 16 << 10, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}
	l := openT(t, vfs.WithErrors(mem, inj), opts)
	w := writerT(t, l)
	defer l.Close()
	fixed := func(uint64) int { return 300 }
	require.NoError(t, w.AppendSync(mkEntries(1, 10, 1, fixed)...))
	waitWarmIdle(t, l)
	armed.Store(true)
	require.NoError(t, w.AppendSync(mkEntries(11, 60, 1, fixed)...))
	require.Eventually(t, func() bool { return injected.Load() > 0 }, 5*time.Second, time.Millisecond)
	zeroed := l.warmStatus().Zeroed
	require.NoError(t, l.warmStatus().Err, "a full device does not stop the warm-up")
	require.Eventually(t, func() bool { return strings.Contains(logBuf.String(), "warm-up paused") }, 5*time.Second, time.Millisecond)
	armed.Store(false)
	require.Eventually(t, func() bool { return l.warmStatus().Zeroed > zeroed }, 5*time.Second, time.Millisecond,
		"the warm-up did not resume after space freed")
	require.Eventually(t, func() bool { return strings.Contains(logBuf.String(), "warm-up resumed") }, 5*time.Second, time.Millisecond)
	require.NoError(t, l.Err())
	checkEntries(t, l, 1, 60, constTerm(1), fixed)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A crash after the warmer ran ahead of the writer (its zeros synced, the
// writer's last entries maybe not) or while it was running: recovery finds
// the same log as without warm-up, every synced entry, and a zero tail.
func TestWarmCrashRecovery(t *testing.T) {
	for seed := uint64(0); seed < 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		mem := vfs.NewMem()
		const seg = 16 << 10
		opts := Options{SegmentSize: seg, WarmAhead: 8 << 10}
		l := openT(t, mem, opts)
		w := writerT(t, l)
		synced := uint64(1 + rng.IntN(60))
		require.NoError(t, w.AppendSync(mkEntries(1, synced, 1, varSize)...))
		last := synced + uint64(rng.IntN(10))
		if last > synced {
			require.NoError(t, w.Append(mkEntries(synced+1, last, 1, varSize)...))
		}
		if seed%2 == 0 {
			waitWarmIdle(t, l) // the warmed range is synced
			if st := l.warmStatus(); alignUp(st.End, warmAlign) < seg {
				require.Greater(t, st.Synced, st.End, "seed %d: warmed ahead", seed)
			}
		}
		crashed := mem.CrashClone(rng, []float64{0, 0.5, 1}[seed%3])
		require.NoError(t, l.Close())

		l2, err := Open(crashed, "/log", opts)
		require.NoError(t, err, "seed %d", seed)
		w2 := writerT(t, l2)
		got := l2.LastIndex()
		require.GreaterOrEqual(t, got, synced, "seed %d", seed)
		require.LessOrEqual(t, got, last, "seed %d", seed)
		checkEntries(t, l2, 1, got, constTerm(1), varSize)
		// Everything after the last entry reads as zeros.
		for _, s := range l2.Segments() {
			if s.Sealed {
				continue
			}
			b, err := vfs.ReadFile(crashed, s.Path)
			require.NoError(t, err)
			require.True(t, isZero(b[s.Written:]), "seed %d: tail of %s not zero", seed, s.Path)
		}
		require.NoError(t, w2.AppendSync(mkEntries(got+1, got+20, 2, varSize)...))
		require.NoError(t, l2.Close())
		l3, err := Open(crashed, "/log", opts)
		require.NoError(t, err, "seed %d", seed)
		require.Equal(t, got+20, l3.LastIndex())
		require.NoError(t, l3.Close())
	}
}

// On a real file system the warmer allocates the blocks ahead of the
// writer (the sparse file gets denser), and a log abandoned without Close
// after warm-up ran ahead recovers.
func TestWarmRealFiles(t *testing.T) {
	const seg, ahead = 8 << 20, 2 << 20
	allocated := func(p string) int64 {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Blocks * 512
	}
	fixed := func(uint64) int { return 1000 }
	for _, warm := range []int64{-1, ahead} {
		dir := t.TempDir()
		fs := &chroot{FS: vfs.Default(), root: dir}
		opts := Options{SegmentSize: seg, WarmAhead: warm}
		l := openT(t, fs, opts)
		w := writerT(t, l)
		require.NoError(t, w.AppendSync(mkEntries(1, 100, 1, fixed)...))
		waitWarmIdle(t, l)
		segPath := dir + "/log/" + segmentName(0)
		end := l.EndPosition()
		if warm < 0 {
			require.Less(t, allocated(segPath), end+64<<10, "without warm-up only written blocks are allocated")
		} else {
			require.GreaterOrEqual(t, allocated(segPath), end+ahead-l.warm.chunk, "warmed blocks are allocated")
		}
		// Abandon the log, as a crash would: no clean checkpoint.
		close(l.done)
		l.wg.Wait()
		l.closeFiles()

		l = openT(t, fs, opts)
		w = writerT(t, l)
		checkEntries(t, l, 1, 100, constTerm(1), fixed)
		b, err := os.ReadFile(segPath)
		require.NoError(t, err)
		require.True(t, isZero(b[end:]), "the tail reads as zeros")
		require.NoError(t, w.AppendSync(mkEntries(101, 200, 1, fixed)...))
		require.NoError(t, l.Close())
		l = openT(t, fs, opts)
		checkEntries(t, l, 1, 200, constTerm(1), fixed)
		require.NoError(t, l.Close())
	}
}

// Through a LazyFS (the chaos harness's power-loss file system), a power
// loss after warm-up ran ahead keeps every synced entry.
func TestWarmLazyFSPowerLoss(t *testing.T) {
	dir := t.TempDir()
	disk := &chroot{FS: vfs.Default(), root: dir}
	opts := Options{SegmentSize: 1 << 20, WarmAhead: 256 << 10}
	l := openT(t, vfs.NewLazy(disk), opts)
	w := writerT(t, l)
	require.NoError(t, w.AppendSync(mkEntries(1, 50, 1, varSize)...))
	require.NoError(t, w.Append(mkEntries(51, 60, 1, varSize)...))
	waitWarmIdle(t, l)
	require.Greater(t, l.warmStatus().Chunks, 0)
	// Power loss: whatever the LazyFS holds unsynced is gone.
	close(l.done)
	l.wg.Wait()
	l.closeFiles()

	l = openT(t, disk, opts)
	w = writerT(t, l)
	last := l.LastIndex()
	require.GreaterOrEqual(t, last, uint64(50))
	checkEntries(t, l, 1, last, constTerm(1), varSize)
	require.NoError(t, w.AppendSync(mkEntries(last+1, last+10, 2, varSize)...))
	require.NoError(t, l.Close())
}

// The warmer pauses while the writer appends faster than WarmMaxRate and
// warms again from the writer's end once it slows down.
func TestWarmPausesForFastWriter(t *testing.T) {
	opts := Options{SegmentSize: 256 << 20, WarmAhead: 1 << 20, WarmMaxRate: 1 << 20}
	l := openT(t, vfs.NewMem(), opts)
	w := writerT(t, l)
	defer l.Close()
	fixed := func(uint64) int { return 4000 }
	idx := uint64(1)
	// Fast: 40 KB a millisecond or so, far above 1 MiB/s, until the
	// warmer pauses (it measures over warmRateWindow).
	deadline := time.Now().Add(10 * time.Second)
	for l.warmStatus().Pauses == 0 {
		require.True(t, time.Now().Before(deadline), "a fast writer never paused the warmer: %+v", l.warmStatus())
		require.NoError(t, w.AppendSync(mkEntries(idx, idx+9, 1, fixed)...))
		idx += 10
		time.Sleep(time.Millisecond)
	}
	for range 50 { // a little longer, paused
		require.NoError(t, w.AppendSync(mkEntries(idx, idx+9, 1, fixed)...))
		idx += 10
	}
	st := l.warmStatus()
	require.Less(t, st.Zeroed, st.End+int64(warmAlign), "nothing warmed ahead while paused: %+v", st)
	// Slow: the warmer runs ahead of the writer again.
	time.Sleep(3 * warmRateWindow)
	require.NoError(t, w.AppendSync(mkEntries(idx, idx, 1, fixed)...))
	deadline = time.Now().Add(10 * time.Second)
	// Resumed: at least half the distance warmed and synced ahead (the
	// warmer works in whole chunks of a quarter of it).
	for st := l.warmStatus(); st.Synced < st.End+(1<<20)/2; st = l.warmStatus() {
		require.True(t, time.Now().Before(deadline), "the warmer did not resume: %+v", l.warmStatus())
		time.Sleep(5 * time.Millisecond)
	}
}
