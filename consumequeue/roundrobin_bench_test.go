package consumequeue

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// BenchmarkRoundRobin is the store's apply loop with sends spread over
// 1,024 queues, on the OS file system: units are put round-robin over the
// queues with PutBuffered, every `flush` units the queues touched are
// flushed (the end of an apply chunk), and a checkpointer goroutine does
// what the store's checkpoint does every second: MarkDirty while holding
// the writer's lock (the store's apply lock), then SyncFS and SyncedByFS
// beside the writer. With prewrite, the checkpointer first calls
// Set.WriteBuffered beside the writer, so that MarkDirty has less to
// write under the lock. ns/op is per unit; checkpoints/s and mark-ms (the
// time MarkDirty held the writer's lock, on average) are reported too.
// open=256 keeps fewer files open than there are queues, so files are
// closed and reopened all the time. The queues' first files are created
// before the timer starts. Run it with a -benchtime of a few seconds, so
// that several checkpoints fall inside.
func BenchmarkRoundRobin(b *testing.B) {
	const queues = 1024
	for _, c := range []struct {
		flush, maxOpen int
		prewrite       bool
	}{
		{64, queues, false}, {64, 256, false}, {1024, queues, false}, {1024, 256, false},
		{64, queues, true}, {64, 256, true},
	} {
		name := fmt.Sprintf("flush=%d/open=%d", c.flush, c.maxOpen)
		if c.prewrite {
			name += "/prewrite"
		}
		b.Run(name, func(b *testing.B) { benchRoundRobin(b, queues, c.flush, c.maxOpen, c.prewrite) })
	}
}

func benchRoundRobin(b *testing.B, queues, flush, maxOpen int, prewrite bool) {
	fs, root := vfs.Default(), b.TempDir()
	set, err := OpenSet(fs, root, benchOwnerOptions(Options{MaxOpenFiles: maxOpen}))
	require.NoError(b, err)
	qs := make([]*Queue, queues)
	next := make([]int64, queues)
	phy := int64(0)
	for i := range qs {
		topic, id := queueName(i)
		qs[i], err = set.Queue(topic, id, true)
		require.NoError(b, err)
		require.NoError(b, qs[i].Put(0, phy, 100, 0))
		next[i], phy = 1, phy+100
	}
	marks, err := set.MarkDirty()
	require.NoError(b, err)
	require.NoError(b, fs.SyncFS(root))
	set.SyncedByFS(marks)

	var (
		applyMu   sync.Mutex // the store's apply lock
		stop      = make(chan struct{})
		done      = make(chan struct{})
		failure   atomic.Pointer[error]
		marking   atomic.Int64 // ns MarkDirty held applyMu, summed
		points    atomic.Int64 // checkpoints taken
		started   = time.Now()
		ckptEvery = time.Second
	)
	go func() { // the checkpointer
		defer close(done)
		t := time.NewTicker(ckptEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if prewrite {
				if err := benchWriteBuffered(set); err != nil {
					failure.CompareAndSwap(nil, &err)
					return
				}
			}
			applyMu.Lock()
			start := time.Now()
			marks, err := set.MarkDirty()
			marking.Add(int64(time.Since(start)))
			applyMu.Unlock()
			if err == nil {
				err = fs.SyncFS(root)
			}
			if err != nil {
				failure.CompareAndSwap(nil, &err)
				return
			}
			set.SyncedByFS(marks)
			points.Add(1)
		}
	}()

	touched := make([]*Queue, 0, min(flush, queues))
	i := 0
	applyMu.Lock()
	for b.Loop() {
		k := i % queues
		q := qs[k]
		if err := q.PutBuffered(next[k], phy, 100, int64(i)); err != nil {
			b.Fatal(err)
		}
		next[k]++
		phy += 100
		if len(touched) < cap(touched) {
			touched = append(touched, q) // round-robin: flush units touch distinct queues
		}
		i++
		if i%flush == 0 {
			for _, q := range touched {
				if err := q.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			touched = touched[:0]
			applyMu.Unlock() // let a checkpoint in, as Apply does between calls
			applyMu.Lock()
		}
	}
	applyMu.Unlock()
	b.StopTimer()
	close(stop)
	<-done
	if p := failure.Load(); p != nil {
		b.Fatal(*p)
	}
	elapsed := time.Since(started)
	if n := points.Load(); n > 0 {
		b.ReportMetric(float64(n)/elapsed.Seconds(), "checkpoints/s")
		b.ReportMetric(float64(marking.Load())/float64(n)/1e6, "mark-ms")
	}
	require.NoError(b, set.Close())
}

// BenchmarkNewQueues creates queues and puts one unit into each, flushed,
// on the OS file system: the cost the apply loop pays for each queue's first
// message (its directory and first file). ns/op is per queue.
func BenchmarkNewQueues(b *testing.B) {
	fs, root := vfs.Default(), b.TempDir()
	set, err := OpenSet(fs, root, benchOwnerOptions(Options{MaxOpenFiles: 256}))
	require.NoError(b, err)
	i := 0
	for b.Loop() {
		topic, id := queueName(i)
		q, err := set.Queue(topic, id, true)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.PutBuffered(0, int64(i)*100, 100, 0); err != nil {
			b.Fatal(err)
		}
		if err := q.Flush(); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	marks, err := set.MarkDirty()
	require.NoError(b, err)
	require.NoError(b, fs.SyncFS(root))
	set.SyncedByFS(marks)
	require.NoError(b, set.Close())
}

// BenchmarkMarkDirty measures what a checkpoint's MarkDirty costs the
// store's apply loop, which waits for it: 1,024 queues on the OS file
// system each get `units` units (flushed, so visible) since the last
// checkpoint, then MarkDirty writes them; ns/op is one MarkDirty (the
// SyncFS and SyncedByFS that follow are not timed). units=100 is 100,000
// messages a second spread over 1,024 queues.
func BenchmarkMarkDirty(b *testing.B) {
	const queues = 1024
	for _, units := range []int64{10, 100, 1000} {
		for _, maxOpen := range []int{queues, 256} {
			b.Run(fmt.Sprintf("units=%d/open=%d", units, maxOpen), func(b *testing.B) {
				b.StopTimer()
				fs, root := vfs.Default(), b.TempDir()
				set, err := OpenSet(fs, root, benchOwnerOptions(Options{MaxOpenFiles: maxOpen}))
				require.NoError(b, err)
				qs := make([]*Queue, queues)
				next := make([]int64, queues)
				for i := range qs {
					topic, id := queueName(i)
					qs[i], err = set.Queue(topic, id, true)
					require.NoError(b, err)
				}
				phy := int64(0)
				b.ResetTimer()
				for i := 0; i < b.N+1; i++ {
					b.StopTimer()
					for k := int64(0); k < units; k++ {
						for j, q := range qs {
							if err := q.PutBuffered(next[j], phy, 100, 0); err != nil {
								b.Fatal(err)
							}
							next[j]++
							phy += 100
						}
						if k%16 == 15 || k == units-1 {
							for _, q := range qs {
								if err := q.Flush(); err != nil {
									b.Fatal(err)
								}
							}
						}
					}
					if i > 0 { // the first round creates the files
						b.StartTimer()
					}
					marks, err := set.MarkDirty()
					b.StopTimer()
					require.NoError(b, err)
					require.NoError(b, fs.SyncFS(root))
					set.SyncedByFS(marks)
				}
				require.NoError(b, set.Close())
			})
		}
	}
}
