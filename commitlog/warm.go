package commitlog

import (
	"fmt"
	"sync"
	"time"

	"github.com/raftmq/raftmq/internal/vfs"
)

// Segment warm-up (RocketMQ's "warm mapped file").
//
// A segment is preallocated with Truncate, so it is a sparse file: the first
// write into each block makes the file system allocate it, and the
// fdatasync of an AppendSync then has to commit that allocation to the
// journal too (on ext4 a 1 KiB append+fdatasync costs about twice as much
// in a hole as in a block that was already written and synced). The warmer
// is a goroutine, one per Log, that keeps the active segment zero-filled and
// synced a bounded distance (Options.WarmAhead) ahead of the writer, so the
// writer's appends land in allocated blocks.
//
// Zero is what an unwritten byte of a segment reads as anyway, so the
// warmer never changes the content of a file, only its allocation; the
// on-disk format and recovery are unaffected. What it must never do is
// write zeros over bytes the writer has written or is writing. The
// coordination, all under Log.warm's mutex:
//
//   - end is the writer's end in the target segment: before every write
//     into a segment (appendEntries, sealLocked), the writer calls
//     warmReserve, which raises end to the end of the range about to
//     be written.
//   - The warmer claims a range [lo, hi) of the target segment only with
//     lo >= end rounded up to a block (so it never touches a block the
//     writer has put bytes in), and publishes the claim before it writes.
//   - warmReserve first waits until no claim on the same segment
//     overlaps the range to be written. The warmer drops its claim right
//     after its WriteAt (before its fdatasync), so the writer waits at most
//     for one chunk to be copied into the page cache, and only when it has
//     caught up with the warmer.
//
// Hence a claim and a writer's range never overlap: either the claim was
// published first and the writer waits it out, or the reservation was made
// first and the claim starts past it.
//
// Truncation (TruncateSuffix), a segment roll and Reset change the target
// with warmRetargetLocked, under Log.mu: it resets end and the zeroed mark
// to the new write position (truncating a file also frees the blocks that
// were warmed past the cut). A claim in flight on the old target keeps
// being honoured by warmReserve, which compares file paths, not
// targets. DropPrefix never removes the active segment and needs nothing;
// Close stops the warmer, between two chunks, before it closes the files.
//
// The warmer writes and syncs through its own handle of the segment file,
// opened under Log.mu when the target is set. So nothing it does depends on
// the writer's handle being open (segments are closed and removed without
// waiting for it), and a failed fdatasync of the warmer cannot consume a
// write-back error that the writer's own fdatasync must see (Linux reports
// such an error once per open file description). A write that finds the
// device full pauses the warm-up, which tries again every warmNoSpaceWait
// (logged once when it pauses, once when it resumes). Any other error of
// the warmer (EIO, a failed open or sync) is logged and stops the warm-up
// for the life of the Log; the writer then writes into sparse space as
// before, and its own errors are reported as before.
//
// The warmer pauses while the writer appends faster than
// Options.WarmMaxRate (measured over warmRateWindow): then every fdatasync
// covers many blocks, their allocation is cheap per append, and zeroing
// ahead would only double the CPU and disk bandwidth spent per byte. It
// resumes from the writer's end once the rate drops.

const (
	// DefaultWarmAhead is the distance kept zero-filled ahead of the writer
	// when Options.WarmAhead is 0 in FlushSync mode.
	DefaultWarmAhead = 64 << 20
	// warmNoSpaceWait is how long the warmer waits after a write that
	// found the device full before it tries again.
	warmNoSpaceWait = time.Second
	// warmChunkMax is the largest range zeroed (and synced) in one step.
	warmChunkMax = 1 << 20
	// warmAlign is the granularity of warmed ranges: a file-system block.
	warmAlign = 4096
	// DefaultWarmMaxRate is the append rate above which the warmer pauses
	// when Options.WarmMaxRate is 0: 8 MiB/s, about 8,000 1 KiB appends a
	// second. With direct appends (direct.go) the warmer never pauses by
	// default: zeroing directly costs little CPU, and a direct append into
	// unallocated space makes its fdatasync commit the allocation, which
	// measured twice the CPU per KiB of one into zeroed blocks.
	DefaultWarmMaxRate = 8 << 20
	// warmRateWindow is how long the writer's rate is measured over, and
	// how long a paused warmer sleeps before it looks again.
	warmRateWindow = 250 * time.Millisecond
)

// warmState is the warmer's shared state; see the comment at the top of
// this file. Lock order: Log.mu, then warmState's mutex.
type warmState struct {
	sync.Mutex
	ahead int64 // distance to keep warm; 0: warm-up off
	chunk int64 // bytes per step
	zeros []byte
	kick  chan struct{}
	cond  *sync.Cond // signalled when a claim is dropped

	seg    *segment // target: the active segment, nil for none
	handle vfs.File // the warmer's handle of seg, until the warmer takes it
	direct bool     // zero through a direct-I/O handle when there is one
	gen    uint64   // incremented by every retarget
	end    int64    // the writer's end in seg (reserved, maybe not yet written)
	zeroed int64    // seg's bytes below zeroed are allocated (written or warmed)
	synced int64    // and those below synced were warmed and synced

	claimSeg         *segment // nil: no claim
	claimLo, claimHi int64

	failed error // set when the warm-up stopped on an error

	// The writer's rate: end and gen at the start of the current window.
	maxRate int64 // bytes per second; <= 0: never pause
	rateAt  time.Time
	rateEnd int64
	rateGen uint64
	fast    bool // the last full window was above maxRate
	pauses  int  // windows the warmer paused for (tests)

	// Counters for tests and benchmarks.
	chunks int // ranges zeroed
	waits  int // times a writer waited for a claim
}

// warmStatus is a snapshot of the warm-up for tests and benchmarks.
type warmStatus struct {
	Base           int64 // target segment's base, -1 for none
	End            int64
	Zeroed, Synced int64
	Chunks, Waits  int
	Pauses         int
	Err            error
}

func alignUp(n, a int64) int64   { return (n + a - 1) / a * a }
func alignDown(n, a int64) int64 { return n / a * a }

// initWarm sets up the warm-up from the options. Called from Open.
func (l *Log) initWarm() {
	w := &l.warm
	w.cond = sync.NewCond(&w.Mutex)
	w.kick = make(chan struct{}, 1)
	if l.opts.WarmAhead <= 0 {
		return
	}
	w.maxRate = l.opts.WarmMaxRate
	w.ahead = max(alignUp(l.opts.WarmAhead, warmAlign), warmAlign)
	w.chunk = min(warmChunkMax, max(alignDown(w.ahead/4, warmAlign), warmAlign))
	w.zeros = vfs.AlignedBuffer(int(w.chunk)) // direct I/O needs it aligned
	w.direct = l.opts.DirectIO > 0
}

// startWarm retargets the warmer at the active segment and starts it.
// Called from Open, after recovery.
func (l *Log) startWarm() {
	if l.warm.ahead <= 0 {
		return
	}
	l.mu.Lock()
	if n := len(l.mu.segs); n > 0 {
		l.warmRetargetLocked(l.mu.segs[n-1])
	}
	l.mu.Unlock()
	l.wg.Add(1)
	go l.warmLoop()
}

// stopWarm closes a handle the warmer did not take. Called once the warmer
// goroutine has exited.
func (l *Log) stopWarm() {
	w := &l.warm
	w.Lock()
	h := w.handle
	w.handle, w.seg = nil, nil
	w.Unlock()
	if h != nil {
		h.Close()
	}
}

// warmRetargetLocked points the warmer at s, the active segment whose write
// position is s.end, or at nothing (s nil). It must be called, with Log.mu
// held, whenever the active segment changes or its end moves other than by
// an append: a roll, a truncation, a reset. A new target gets a new handle
// for the warmer, even if it is the old segment (after a truncation), so
// the warmer can tell targets apart by their handle.
func (l *Log) warmRetargetLocked(s *segment) {
	w := &l.warm
	if w.ahead <= 0 {
		return
	}
	w.Lock()
	if w.failed != nil {
		w.Unlock()
		return
	}
	w.gen++
	stale := w.handle
	w.handle, w.seg = nil, nil
	w.Unlock()
	if stale != nil {
		stale.Close()
	}
	if s == nil {
		return
	}
	// The file exists: s is the open active segment and Log.mu is held, so
	// OpenReadWrite cannot recreate a segment that was just removed.
	// With direct appends the warmer writes its zeros directly too, so it
	// does not fill the page cache either (a page it left there would
	// only be dropped by the next direct append to its block).
	// (Only in whole 4 KiB blocks: not in a segment made with a size
	// that is not a multiple of them.)
	direct := w.direct && s.size%vfs.DirectAlign == 0
	var h vfs.File
	var err error
	if direct {
		h, err = vfs.OpenDirect(l.fs, s.path)
	}
	if !direct || err != nil {
		h, err = l.fs.OpenReadWrite(s.path)
	}
	if err != nil {
		l.warmFailed(fmt.Errorf("commitlog: warm-up: open %s: %w", s.path, err))
		return
	}
	w.Lock()
	if w.failed != nil {
		w.Unlock()
		h.Close()
		return
	}
	w.seg, w.handle = s, h
	w.end, w.zeroed, w.synced = s.end, s.end, s.end
	work := w.workLocked()
	w.Unlock()
	if work {
		l.kickWarm()
	}
}

// warmReserve is called by the writer (with or without Log.mu) before it
// writes [lo, hi) of s. It waits until no warm-up claim overlaps the range and
// moves the writer's end past it, so no later claim can.
func (l *Log) warmReserve(s *segment, lo, hi int64) {
	w := &l.warm
	if w.ahead <= 0 {
		return
	}
	w.Lock()
	// Compare paths, not segments: a claim on a segment that was removed
	// and recreated under the same name is waited out too, whatever the
	// file system does with the old file.
	for w.claimSeg != nil && w.claimSeg.path == s.path && w.claimLo < hi && lo < w.claimHi {
		w.waits++
		w.cond.Wait()
	}
	if w.seg == s && hi > w.end {
		w.end = hi
	}
	work := w.workLocked()
	w.Unlock()
	if work {
		l.kickWarm()
	}
}

func (l *Log) kickWarm() {
	select {
	case l.warm.kick <- struct{}{}:
	default:
	}
}

// nextLocked returns the next range of the target to warm. Caller holds
// warm's mutex.
func (w *warmState) nextLocked() (s *segment, lo, hi int64, ok bool) {
	s = w.seg
	if s == nil || w.failed != nil {
		return nil, 0, 0, false
	}
	lo = max(w.zeroed, alignUp(w.end, warmAlign))
	limit := min(s.size, w.end+w.ahead)
	hi = min(lo+w.chunk, limit)
	if hi < s.size {
		hi = alignDown(hi, warmAlign)
	}
	// Work in whole chunks, but for the segment's last bytes.
	if hi <= lo || (hi-lo < w.chunk && hi < s.size) {
		return nil, 0, 0, false
	}
	return s, lo, hi, true
}

// writerFastLocked reports whether the writer appended faster than
// maxRate over the last complete window. Caller holds warm's mutex.
func (w *warmState) writerFastLocked(now time.Time) bool {
	if w.maxRate <= 0 {
		return false
	}
	if el := now.Sub(w.rateAt); el >= warmRateWindow {
		// A retarget (roll, truncation) restarts end: the window's bytes
		// are then unknown, so keep the previous verdict for it.
		if w.rateGen == w.gen && w.end >= w.rateEnd {
			w.fast = float64(w.end-w.rateEnd)/el.Seconds() > float64(w.maxRate)
		}
		w.rateAt, w.rateEnd, w.rateGen = now, w.end, w.gen
	}
	return w.fast
}

func (w *warmState) workLocked() bool {
	_, _, _, ok := w.nextLocked()
	return ok
}

// warmFailed stops the warm-up for good and logs why. The log is unaffected.
func (l *Log) warmFailed(err error) {
	w := &l.warm
	w.Lock()
	if w.failed == nil {
		w.failed = err
	}
	h := w.handle
	w.handle, w.seg = nil, nil
	w.Unlock()
	if h != nil {
		h.Close()
	}
	l.kickWarm() // so that the warmer exits
	l.log.Warn("commitlog: segment warm-up stopped; appends go to unallocated space from now on", "err", err)
}

// warmLoop is the warmer goroutine. It owns the handle it took from the
// shared state (f, a handle of cur) and closes it when the target moves on.
func (l *Log) warmLoop() {
	defer l.wg.Done()
	w := &l.warm
	var cur *segment
	var f vfs.File
	nospace := false // paused on a full device
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		select {
		case <-l.done:
			return
		default:
		}
		var old vfs.File
		w.Lock()
		if w.failed != nil {
			w.Unlock()
			return // warmFailed logged it; the deferred Close drops f
		}
		if w.handle != nil || w.seg != cur {
			// A new target (retargeting installs a handle with it), or
			// none: drop the old handle, take the new one.
			old, cur, f = f, w.seg, w.handle
			w.handle = nil
		}
		paused := w.writerFastLocked(time.Now())
		if paused {
			w.pauses++
		}
		s, lo, hi, ok := w.nextLocked()
		ok = ok && f != nil && s == cur && !paused
		gen := w.gen
		if ok {
			w.claimSeg, w.claimLo, w.claimHi = s, lo, hi
		}
		w.Unlock()
		if old != nil {
			old.Close()
		}
		if paused {
			t := time.NewTimer(warmRateWindow)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			continue
		}
		if !ok {
			select {
			case <-w.kick:
				continue
			case <-l.done:
				return
			}
		}
		_, err := f.WriteAt(w.zeros[:hi-lo], lo)
		w.Lock()
		w.claimSeg = nil
		w.cond.Broadcast()
		if err == nil && w.gen == gen {
			w.zeroed = max(w.zeroed, hi)
			w.chunks++
		}
		w.Unlock()
		if err == nil {
			if err = f.Sync(); err != nil {
				err = fmt.Errorf("commitlog: warm-up: sync %s: %w", s.path, err)
			}
		} else if vfs.IsNoSpace(err) {
			// A full device: nothing is wrong with the file. Try again
			// later (the zeros written so far are harmless), so that the
			// warm-up resumes once space frees.
			if !nospace {
				nospace = true
				l.log.Warn("commitlog: segment warm-up paused: the device is full; retrying every second", "err", err)
			}
			t := time.NewTimer(warmNoSpaceWait)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			continue
		} else {
			err = fmt.Errorf("commitlog: warm-up: write %s at %d: %w", s.path, lo, err)
		}
		if err != nil {
			l.warmFailed(err)
			return
		}
		if nospace {
			nospace = false
			l.log.Info("commitlog: segment warm-up resumed")
		}
		w.Lock()
		if w.gen == gen {
			w.synced = max(w.synced, hi)
		}
		w.Unlock()
	}
}

// warmStatus returns a snapshot of the warm-up state.
func (l *Log) warmStatus() warmStatus {
	w := &l.warm
	w.Lock()
	defer w.Unlock()
	st := warmStatus{Base: -1, End: w.end, Zeroed: w.zeroed, Synced: w.synced, Chunks: w.chunks, Waits: w.waits, Pauses: w.pauses, Err: w.failed}
	if w.seg != nil {
		st.Base = w.seg.base
	}
	return st
}

// warmIdle reports whether the warmer has nothing left to do at the
// writer's current position: the warm range is zeroed and synced, or the
// warm-up is off or has failed.
func (l *Log) warmIdle() bool {
	w := &l.warm
	w.Lock()
	defer w.Unlock()
	if w.ahead <= 0 || w.failed != nil || w.seg == nil {
		return true
	}
	return !w.workLocked() && w.claimSeg == nil && w.synced == w.zeroed
}
