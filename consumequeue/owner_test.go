package consumequeue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// ownerRun is one run of an owner that follows the OwnerSyncsFS protocol,
// as the store does: it puts units into many queues through a Set that
// keeps 2 files open, flushes, reads, and takes checkpoints in three steps
// (MarkDirty, SyncFS, SyncedByFS) with writes in between, as the store's
// checkpoint runs beside Apply; retention runs after a whole checkpoint.
type ownerRun struct {
	t      *testing.T
	rng    *rand.Rand
	mem    *vfs.MemFS
	opts   Options
	set    *Set
	qs     []*Queue
	end    []int64 // units put (visible or not)
	ckpt   []int64 // the last completed checkpoint's offsets
	marked []int64 // the offsets recorded at the MarkDirty in progress
	marks  []SyncMark
	phase  int // 0 idle, 1 marked, 2 synced (SyncedByFS pending)
}

func newOwnerRun(t *testing.T, seed uint64, queues, perFile int) *ownerRun {
	r := &ownerRun{
		t: t, rng: newRand(seed), mem: vfs.NewMem(),
		opts: Options{UnitsPerFile: perFile, MaxOpenFiles: 2, OwnerSyncsFS: true},
		qs:   make([]*Queue, queues), end: make([]int64, queues), ckpt: make([]int64, queues),
	}
	var err error
	r.set, err = OpenSet(r.mem, "/cq", r.opts)
	require.NoError(t, err)
	return r
}

// queue returns the i-th queue, creating it on first use.
func (r *ownerRun) queue(i int) *Queue {
	if r.qs[i] == nil {
		topic, id := queueName(i)
		q, err := r.set.Queue(topic, id, true)
		require.NoError(r.t, err)
		r.qs[i] = q
	}
	return r.qs[i]
}

// checkpointStep moves the checkpoint in progress one step on.
func (r *ownerRun) checkpointStep() {
	switch r.phase {
	case 0:
		// Under the store's apply lock: MarkDirty and the record of the
		// queue offsets it covers.
		marks, err := r.set.MarkDirty()
		require.NoError(r.t, err)
		r.marks, r.marked = marks, append([]int64(nil), r.end...)
	case 1:
		require.NoError(r.t, r.mem.SyncFS("/cq"))
		copy(r.ckpt, r.marked) // the owner commits its record now
	case 2:
		r.set.SyncedByFS(r.marks)
		r.marks = nil
	}
	r.phase = (r.phase + 1) % 3
}

func (r *ownerRun) step() {
	perFile := int64(r.opts.UnitsPerFile)
	i := r.rng.IntN(len(r.qs))
	switch x := r.rng.IntN(27); {
	case x == 24:
		r.burst()
	case x > 24:
		// A snapshot install: the queue restarts at an offset the owner
		// records at once (the store's snapshot carries its own records).
		q := r.queue(i)
		off := []int64{0, r.rng.Int64N(3 * perFile)}[x-25]
		require.NoError(r.t, q.ResetTo(off))
		r.end[i], r.ckpt[i] = off, off
		if r.marked != nil {
			r.marked[i] = off
		}
	case x < 10:
		q := r.queue(i)
		n := 1 + r.rng.Int64N(2*perFile)
		putBuffered(r.t, q, r.end[i], r.end[i]+n, 0)
		r.end[i] += n
		switch r.rng.IntN(4) {
		case 0: // left buffered, invisible
		case 1:
			require.NoError(r.t, q.Flush())
			require.NoError(r.t, q.WriteBuffered())
		default:
			require.NoError(r.t, q.Flush())
		}
	case x < 14:
		q := r.queue(i)
		if hi := q.MaxOffset(); hi > q.MinOffset() {
			off := q.MinOffset() + r.rng.Int64N(hi-q.MinOffset())
			u, err := q.Get(off)
			require.NoError(r.t, err)
			require.Equal(r.t, unitAt(off, 0), u)
		}
	case x < 23:
		r.checkpointStep()
	case x == 23:
		// Retention, as the store runs it: after a whole checkpoint, and
		// below what every queue holds.
		for r.phase != 0 {
			r.checkpointStep()
		}
		for k := 0; k < 3; k++ {
			r.checkpointStep()
		}
		low := r.ckpt[0]
		for _, c := range r.ckpt {
			low = min(low, c)
		}
		if low > 0 {
			_, err := r.set.DeleteBefore(unitAt(r.rng.Int64N(low), 0).PhyOffset)
			require.NoError(r.t, err)
		}
	}
	require.LessOrEqual(r.t, r.set.OpenFiles(), 2)
}

// burst creates a queue and fills files of it at once: its first file's
// creation is not covered by a checkpoint when it rolls to the next.
func (r *ownerRun) burst() {
	perFile := int64(r.opts.UnitsPerFile)
	for i := range r.qs {
		if r.qs[i] != nil {
			continue
		}
		q := r.queue(i)
		n := 2*perFile + 1 + r.rng.Int64N(perFile)
		putBuffered(r.t, q, 0, n, 0)
		r.end[i] = n
		require.NoError(r.t, q.Flush())
		require.NoError(r.t, q.WriteBuffered())
		return
	}
}

// recover opens a crashed copy of the file system as the owner does: it
// cuts every queue back to the checkpoint and checks that every unit the
// checkpoint covers is there, in place; then it puts the later units again,
// takes a checkpoint, and checks that a second crash loses nothing. It
// returns the recovery warnings (repairs) by message and the units of
// surviving unsynced writes it cut.
func (r *ownerRun) recover(name string, crashed *vfs.MemFS, warnings *warningCounts) (cut int64) {
	t := r.t
	opts := r.opts
	opts.Logger = slog.New(warnings)
	set, err := OpenSet(crashed, "/cq", opts)
	require.NoError(t, err, name)
	qs := make([]*Queue, len(r.qs))
	for i := range qs {
		topic, id := queueName(i)
		q, err := set.Queue(topic, id, false)
		if errors.Is(err, ErrNoQueue) {
			require.Zero(t, r.ckpt[i], "%s: queue %d lost", name, i)
			continue
		}
		require.NoError(t, err, name)
		require.NoError(t, q.checkInvariants(), name)
		c := r.ckpt[i]
		require.GreaterOrEqual(t, q.MaxOffset(), c, "%s: queue %d lost units the checkpoint covers", name, i)
		require.LessOrEqual(t, q.MinOffset(), c, "%s: queue %d", name, i)
		cut += q.MaxOffset() - c
		require.NoError(t, q.TruncateTo(c), "%s: queue %d", name, i)
		require.Equal(t, c, q.MaxOffset(), name)
		checkRange(t, q, q.MinOffset(), c, 0)
		qs[i] = q
	}
	for i, q := range qs {
		if r.end[i] == 0 {
			continue
		}
		if q == nil {
			topic, id := queueName(i)
			q, err = set.Queue(topic, id, true)
			require.NoError(t, err)
			qs[i] = q
		}
		putBuffered(t, q, r.ckpt[i], r.end[i], 0)
		require.NoError(t, q.Flush())
		checkRange(t, q, q.MinOffset(), r.end[i], 0)
	}
	marks, err := set.MarkDirty()
	require.NoError(t, err)
	require.NoError(t, crashed.SyncFS("/cq"))
	set.SyncedByFS(marks)

	again, err := OpenSet(crashed.CrashClone(r.rng, 0), "/cq", r.opts)
	require.NoError(t, err, name)
	for i := range qs {
		if r.end[i] == 0 {
			continue
		}
		topic, id := queueName(i)
		q, err := again.Queue(topic, id, false)
		require.NoError(t, err, name)
		require.Equal(t, r.end[i], q.MaxOffset(), "%s: queue %d after the second crash", name, i)
		checkRange(t, q, q.MinOffset(), r.end[i], 0)
	}
	require.NoError(t, again.Close())
	require.NoError(t, set.Close())
	return cut
}

// warningCounts is a slog.Handler that counts warnings by message.
type warningCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *warningCounts) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c *warningCounts) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" {
			key += ": " + a.Value.String()
		}
		return true
	})
	c.n[key]++
	return nil
}
func (c *warningCounts) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *warningCounts) WithGroup(string) slog.Handler      { return c }

// count returns the warnings whose message contains sub.
func (c *warningCounts) count(sub string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.n {
		if strings.Contains(k, sub) {
			n += v
		}
	}
	return n
}

// TestCrashOwnerSyncsFS crashes owners that follow the OwnerSyncsFS
// protocol at arbitrary points (between MarkDirty and SyncFS, between
// SyncFS and SyncedByFS, amid writes), keeping a random part of the writes
// no sync covered, and checks that recovery keeps every unit a completed
// checkpoint covers, where it was.
func TestCrashOwnerSyncsFS(t *testing.T) {
	const queues = 40
	var (
		warnings warningCounts
		cutUnits int64
		seeds    = uint64(80)
	)
	if testing.Short() {
		seeds = 30
	}
	for seed := uint64(0); seed < seeds; seed++ {
		perFile := []int{7, 300, 50, 500}[seed%4]
		r := newOwnerRun(t, seed, queues, perFile)
		steps := 100 + r.rng.IntN(400)
		for s := 0; s < steps; s++ {
			r.step()
		}
		if seed%2 == 0 {
			r.burst() // after the last SyncFS
		}
		keep := []float64{0.5, 0, 1, 0.9, 0.7}[seed%5]
		name := fmt.Sprintf("seed %d perFile %d keep %v phase %d", seed, perFile, keep, r.phase)
		cutUnits += r.recover(name, r.mem.CrashClone(r.rng, keep), &warnings)
		require.NoError(t, r.set.Close())
	}
	t.Logf("recovery warnings: %v; %d units beyond the checkpoints survived and were cut", warnings.n, cutUnits)
	require.Positive(t, cutUnits)
	if !testing.Short() {
		// Each relaxed recovery rule was needed.
		require.Positive(t, warnings.count("follows a missing one"))
		require.Positive(t, warnings.count("short file"))
		require.Positive(t, warnings.count("unwritten unit in a full file"))
	}
}

// A mark covers the first file a queue had when it was taken: if the queue
// was reset and got a new first file before SyncedByFS, that file's entry
// is not durable, and the queue syncs its directory before rolling to a
// second file, so a crash cannot keep the second and lose the first.
func TestOwnerFirstFileReplacedDuringCheckpoint(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		mem := vfs.NewMem()
		opts := Options{UnitsPerFile: 7, OwnerSyncsFS: true}
		set, err := OpenSet(mem, "/cq", opts)
		require.NoError(t, err)
		q, err := set.Queue("T", 0, true)
		require.NoError(t, err)
		putRange(t, q, 0, 3, 0)
		marks, err := set.MarkDirty()
		require.NoError(t, err)
		require.NoError(t, mem.SyncFS("/cq"))
		require.NoError(t, q.ResetTo(0)) // the owner's record for T/0 is 0 now
		putRange(t, q, 0, 3, 1)
		require.NoError(t, q.WriteBuffered()) // a new first file, not synced
		set.SyncedByFS(marks)
		putRange(t, q, 3, 10, 1)
		require.NoError(t, q.WriteBuffered()) // the second file

		set2, err := OpenSet(mem.CrashClone(newRand(seed), 0.5), "/cq", opts)
		require.NoError(t, err)
		q2, err := set2.Queue("T", 0, false)
		require.NoError(t, err)
		require.Zero(t, q2.MinOffset(), "seed %d: the first file was lost and the second kept", seed)
		require.NoError(t, q2.TruncateTo(0))
		require.NoError(t, set2.Close())
		require.NoError(t, set.Close())
	}
}

// TestConcurrentReadersOwner runs an apply-loop writer (PutBuffered, Flush,
// now and then TruncateTo and DeleteBefore) over queues whose units live in
// memory until a spill boundary or a checkpoint, a checkpointer (MarkDirty
// under the writer's lock, SyncFS and SyncedByFS beside it, and
// WriteBuffered), and readers (Read, Get, SearchOffset) that must only
// ever see correct units; run it with -race. Files are 3,000 units, so
// Flush spills at 1,024-unit boundaries (some batches cross one by more
// than the units before it, so the units kept in memory move while readers
// read them), and the cache holds 3 files.
func TestConcurrentReadersOwner(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		const queues, perFile = 8, 3000
		set, err := OpenSet(fs, root, Options{UnitsPerFile: perFile, MaxOpenFiles: 3, OwnerSyncsFS: true})
		require.NoError(t, err)
		qs := make([]*Queue, queues)
		for i := range qs {
			topic, id := queueName(i)
			qs[i], err = set.Queue(topic, id, true)
			require.NoError(t, err)
		}
		var (
			applyMu  sync.Mutex
			done     = make(chan struct{})
			wg       sync.WaitGroup
			reads    atomic.Int64
			failures = make(chan error, 16)
		)
		report := func(err error) {
			select {
			case failures <- err:
			default:
			}
		}
		for r := 0; r < 3; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := newRand(uint64(r))
				for {
					select {
					case <-done:
						return
					default:
					}
					q := qs[rng.IntN(queues)]
					lo, hi := q.MinOffset(), q.MaxOffset()
					if hi == lo {
						continue
					}
					off := lo + rng.Int64N(hi-lo)
					if rng.IntN(2) == 0 { // the tail, in memory
						off = max(lo, hi-1-rng.Int64N(400))
					}
					units, _, err := q.Read(off, 1+rng.IntN(400), nil)
					if err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
						report(err)
					}
					for _, u := range units {
						if u != unitAt(u.Offset, 0) {
							report(fmt.Errorf("read %v, want %v", u, unitAt(u.Offset, 0)))
						}
					}
					if u, err := q.Get(hi - 1); err == nil && u != unitAt(hi-1, 0) {
						report(fmt.Errorf("get %v, want %v", u, unitAt(hi-1, 0)))
					}
					at := unitAt(off, 0).PhyOffset
					got, err := q.SearchOffset(at, func(phy int64, _ int32) (int64, error) { return phy, nil })
					if err == nil && got > off && q.MinOffset() <= off { // retention may have moved MinOffset past off
						report(fmt.Errorf("search %d: got %d, want at most %d", at, got, off))
					}
					reads.Add(1)
				}
			}()
		}
		wg.Add(1)
		go func() { // the store's checkpoint, and an owner's WriteBuffered
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if i%2 == 1 {
					if err := set.WriteBuffered(); err != nil {
						report(err)
					}
					continue
				}
				applyMu.Lock()
				marks, err := set.MarkDirty()
				applyMu.Unlock()
				if err == nil {
					err = fs.SyncFS(root)
				}
				if err != nil {
					report(err)
					return
				}
				set.SyncedByFS(marks)
			}
		}()
		rng := newRand(99)
		end := make([]int64, queues)
		for round := 0; round < 3000 || reads.Load() < 3000; round++ {
			select {
			case err := <-failures:
				require.NoError(t, err)
			default:
			}
			applyMu.Lock()
			i := rng.IntN(queues)
			n := 1 + rng.Int64N(60)
			if rng.IntN(8) == 0 {
				// Past the next spill boundary by more than the units
				// before it: the units kept in memory move while
				// readers may read them.
				n = spillUnits - end[i]%perFile%spillUnits + 100 + rng.Int64N(300)
			}
			putBuffered(t, qs[i], end[i], end[i]+n, 0)
			end[i] += n
			require.NoError(t, qs[i].Flush())
			switch round % 200 {
			case 77:
				end[i] -= min(end[i]-qs[i].MinOffset(), 1+rng.Int64N(1500))
				require.NoError(t, qs[i].TruncateTo(end[i]))
			case 151:
				if end[i] > 2000 {
					_, err := qs[i].DeleteBefore(unitAt(end[i]-2000, 0).PhyOffset)
					require.NoError(t, err)
				}
			}
			applyMu.Unlock()
		}
		close(done)
		wg.Wait()
		select {
		case err := <-failures:
			require.NoError(t, err)
		default:
		}
		for i, q := range qs {
			require.NoError(t, q.checkInvariants())
			checkRange(t, q, q.MinOffset(), end[i], 0)
		}
		require.NoError(t, set.Close())
	})
}
