package commitlog

import (
	"fmt"
	"sync"
	"testing"

	"github.com/raftmq/raftmq/internal/vfs"
)

// Benchmarks run on the real file system (b.TempDir), with real fsync.

func benchLog(b *testing.B, opts Options) *Log {
	b.Helper()
	if opts.SegmentSize == 0 {
		opts.SegmentSize = 256 << 20
	}
	l, err := Open(vfs.Default(), b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkAppendSyncGroupCommit: 64 writers, each appending one 1 KiB
// entry and waiting for it to be synced; the flusher group-commits.
func BenchmarkAppendSyncGroupCommit(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			l := benchLog(b, Options{Flush: FlushSync})
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
						err := l.Append(e)
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

// BenchmarkAppendAsync: one writer, 1 KiB entries, background flusher.
func BenchmarkAppendAsync(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			l := benchLog(b, Options{Flush: FlushAsync})
			data := make([]byte, 1024)
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
				if err := l.Append(ents[:n]...); err != nil {
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
	l, err := Open(vfs.Default(), dir, Options{SegmentSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 1024)
	var ents []Entry
	for i := uint64(1); i <= total/1064; i++ {
		ents = append(ents, Entry{Index: i, Term: 1, Data: data})
		if len(ents) == 256 {
			if err := l.Append(ents...); err != nil {
				b.Fatal(err)
			}
			ents = ents[:0]
		}
	}
	if err := l.Append(ents...); err != nil {
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
		l2, err := Open(vfs.Default(), dir, Options{SegmentSize: 256 << 20})
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
	l := benchLog(b, Options{Flush: FlushAsync})
	data := make([]byte, 1024)
	const n = 10000
	var ents []Entry
	for i := uint64(1); i <= n; i++ {
		ents = append(ents, Entry{Index: i, Term: 1, Data: data})
	}
	if err := l.Append(ents...); err != nil {
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
