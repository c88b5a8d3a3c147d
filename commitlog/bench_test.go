package commitlog

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/vfs"
)

// Benchmarks run on the real file system (b.TempDir), with real fsync.

func benchLog(b *testing.B, opts Options) (*Log, *Writer) {
	b.Helper()
	if opts.SegmentSize == 0 {
		opts.SegmentSize = 256 << 20
	}
	l, err := Open(vfs.Default(), b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l, writerT(b, l)
}

// BenchmarkAppendSyncGroupCommit: 64 writers, each appending one 1 KiB
// entry and waiting for it to be synced; the flusher group-commits.
func BenchmarkAppendSyncGroupCommit(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			l, lw := benchLog(b, Options{Flush: FlushSync})
			data := make([]byte, 1024)
			var mu sync.Mutex
			next := uint64(1)
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N / writers
			for w := 0; w < writers; w++ {
				n := per
				if w == 0 {
					n += b.N % writers
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; k < n; k++ {
						mu.Lock()
						e := Entry{Index: next, Term: 1, Data: data}
						next++
						err := lw.Append(e)
						mu.Unlock()
						if err == nil {
							err = l.waitDurable(e.Index)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// BenchmarkAppendSyncLatency: one writer appending one 1 KiB entry per call
// and waiting for its fdatasync (AppendSync in FlushSync mode), with the
// segment warm-up off (appends land in the sparse, preallocated segment)
// and on (they land in blocks zero-filled and synced ahead of them). It
// reports the latency percentiles of the calls, and the median of the calls
// whose entry reaches into a 4 KiB block no earlier entry touched (about a
// quarter of them): in a sparse segment those are the ones whose fdatasync
// also commits a block allocation. The warm run starts once the warmer has
// filled its initial window (64 MiB, about 70 ms of work), as it would have
// long before in a running broker; from then on it keeps pace in the
// background.
func BenchmarkAppendSyncLatency(b *testing.B) {
	for _, bc := range []struct {
		name string
		warm int64
	}{{"warm=off", -1}, {"warm=on", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			l, w := benchLog(b, Options{Flush: FlushSync, WarmAhead: bc.warm})
			data := make([]byte, 1024)
			// The first entry creates the segment; then let the warmer get
			// ahead.
			if err := w.AppendSync(Entry{Index: 1, Term: 1, Data: data}); err != nil {
				b.Fatal(err)
			}
			for !l.warmIdle() {
				time.Sleep(time.Millisecond)
			}
			lat := make([]time.Duration, 0, b.N)
			var fresh []time.Duration // appends that start a new 4 KiB block
			end := l.EndPosition()
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := w.AppendSync(Entry{Index: uint64(i + 2), Term: 1, Data: data}); err != nil {
					b.Fatal(err)
				}
				d := time.Since(t0)
				lat = append(lat, d)
				next := l.EndPosition()
				if (next-1)/warmAlign != (end-1)/warmAlign {
					fresh = append(fresh, d)
				}
				end = next
			}
			b.StopTimer()
			q := func(lat []time.Duration, p float64) float64 {
				if len(lat) == 0 {
					return 0
				}
				slices.Sort(lat)
				return float64(lat[int(p*float64(len(lat)-1))].Microseconds())
			}
			b.ReportMetric(q(lat, 0.5), "p50-µs")
			b.ReportMetric(q(lat, 0.99), "p99-µs")
			b.ReportMetric(q(lat, 0.999), "p99.9-µs")
			b.ReportMetric(q(fresh, 0.5), "newblock-p50-µs")
			st := l.warmStatus()
			b.ReportMetric(float64(st.Waits), "warm-waits")
		})
	}
}

// BenchmarkAppendAsync: one writer, background flusher; 1 KiB entries,
// and 128 B entries one per append (pop and ack entries' shape, where the
// tail cache holds the most chunks).
func BenchmarkAppendAsync(b *testing.B) {
	for _, c := range []struct{ batch, size int }{{1, 1024}, {32, 1024}, {1, 128}} {
		batch := c.batch
		b.Run(fmt.Sprintf("batch=%d/size=%d", batch, c.size), func(b *testing.B) {
			_, w := benchLog(b, Options{Flush: FlushAsync})
			data := make([]byte, c.size)
			ents := make([]Entry, batch)
			next := uint64(1)
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				for k := 0; k < n; k++ {
					ents[k] = Entry{Index: next, Term: 1, Data: data}
					next++
				}
				if err := w.Append(ents[:n]...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecoveryScan: Open after an unclean stop scans and verifies the
// CRC of every entry in the last segment.
func BenchmarkRecoveryScan(b *testing.B) {
	dir := b.TempDir()
	const total = 128 << 20
	// No warm-up: it would keep writing in the background of the timed
	// Opens.
	opts := Options{SegmentSize: 256 << 20, WarmAhead: -1}
	l, err := Open(vfs.Default(), dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	w := writerT(b, l)
	data := make([]byte, 1024)
	var ents []Entry
	for i := uint64(1); i <= total/1064; i++ {
		ents = append(ents, Entry{Index: i, Term: 1, Data: data})
		if len(ents) == 256 {
			if err := w.Append(ents...); err != nil {
				b.Fatal(err)
			}
			ents = ents[:0]
		}
	}
	if err := w.Append(ents...); err != nil {
		b.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	// Abandon it without Close, so the checkpoint says "not clean".
	l.flushMu.Lock()
	b.SetBytes(l.EndPosition())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l2, err := Open(vfs.Default(), dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// Leave it unclean again for the next round.
		close(l2.done)
		l2.wg.Wait()
		l2.closeFiles()
		b.StartTimer()
	}
}

// BenchmarkReadAt: 1 KiB reads by physical position from the page cache.
func BenchmarkReadAt(b *testing.B) {
	l, w := benchLog(b, Options{Flush: FlushAsync})
	data := make([]byte, 1024)
	const n = 10000
	var ents []Entry
	for i := uint64(1); i <= n; i++ {
		ents = append(ents, Entry{Index: i, Term: 1, Data: data})
	}
	if err := w.Append(ents...); err != nil {
		b.Fatal(err)
	}
	pos := make([]int64, 32)
	bufs := make([][]byte, 32)
	for k := range bufs {
		bufs[k] = make([]byte, 1024)
	}
	b.SetBytes(1024)
	b.ResetTimer()
	for i := 0; i < b.N; i += 32 {
		for k := range pos {
			p, _ := l.Position(uint64((i+k)%n) + 1)
			pos[k] = p + HeaderSize
		}
		if err := l.ReadMany(bufs, pos); err != nil {
			b.Fatal(err)
		}
	}
}
