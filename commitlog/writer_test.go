package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// termBody is the body of entry i written in term t: a different entry at
// the same index (after a truncation) has different bytes and size.
func termBody(i, t uint64) []byte {
	b := make([]byte, int(i*37+t*101)%700)
	for k := range b {
		b[k] = byte(i*31 + t*7 + uint64(k))
	}
	return b
}

// cut is a completed truncation: entries at or after from written in a
// term below term are gone.
type cut struct{ from, term uint64 }

// TestReadersDuringWrites runs one writer (appends, conflicting appends
// that truncate a suffix, explicit truncations) with retention dropping
// segments and readers using every read path at the same time, on real
// files and in memory. A reader must never see a half-written entry
// (wrong body, bad CRC) nor one a completed truncation removed. Run it
// under -race: the writer's state is read without locks, so any read or
// write the single-writer rule does not allow shows up there.
func TestReadersDuringWrites(t *testing.T) {
	for name, mk := range fsKinds(t) {
		for _, tail := range []int64{0, -1} {
			t.Run(fmt.Sprintf("%s/tail=%d", name, tail), func(t *testing.T) {
				l := openT(t, mk(), Options{TailCache: tail})
				readersDuringWrites(t, l, 400*time.Millisecond)
				require.NoError(t, l.Close())
			})
		}
	}
}

func readersDuringWrites(t *testing.T, l *Log, d time.Duration) {
	w := writerT(t, l)
	defer w.Release()
	var (
		evMu    sync.Mutex
		events  []cut
		stop    atomic.Bool
		wg      sync.WaitGroup
		reads   atomic.Int64
		cuts    atomic.Int64
		dropped atomic.Int64
	)
	fail := func(format string, args ...any) {
		stop.Store(true)
		t.Errorf(format, args...)
	}
	snapshot := func() []cut {
		evMu.Lock()
		defer evMu.Unlock()
		return append([]cut(nil), events...)
	}
	// check reports what is wrong with entry (i, term, body) read after
	// the truncations in evs completed, or "".
	check := func(evs []cut, i, term uint64, body []byte) string {
		if !bytes.Equal(body, termBody(i, term)) {
			return fmt.Sprintf("entry %d term %d: body is not the one written", i, term)
		}
		for _, c := range evs {
			if i >= c.from && term < c.term {
				return fmt.Sprintf("entry %d term %d: truncated by a cut from %d in term %d", i, term, c.from, c.term)
			}
		}
		return ""
	}
	benign := func(err error) bool {
		return errors.Is(err, ErrCompacted) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBadPosition)
	}

	// The writer.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		term, next := uint64(1), uint64(1)
		// Run for d, and on a loaded machine until something was
		// truncated and dropped (within 15 s).
		start := time.Now()
		for !stop.Load() {
			if el := time.Since(start); el > 15*time.Second || (el > d && cuts.Load() >= 3 && dropped.Load() > 0) {
				break
			}
			first := l.FirstIndex()
			var c cut
			switch r := rng.IntN(100); {
			case r < 6 && next > first+6:
				// A conflict: new entries from a recent index, in a
				// new term, truncating what followed it.
				from := next - 1 - uint64(rng.IntN(5))
				term++
				var ents []Entry
				for i := from; i < from+uint64(1+rng.IntN(4)); i++ {
					ents = append(ents, Entry{Index: i, Term: term, Data: termBody(i, term)})
				}
				if err := w.Append(ents...); err != nil {
					fail("conflicting append at %d: %v", from, err)
					return
				}
				next = from + uint64(len(ents))
				c = cut{from: from, term: term}
			case r < 8 && next > first+6:
				from := next - uint64(1+rng.IntN(5))
				if err := w.TruncateSuffix(from); err != nil {
					fail("truncate from %d: %v", from, err)
					return
				}
				term++ // so that the next entries at from differ
				next = from
				c = cut{from: from, term: term}
			default:
				var ents []Entry
				for k := 0; k < 1+rng.IntN(8); k++ {
					ents = append(ents, Entry{Index: next, Term: term, Data: termBody(next, term)})
					next++
				}
				if err := w.Append(ents...); err != nil {
					fail("append at %d: %v", ents[0].Index, err)
					return
				}
				continue
			}
			cuts.Add(1)
			evMu.Lock()
			events = append(events, c)
			evMu.Unlock()
		}
		stop.Store(true)
	}()

	// Retention, on its own goroutine as in a broker.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if last := l.LastIndex(); last > 100 {
				n, err := l.DropPrefix(last - 100)
				if err != nil {
					fail("drop prefix: %v", err)
					return
				}
				dropped.Add(n)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// Readers.
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			for !stop.Load() {
				evs := snapshot()
				first, last := l.FirstIndex(), l.LastIndex()
				if last < first {
					continue
				}
				lo := first + uint64(rng.IntN(int(last-first+1)))
				ents, err := l.Entries(lo, last+1, 1<<20)
				if err != nil && !benign(err) {
					fail("entries [%d, %d]: %v", lo, last, err)
					return
				}
				var prevTerm uint64
				for k, e := range ents {
					if e.Index != lo+uint64(k) || e.Term < prevTerm {
						fail("entries from %d: #%d is index %d term %d after term %d", lo, k, e.Index, e.Term, prevTerm)
						return
					}
					prevTerm = e.Term
					if msg := check(evs, e.Index, e.Term, e.Data); msg != "" {
						fail("Entries: %s", msg)
						return
					}
				}
				// ReadAt of one entry at its position: the header says how
				// long the entry is, and a second ReadAt takes header and
				// body at once. Only one call is atomic: between the two a
				// truncation may rewrite the position with another entry,
				// whose header the second read then carries.
				if pos, err := l.Position(lo); err == nil {
					var h [HeaderSize]byte
					if err := l.ReadAt(h[:], pos); err == nil {
						b := make([]byte, HeaderSize+int(binary.BigEndian.Uint32(h[entOffBodyLen:])))
						if err := l.ReadAt(b, pos); err == nil {
							i, term := binary.BigEndian.Uint64(b[entOffIndex:]), binary.BigEndian.Uint64(b[entOffTerm:])
							n := int(binary.BigEndian.Uint32(b[entOffBodyLen:]))
							if i == lo && HeaderSize+n == len(b) {
								if msg := check(evs, i, term, b[HeaderSize:]); msg != "" {
									fail("ReadAt: %s", msg)
									return
								}
							}
						}
					} else if !benign(err) {
						fail("read at %d: %v", pos, err)
						return
					}
				}
				// Scan with CRC verification, a few entries.
				n := 0
				err = l.Scan(lo, true, func(e EntryRef) error {
					if msg := check(evs, e.Index, e.Term, e.Body); msg != "" {
						return errors.New(msg)
					}
					if n++; n == 16 {
						return io.EOF
					}
					return nil
				})
				if err != nil && !benign(err) {
					fail("Scan from %d: %v", lo, err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Positive(t, reads.Load(), "reads")
	require.Positive(t, cuts.Load(), "truncations")
	require.Positive(t, dropped.Load(), "bytes dropped")
	t.Logf("%d reads, %d truncations, %d bytes dropped, last index %d", reads.Load(), cuts.Load(), dropped.Load(), l.LastIndex())
}

// TestWriterHandle: the log hands out one writer at a time. A second
// Writer fails until the first is released, a released handle writes
// nothing, and a closed log hands out none.
func TestWriterHandle(t *testing.T) {
	l := openT(t, vfs.NewMem(), Options{})
	w1, err := l.Writer()
	require.NoError(t, err)
	require.NoError(t, w1.AppendSync(mkEntries(1, 3, 1, varSize)...))
	_, err = l.Writer()
	require.ErrorIs(t, err, ErrWriterTaken)
	w1.Release()
	w1.Release() // a second Release does nothing
	require.ErrorIs(t, w1.Append(mkEntries(4, 4, 1, varSize)...), ErrWriterReleased)
	require.ErrorIs(t, w1.AppendSync(mkEntries(4, 4, 1, varSize)...), ErrWriterReleased)
	require.ErrorIs(t, w1.TruncateSuffix(2), ErrWriterReleased)
	require.ErrorIs(t, w1.Reset(10, 0), ErrWriterReleased)
	require.Equal(t, uint64(3), l.LastIndex(), "a released handle changed nothing")

	w2, err := l.Writer()
	require.NoError(t, err, "the writer is free again after Release")
	_, err = l.Writer()
	require.ErrorIs(t, err, ErrWriterTaken)
	w1.Release() // the old handle's Release does not free the new one
	_, err = l.Writer()
	require.ErrorIs(t, err, ErrWriterTaken)
	require.NoError(t, w2.AppendSync(mkEntries(4, 5, 1, varSize)...))
	checkEntries(t, l, 1, 5, constTerm(1), varSize)

	require.NoError(t, l.Close())
	require.ErrorIs(t, w2.Append(mkEntries(6, 6, 1, varSize)...), ErrClosed)
	w2.Release()
	_, err = l.Writer()
	require.ErrorIs(t, err, ErrClosed)
}

// TestSecondWriterPanics: in race-detector builds, a writing call made
// while another is under way (two goroutines sharing one handle) panics
// before it changes anything.
func TestSecondWriterPanics(t *testing.T) {
	if !raceEnabled {
		t.Skip("the single-writer check is compiled into race-detector builds only")
	}
	l := openT(t, vfs.NewMem(), Options{})
	w := writerT(t, l)
	require.NoError(t, w.Append(mkEntries(1, 3, 1, varSize)...))
	l.enterWriter() // a writer under way
	require.Panics(t, func() { _ = w.Append(mkEntries(4, 4, 1, varSize)...) })
	require.Panics(t, func() { _ = w.AppendSync(mkEntries(4, 4, 1, varSize)...) })
	require.Panics(t, func() { _ = w.TruncateSuffix(2) })
	require.Panics(t, func() { _ = w.Reset(10, 0) })
	l.exitWriter()
	require.Equal(t, uint64(3), l.LastIndex(), "the refused calls changed nothing")
	// One writer after the other, from different goroutines, is fine.
	done := make(chan error)
	go func() { done <- w.Append(mkEntries(4, 4, 1, varSize)...) }()
	require.NoError(t, <-done)
	require.NoError(t, w.TruncateSuffix(3))
	require.Equal(t, uint64(2), l.LastIndex())
	require.NoError(t, l.Close())
}
