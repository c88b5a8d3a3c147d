package store

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store/pop"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

// The retention defaults, RocketMQ's: RetentionConfig's zero fields take
// them.
const (
	DefaultFileReservedTime = 72 * time.Hour
	DefaultDeleteWhen       = "04" // as ParseDeleteWhen reads it
	DefaultCleanRatio       = 0.75
	DefaultForceRatio       = 0.85
	DefaultFullRatio        = 0.90
	DefaultCheckInterval    = 10 * time.Second
)

// RetentionConfig says when whole commitlog segments are deleted, with the
// consume-queue and index files that only point into them. The defaults are
// RocketMQ's (fileReservedTime 72 h, deleteWhen 04, diskMaxUsedSpaceRatio 75 %).
type RetentionConfig struct {
	// FileReservedTime: a segment whose newest message is older than this
	// is expired (default 72 h).
	FileReservedTime time.Duration
	// DeleteWhen: hours of the day (local clock) at which expired segments
	// are deleted whatever the disk usage (default [4]).
	DeleteWhen []int
	// CleanRatio: above this used fraction expired segments are deleted at
	// any hour (default 0.75).
	CleanRatio float64
	// ForceRatio: above this the oldest segments are deleted even if not
	// expired (default 0.85).
	ForceRatio float64
	// FullRatio: above this writes are refused with ErrDiskFull until usage
	// falls back below it (default 0.90).
	FullRatio float64
	// CheckInterval: the disk check's own ticker (default 10 s).
	CheckInterval time.Duration
	// Floor, if set, returns the highest raft index that may be deleted
	// (a leader keeps what its live followers still need); the applied
	// index is always a bound too. Above ForceRatio the floor is ignored:
	// a full disk stops the node, a lagging follower only needs a snapshot.
	Floor func() uint64
	// Drop, if set, deletes the log's segments before index keepFrom in
	// place of commitlog.DropPrefix, so that the raft storage records its
	// new compaction point first.
	Drop func(keepFrom uint64) error
}

func (r *RetentionConfig) fill() error {
	if r.FileReservedTime <= 0 {
		r.FileReservedTime = DefaultFileReservedTime
	}
	if r.DeleteWhen == nil {
		hours, err := ParseDeleteWhen(DefaultDeleteWhen)
		if err != nil {
			return err
		}
		r.DeleteWhen = hours
	}
	if r.CleanRatio <= 0 {
		r.CleanRatio = DefaultCleanRatio
	}
	if r.ForceRatio <= 0 {
		r.ForceRatio = DefaultForceRatio
	}
	if r.FullRatio <= 0 {
		r.FullRatio = DefaultFullRatio
	}
	if r.CheckInterval <= 0 {
		r.CheckInterval = DefaultCheckInterval
	}
	return r.check()
}

// Validate reports whether the settings, with defaults for the zero ones,
// make sense: each ratio in (0, 1), CleanRatio ≤ ForceRatio ≤ FullRatio,
// DeleteWhen hours within 0-23.
func (r RetentionConfig) Validate() error { return r.fill() }

func (r *RetentionConfig) check() error {
	for _, v := range []struct {
		name string
		r    float64
	}{{"clean", r.CleanRatio}, {"force-clean", r.ForceRatio}, {"full", r.FullRatio}} {
		if !(v.r > 0 && v.r < 1) {
			return fmt.Errorf("store: retention: the disk %s ratio must be between 0 and 1 (exclusive), not %g", v.name, v.r)
		}
	}
	if r.CleanRatio > r.ForceRatio || r.ForceRatio > r.FullRatio {
		return fmt.Errorf("store: retention: want clean ratio ≤ force-clean ratio ≤ full ratio, not %g, %g, %g", r.CleanRatio, r.ForceRatio, r.FullRatio)
	}
	for _, h := range r.DeleteWhen {
		if h < 0 || h > 23 {
			return fmt.Errorf("store: retention: delete hour %d is not within 0-23", h)
		}
	}
	return nil
}

// ParseDeleteWhen parses RocketMQ's deleteWhen: hours of the day separated
// by semicolons, "04" or "04;16".
func ParseDeleteWhen(s string) ([]int, error) {
	var hours []int
	for _, f := range strings.Split(s, ";") {
		f = strings.TrimSpace(f)
		h, err := strconv.Atoi(f)
		if err != nil || h < 0 || h > 23 {
			return nil, fmt.Errorf("store: deleteWhen %q: want hours 00-23 separated by ';', as \"04;16\"", s)
		}
		hours = append(hours, h)
	}
	return hours, nil
}

// Retention returns the store's retention settings, defaults filled in.
func (s *Store) Retention() RetentionConfig { return s.cfg.Retention }

// DiskFull reports whether writes are being refused for lack of space.
func (s *Store) DiskFull() bool { return s.diskFull.Load() }

// DiskUsedRatio returns the used fraction of the store's device at the last
// check.
func (s *Store) DiskUsedRatio() float64 { return math.Float64frombits(s.usage.Load()) }

func (s *Store) diskLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Retention.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.CheckDisk(); err != nil {
				s.log.Error("store: disk check failed", "err", err)
			}
		}
	}
}

// CheckDisk measures disk usage, updates the disk-full flag and deletes
// segments as the retention rules say. It runs on its own ticker; tests
// call it directly. It returns the number of segments deleted.
func (s *Store) CheckDisk() (int, error) {
	r := &s.cfg.Retention
	ratio, err := s.measureDisk()
	if err != nil {
		return 0, err
	}
	hour := s.cfg.Clock.Now().Hour()
	timeToClean := ratio > r.CleanRatio
	for _, h := range r.DeleteWhen {
		if h == hour {
			timeToClean = true
		}
	}
	deleted := 0
	if timeToClean || ratio > r.ForceRatio {
		deleted, err = s.deleteSegments(ratio > r.ForceRatio)
		if err != nil {
			return deleted, err
		}
		if deleted > 0 {
			if r2, err := s.measureDisk(); err == nil {
				ratio = r2
			}
		}
	}
	s.setDiskFull(ratio)
	return deleted, nil
}

// measureDisk reads the used fraction of the store's device and records
// it (DiskUsedRatio).
func (s *Store) measureDisk() (float64, error) {
	u, err := s.fs.DiskUsage(s.cfg.Dir)
	if err != nil {
		return 0, fmt.Errorf("store: disk usage: %w", err)
	}
	ratio := u.UsedRatio()
	s.usage.Store(math.Float64bits(ratio))
	s.recordSpace(u)
	return ratio, nil
}

// setDiskFull turns the disk-full flag on or off by the device's used
// fraction, its free space against the reserve, and stalled writers
// (disk.go), logging each change with its reason.
func (s *Store) setDiskFull(ratio float64) {
	reason := s.fullReason(ratio)
	full := reason != ""
	if full {
		s.space.reason.Store(&reason)
	}
	if was := s.diskFull.Swap(full); was != full {
		if full {
			s.log.Error("store: disk full: refusing writes", "reason", reason, "used", fmt.Sprintf("%.1f%%", 100*ratio))
		} else {
			s.log.Info("store: disk space available again: accepting writes", "used", fmt.Sprintf("%.1f%%", 100*ratio), "free_bytes", s.space.avail.Load())
		}
	}
}

// deleteSegments drops expired segments from the front of the log (or, when
// force is set, the oldest one regardless of age), never past the applied
// index, the raft floor or (unless forced) a delayed, timer or half message
// still waiting (pendingFloor), then the queue and index files pointing below
// the new start of the log. At most 10 segments go per call, as RocketMQ's
// deleteFileBatchMax.
func (s *Store) deleteSegments(force bool) (int, error) {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	floor := s.state.applied
	if f := s.cfg.Retention.Floor; f != nil && !force {
		floor = min(floor, f())
	}
	pendingFloor := int64(math.MaxInt64)
	if !force {
		pendingFloor = s.pendingFloor()
	}
	segs := s.clog.Segments()
	now := s.cfg.Clock.Now().UnixMilli()
	keepFrom := uint64(0) // DropPrefix argument: first index to keep
	n := 0
	// forcedEnd is the log position past the last segment deleted before it
	// expired (force only): its messages are lost to the consumers that
	// had not read them (countUnconsumed).
	forcedEnd := int64(-1)
	for i, sg := range segs {
		if i == len(segs)-1 || n >= 10 || sg.Entries == 0 {
			break
		}
		last := sg.FirstIndex + uint64(sg.Entries) - 1
		if last > floor || sg.Base+sg.Written > pendingFloor {
			// Entries a follower still needs, or a delayed or half message
			// not delivered yet.
			break
		}
		expired := s.segmentNewest(sg.FirstIndex, last)+s.cfg.Retention.FileReservedTime.Milliseconds() < now
		if !expired && !(force && n == 0) {
			break
		}
		if !expired {
			forcedEnd = sg.Base + sg.Size
		}
		keepFrom = last + 1
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if f := s.cfg.Retention.Floor; f != nil && force {
		if need := f(); keepFrom-1 > need {
			s.log.Warn("store: disk above the force-clean ratio: deleting entries a live follower still needs; it will catch up from a snapshot",
				"deleting_through", keepFrom-1, "follower_match", need, "force_ratio", s.cfg.Retention.ForceRatio)
		}
	}
	// Checkpoint first: after a crash, recovery applies the entries after
	// the last checkpoint again, so they must still be in the log.
	if err := s.persistLocked(); err != nil {
		return 0, err
	}
	if f := s.cfg.Retention.Drop; f != nil {
		if err := f(keepFrom); err != nil {
			return 0, fmt.Errorf("store: retention: %w", err)
		}
	} else if _, err := s.clog.DropPrefix(keepFrom); err != nil {
		return 0, fmt.Errorf("store: retention: %w", err)
	}
	minPos := s.clog.MinPosition()
	if forcedEnd >= 0 {
		// Before the queues drop the units: count what they point to.
		s.countUnconsumed(min(forcedEnd, minPos))
	}
	if _, err := s.cqs.DeleteBefore(minPos); err != nil {
		return n, fmt.Errorf("store: retention of consume queues: %w", err)
	}
	// Record a fresh index checkpoint first: the saved one may name a file
	// that is about to be deleted.
	if err := s.persistLocked(); err != nil {
		return n, err
	}
	if _, err := s.idx.DeleteBefore(minPos); err != nil {
		return n, fmt.Errorf("store: retention of index: %w", err)
	}
	s.log.Info("store: deleted commitlog segments", "count", n, "forced", force, "new_min_offset", minPos)
	return n, nil
}

// entryRecords returns the message records of an entry payload of kind
// (none for commands).
func entryRecords(kind byte, payload []byte) []byte {
	switch kind {
	case KindMessages:
		return payload
	case KindSchedule:
		if _, recs, err := schedule.DecodeDelivery(payload); err == nil {
			return recs
		}
	case KindTxn:
		if _, recs, err := txn.DecodeOp(payload); err == nil {
			return recs
		}
	case KindPop:
		if _, recs, err := pop.DecodeBatch(payload); err == nil {
			return recs
		}
	}
	return nil
}

// segmentNewest returns the newest store timestamp of the messages in
// entries first..last, looking back over at most 64 entries from the end;
// 0 when it holds no message.
func (s *Store) segmentNewest(first, last uint64) int64 {
	lo := first
	if last-first > 64 {
		lo = last - 64
	}
	ents, err := s.clog.Entries(lo, last+1, math.MaxUint64)
	if err != nil {
		return 0
	}
	var newest int64
	for _, e := range ents {
		kind, _, payload, err := parseBody(e.Data)
		if err != nil {
			continue
		}
		payload = entryRecords(kind, payload)
		for off := 0; off < len(payload); {
			v, err := message.Parse(payload[off:], false)
			if err != nil {
				break
			}
			newest = max(newest, v.StoreTimestamp)
			off += v.Size
		}
	}
	return newest
}

// DeleteExpired deletes the expired commitlog segments now, whatever the
// hour and the disk usage (mqadmin's deleteExpiredCommitLog), with the
// same bounds as the scheduled deletion (applied index, raft floor,
// pending delayed and half messages), and returns how many it deleted.
func (s *Store) DeleteExpired() (int, error) {
	total := 0
	for {
		n, err := s.deleteSegments(false)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// CleanExpiredQueues deletes the consume-queue and index files that only
// point below the start of the commitlog (mqadmin's cleanExpiredCQ) and
// returns how many consume-queue files went. Retention does this after
// each deletion of segments; this catches up after a crash between the
// two.
func (s *Store) CleanExpiredQueues() (int, error) {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	// A new journal first: the current one's records may hold units that
	// DeleteBefore drops (persistLocked starts one).
	if err := s.persistLocked(); err != nil {
		return 0, err
	}
	minPos := s.clog.MinPosition()
	n, err := s.cqs.DeleteBefore(minPos)
	if err != nil {
		return n, fmt.Errorf("store: clean expired consume queues: %w", err)
	}
	if err := s.persistLocked(); err != nil {
		return n, err
	}
	if _, err := s.idx.DeleteBefore(minPos); err != nil {
		return n, fmt.Errorf("store: clean expired index files: %w", err)
	}
	return n, nil
}
