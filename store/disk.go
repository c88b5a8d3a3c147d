package store

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/internal/vfs"
)

// A full disk is a state of the store, not a failure (ARCHITECTURE.md,
// "A full disk"). Writers learn it three ways:
//
//   - CheckWrite, on the send path, refuses a write when the device is over
//     Retention.FullRatio or its free space, less what was accepted since
//     the last measurement, is below the reserve. The device is measured
//     (statfs) at most every spaceRefresh on this path, by whichever caller
//     finds the measurement stale, and by spaceLoop every spaceRefresh too,
//     so that a freed disk is seen without waiting for a write.
//   - The consume queues and the index write through a vfs.StallFS: a write
//     that finds no space waits and is retried, so no applied entry's unit
//     or key is lost; while one waits the store counts as full.
//   - A checkpoint whose SyncFS or bbolt commit finds no space is not a
//     sticky failure: its delta goes back to the dirty state, the store
//     counts as full, and the checkpoint is taken again, with a backoff,
//     until one is written (persistUntilSpace).

// spaceRefresh is how stale a measurement of free space may be on the
// write path.
const spaceRefresh = 100 * time.Millisecond

// Bounds of the reserve: 5 % of the device, at least minReserve and at
// most maxReserve.
const (
	minReserve = 1 << 20
	maxReserve = 32 << 20
)

// diskSpace is the store's view of its device.
type diskSpace struct {
	t0 time.Time // origin of measured (monotonic)
	// mu orders measurements and flag updates, so that an older
	// measurement never overwrites a newer one.
	mu sync.Mutex
	// measured is when the device was last measured, in ns since t0.
	measured atomic.Int64
	// avail is the free space measured, less the bytes CheckWrite accepted
	// since.
	avail atomic.Int64
	// reserve is the free space below which writes are refused.
	reserve atomic.Int64
	// stalled is set while a consume-queue or index write waits for space.
	stalled atomic.Bool
	// reason says why the store is full, for errors and logs (a *string).
	reason atomic.Pointer[string]
	// persistStalled is set while checkpoints fail for lack of space.
	persistStalled atomic.Bool
	// stallStop ends every wait for space of the derived writers
	// (StopWaiting).
	stallStop chan struct{}
	stopOnce  sync.Once
}

// reserveFor returns the reserve for a device of total bytes.
func reserveFor(total uint64) int64 {
	return min(max(int64(total/20), minReserve), maxReserve)
}

// DiskFreeBytes returns the free space of the store's device at the last
// measurement, less what writes accepted since.
func (s *Store) DiskFreeBytes() int64 { return s.space.avail.Load() }

// DiskReserveBytes returns the free space below which writes are refused.
func (s *Store) DiskReserveBytes() int64 { return s.space.reserve.Load() }

// CheckWrite reports whether a write of about n bytes may go into the log:
// nil, or an error wrapping ErrDiskFull that says why. An accepted write
// counts against the free space until the next measurement, so a burst
// cannot overrun the reserve between two measurements.
func (s *Store) CheckWrite(n int) error {
	now := int64(time.Since(s.space.t0))
	last := s.space.measured.Load()
	stale := now-last >= int64(spaceRefresh) ||
		(s.space.avail.Load()-int64(n) < s.space.reserve.Load() && now-last >= int64(10*time.Millisecond))
	if stale && s.space.measured.CompareAndSwap(last, now) {
		if err := s.refreshSpace(); err != nil {
			s.log.Debug("store: disk usage", "err", err)
		}
	}
	if s.diskFull.Load() {
		return s.diskFullError()
	}
	if left := s.space.avail.Add(-int64(n)); left < s.space.reserve.Load() {
		s.space.avail.Add(int64(n))
		return fmt.Errorf("%w: %d bytes free, less than this write (%d bytes) and the reserve of %d bytes; the broker's disk is full, writes resume when space frees",
			ErrDiskFull, left+int64(n), n, s.space.reserve.Load())
	}
	return nil
}

// diskFullError is the error of a write refused while the store is full.
func (s *Store) diskFullError() error {
	reason := "the broker's disk is full"
	if p := s.space.reason.Load(); p != nil {
		reason = *p
	}
	return fmt.Errorf("%w: %s; writes resume when space frees", ErrDiskFull, reason)
}

// refreshSpace measures the device and updates the disk-full flag.
func (s *Store) refreshSpace() error {
	s.space.mu.Lock()
	defer s.space.mu.Unlock()
	s.space.measured.Store(int64(time.Since(s.space.t0)))
	ratio, err := s.measureDisk()
	if err != nil {
		return err
	}
	s.setDiskFull(ratio)
	return nil
}

// recordSpace keeps a measurement of the device (measureDisk).
func (s *Store) recordSpace(u vfs.DiskUsage) {
	s.space.avail.Store(int64(min(u.Free, math.MaxInt64)))
	s.space.reserve.Store(reserveFor(u.Used + u.Free))
}

// fullReason returns why the store is full at used ratio, or "".
func (s *Store) fullReason(ratio float64) string {
	switch {
	case s.space.stalled.Load():
		return "a consume-queue or index write is waiting for space"
	case s.space.persistStalled.Load():
		return "a checkpoint is waiting for space"
	case ratio > s.cfg.Retention.FullRatio:
		return fmt.Sprintf("disk %.1f%% used, above the %.0f%% limit", 100*ratio, 100*s.cfg.Retention.FullRatio)
	case s.space.avail.Load() < s.space.reserve.Load():
		return fmt.Sprintf("%d bytes free, below the reserve of %d bytes", s.space.avail.Load(), s.space.reserve.Load())
	}
	return ""
}

// spaceLoop measures the device every spaceRefresh, so that the disk-full
// flag turns on and off without waiting for a write or the retention
// check.
func (s *Store) spaceLoop() {
	defer s.wg.Done()
	t := time.NewTicker(spaceRefresh)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if now := int64(time.Since(s.space.t0)); now-s.space.measured.Load() >= int64(spaceRefresh)/2 {
				if err := s.refreshSpace(); err != nil {
					s.log.Debug("store: disk usage", "err", err)
				}
			}
		}
	}
}

// derivedFS wraps the store's file system for the consume queues and the
// index: writes that find no space wait (vfs.StallFS), and the store
// counts as full meanwhile.
func (s *Store) derivedFS() vfs.FS {
	s.space.stallStop = make(chan struct{})
	return vfs.Stall(s.fs, vfs.StallOptions{
		Stop: s.space.stallStop,
		OnStall: func(path string, err error) {
			s.space.stalled.Store(true)
			s.log.Error("store: disk full: a consume-queue or index write waits for space", "path", path, "err", err)
			s.space.mu.Lock()
			s.setDiskFull(s.DiskUsedRatio())
			s.space.mu.Unlock()
		},
		OnResume: func() {
			s.space.stalled.Store(false)
			s.log.Info("store: consume-queue and index writes resumed")
			if err := s.refreshSpace(); err != nil {
				s.space.mu.Lock()
				s.setDiskFull(s.DiskUsedRatio())
				s.space.mu.Unlock()
			}
		},
	})
}

// checkpointNoSpace handles a checkpoint whose SyncFS or bbolt commit
// found the disk full: nothing was committed (bbolt rolls the transaction
// back), so the delta goes back into the dirty state, to be written by the
// next checkpoint, which persistUntilSpace retries until space frees. Not
// sticky; logged once per episode, during which the store counts as full.
func (s *Store) checkpointNoSpace(cp *checkpoint, err error) error {
	s.state.restoreDelta(cp.delta)
	if !s.space.persistStalled.Swap(true) {
		s.log.Error("store: disk full: checkpoint not written; retrying until space frees (derived state is rebuilt from the log after a crash meanwhile)", "err", err)
		s.space.mu.Lock()
		s.setDiskFull(s.DiskUsedRatio())
		s.space.mu.Unlock()
	}
	return fmt.Errorf("store: persist: %w", err)
}

// checkpointResumed notes a checkpoint written after one that found no space.
func (s *Store) checkpointResumed() {
	if s.space.persistStalled.Swap(false) {
		s.log.Info("store: checkpoints written again")
		if err := s.refreshSpace(); err != nil {
			s.space.mu.Lock()
			s.setDiskFull(s.DiskUsedRatio())
			s.space.mu.Unlock()
		}
	}
}

// restoreDelta puts back a delta that was not written: its keys are dirty
// again (the next delta takes their current values, which are at least as
// new), and the persisted index is what it was before.
func (st *state) restoreDelta(d *stateDelta) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for k := range d.topics {
		st.dirtyTopics[k] = true
	}
	for k := range d.groups {
		st.dirtyGroups[k] = true
	}
	for k := range d.consumer {
		st.dirtyConsumer[k] = true
	}
	for k := range d.queues {
		st.dirtyQueues[k] = true
	}
	for k := range d.sched {
		st.dirtySched[k] = true
	}
	for k := range d.txns {
		st.dirtyTxns[k] = true
	}
	for k := range d.pop {
		st.dirtyPop[k] = true
	}
	st.dirtyACL = st.dirtyACL || d.writeACL
	st.dirtyBrokerConfig = st.dirtyBrokerConfig || d.writeBrokerConfig
	st.dirtyRecall = st.dirtyRecall || d.recall != nil

	st.persisted = min(st.persisted, d.prevPersisted)
}

// StopWaiting ends the waits for space of the consume-queue and index
// writers: a write waiting now, or later, fails with its no-space error
// (sticky, as any failed apply or checkpoint). Call it before stopping
// whatever calls Apply, so that a node on a full disk can stop; Close
// calls it too.
func (s *Store) StopWaiting() {
	s.space.stopOnce.Do(func() {
		if s.space.stallStop != nil {
			close(s.space.stallStop)
		}
	})
}
