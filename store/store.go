package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/offsets"
)

// Clock tells the time; injected so tests control retention.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Config configures a Store. Zero values take the defaults noted.
type Config struct {
	// Dir is the store directory. It must be a real path: bbolt needs the
	// operating system's files even when FS is an in-memory file system.
	Dir string
	// FS is the file system for commitlog, consume queues and index
	// (default: the operating system's).
	FS vfs.FS
	// SegmentSize of commitlog files (default 1 GiB).
	SegmentSize int64
	// WarmAhead is how far ahead of the writer the commitlog zero-fills
	// and syncs its active segment (commitlog.Options.WarmAhead: 0 for
	// its default, negative for off).
	WarmAhead int64
	// CacheWindow is how many bytes behind the durable end of the
	// commitlog stay in the page cache (commitlog.Options.CacheWindow: 0
	// for 1 GiB, negative to keep everything cached).
	CacheWindow int64
	// DirectIO, when positive, selects O_DIRECT appends to the commitlog
	// (commitlog.Options.DirectIO; off by default).
	DirectIO int
	// Flush is the commitlog durability mode (default FlushSync).
	Flush commitlog.FlushMode
	// CQUnitsPerFile (default 300,000), IndexSlots (5,000,000) and
	// IndexMaxEntries (20,000,000) size the consume queue and index files.
	CQUnitsPerFile  int
	IndexSlots      int
	IndexMaxEntries int
	// CQMaxOpenFiles bounds the consume-queue files kept open at once
	// (consumequeue.Options.MaxOpenFiles; negative for no bound). 0 sizes
	// it from the process's descriptor limit
	// (consumequeue.OpenFilesForProcess: half of it, 1,024 to 16,384).
	CQMaxOpenFiles int
	// DedupeWindow bounds how far apart (in store time) two sends with the
	// same UNIQ_KEY count as one (default 10 minutes; negative disables).
	DedupeWindow time.Duration
	// DedupeTableBytes bounds the log a snapshot's dedupe table covers:
	// only the messages stored in the last DedupeTableBytes of the log
	// before the snapshot (and within DedupeWindow) go into it (default
	// 32 MiB; see dedupe.go).
	DedupeTableBytes int64
	// PersistInterval is how often a checkpoint runs beside Apply (default
	// 1 s; see the package documentation).
	PersistInterval time.Duration
	// MaxMessageSize bounds one message body (default 4 MiB).
	MaxMessageSize int
	// StoreHost is written into records and offsetMsgIds.
	StoreHost netip.AddrPort
	// ApplyACL applies an OpACL command: it returns the new access-control
	// state (an opaque blob the store keeps with the rest of the
	// replicated state) from the current one (nil when none yet) and the
	// command's update. It must be deterministic; an error leaves the
	// state as it was, on every replica. Without it, OpACL fails.
	ApplyACL func(cur, update []byte) ([]byte, error)
	// Retention configures segment deletion and the disk checks.
	Retention RetentionConfig
	// NoSyncMeta skips bbolt fsyncs (tests only).
	NoSyncMeta bool
	// Failpoints switches on known-bad behaviours for the chaos harness's
	// self-test (internal/failpoint); the zero value is the correct store.
	// Only builds with -tags mutant can turn one on. The store passes
	// them on to its commit log; the replica to its raft node.
	Failpoints failpoint.Set
	Clock      Clock
	Logger     *slog.Logger
}

func (c *Config) fill() error {
	if c.Dir == "" {
		return errors.New("store: no directory configured")
	}
	if c.FS == nil {
		c.FS = vfs.Default()
	}
	if c.DedupeWindow == 0 {
		c.DedupeWindow = 10 * time.Minute
	}
	if c.DedupeTableBytes <= 0 {
		c.DedupeTableBytes = 32 << 20
	}
	if c.PersistInterval <= 0 {
		c.PersistInterval = time.Second
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = 4 << 20
	}
	if !c.StoreHost.IsValid() {
		c.StoreHost = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 10911)
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c.Retention.fill()
}

// Store is one node's message store.
type Store struct {
	cfg Config
	fs  vfs.FS
	log *slog.Logger

	lock  io.Closer
	clog  *commitlog.Log
	cqs   *consumequeue.Set
	idx   *index.Index
	db    *offsets.DB
	state *state

	// persistMu orders checkpoints: each one is captured, synced and
	// committed before the next is captured. Lock order: persistMu, then
	// applyMu. Apply never takes persistMu.
	persistMu sync.Mutex
	// persistErr is the sticky error of a failed checkpoint (a *error):
	// Apply and Persist refuse to run after it.
	persistErr atomic.Pointer[error]
	// persistKick asks the persister goroutine for a checkpoint.
	persistKick chan struct{}
	// persistStarted and persistDone count checkpoints begun and ended
	// (Checkpoints).
	persistStarted, persistDone atomic.Uint64
	// journal is the consume queues' tail journal (journal.go; persistMu).
	journal tailJournal

	// applyMu serialises Apply, checkpoint capture and retention: the
	// consume queues and the index have one writer at a time.
	applyMu     sync.Mutex
	lastPersist time.Time
	// persistEvery is the time from one checkpoint to the next that Apply
	// asks for (checkpointInterval; nanoseconds, 0 until the first).
	persistEvery atomic.Int64
	// batch is Apply's state between consume-queue flushes (applyMu).
	batch applyBatch
	// dedupeTab is the dedupe table a snapshot install left (dedupe.go;
	// applyMu).
	dedupeTab dedupeTable
	// applyErr is the storage error that failed Apply, sticky: Apply and
	// Persist refuse to run after it (applyMu).
	applyErr error
	// cleanStart is false when the abort file was found at open.
	cleanStart bool

	diskFull atomic.Bool
	usage    atomic.Uint64 // float64 bits of the last used ratio
	space    diskSpace     // free space, reserve, stalled writers (disk.go)
	// forcedUnconsumed counts the messages forced retention deleted before
	// a consumer group read them (unconsumed.go).
	forcedUnconsumed atomic.Uint64
	// topicsVersion counts changes of the topic table (applied creations,
	// updates and deletions, snapshot restores), for those who publish it.
	topicsVersion atomic.Uint64
	// aclVersion counts changes of the access-control state (ACLVersion).
	aclVersion atomic.Uint64
	// brokerConfigVersion counts changes of the group-wide broker
	// settings (BrokerConfig).
	brokerConfigVersion atomic.Uint64

	changed  chan struct{} // closed and replaced after each Apply
	changeMu sync.Mutex
	// topicWatch holds, by topic, a channel closed at the next Apply that
	// touches the topic (TopicChanged); guarded by changeMu.
	topicWatch map[string]chan struct{}
	// touched collects the topics the entries of an Apply touch (a topic
	// may be listed more than once), and touchAll a change that may
	// concern any topic; guarded by applyMu. touchGen counts the calls of
	// notifyApplied: a message's topic is listed once per call
	// (applyTopic.touchGen), not once per message.
	touched  []string
	touchAll bool
	touchGen uint64

	stop chan struct{}
	wg   sync.WaitGroup
}

const (
	metaIndexCheckpoint = "index-checkpoint"
	// metaACL holds the access-control state (Config.ApplyACL).
	metaACL = "acl"
	// metaBrokerConfig holds the group-wide broker settings
	// (OpBrokerConfig) as a JSON object.
	metaBrokerConfig = "brokerConfig"
	// metaRecall holds the recalled set of scheduled messages
	// (schedule.Recalled).
	metaRecall = "scheduleRecall"
	abortName  = "abort"
	lockName   = "lock"
)

// Open opens or creates a store, recovering from an unclean stop.
func Open(cfg Config) (*Store, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, fs: cfg.FS, log: cfg.Logger, changed: make(chan struct{}), stop: make(chan struct{}), persistKick: make(chan struct{}, 1)}
	s.space.t0 = time.Now()
	s.batch.gen = 1 // an applyQueue's batchGen 0: in no batch yet
	opening := time.Now()
	if err := s.open(); err != nil {
		s.closeAll()
		if s.lock != nil {
			s.lock.Close()
		}
		return nil, err
	}
	// What recovery read and how long the whole open took (commit log,
	// bbolt, consume queues cut back, index): the last segment is scanned
	// entry by entry with its CRCs, sealed ones load their index sidecar
	// (and are scanned only when it is missing or bad).
	if segs := s.clog.Segments(); len(segs) > 0 {
		took := time.Since(opening)
		var logBytes int64
		for _, sg := range segs {
			logBytes += sg.Written
		}
		scanned := segs[len(segs)-1].Written
		s.log.Info("store: opened", "clean_start", s.cleanStart, "took", took, "segments", len(segs),
			"log_bytes", logBytes, "scanned_bytes", scanned, "scan_mb_per_s", int64(float64(scanned)/1e6/max(took.Seconds(), 1e-9)))
	}
	// Measure the device now rather than at the first check: a node
	// started on a full disk refuses writes from its first one, and its
	// status shows the real usage at once. Retention waits for the loop.
	if err := s.refreshSpace(); err != nil {
		s.log.Warn("store: disk usage unknown until the first check", "err", err)
	}
	s.wg.Add(3)
	go s.diskLoop()
	go s.persistLoop()
	go s.spaceLoop()
	return s, nil
}

func (s *Store) path(elem ...string) string { return vfs.Join(append([]string{s.cfg.Dir}, elem...)...) }

// restrictDir makes the store's directory the broker user's only
// (vfs.DirMode), as a data directory of an older raftmq, made 0755, is
// not: what it holds, files made 0644 by then included, is out of other
// users' reach once its directory is.
func (s *Store) restrictDir() error {
	fi, err := os.Stat(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if fi.Mode().Perm()&^vfs.DirMode == 0 {
		return nil
	}
	if err := os.Chmod(s.cfg.Dir, vfs.DirMode); err != nil {
		return fmt.Errorf("store: restrict %s to its owner: %w", s.cfg.Dir, err)
	}
	s.log.Info("store: data directory restricted to its owner", "dir", s.cfg.Dir, "was", fi.Mode().Perm().String(), "now", vfs.DirMode.String())
	return nil
}

func (s *Store) open() error {
	if err := s.fs.MkdirAll(s.cfg.Dir, vfs.DirMode); err != nil {
		return fmt.Errorf("store: create %s: %w", s.cfg.Dir, err)
	}
	// bbolt always lives on the real file system.
	if err := os.MkdirAll(s.cfg.Dir, vfs.DirMode); err != nil {
		return fmt.Errorf("store: create %s: %w", s.cfg.Dir, err)
	}
	if err := s.restrictDir(); err != nil {
		return err
	}
	lk, err := s.fs.Lock(s.path(lockName))
	if err != nil {
		return fmt.Errorf("store: %s is in use by another process: %w", s.cfg.Dir, err)
	}
	s.lock = lk
	_, err = s.fs.Stat(s.path(abortName))
	s.cleanStart = errors.Is(err, vfs.ErrNotExist)
	if !s.cleanStart {
		s.log.Warn("store: abort file found: the last stop was not clean; recovering", "dir", s.cfg.Dir)
	}
	if err := vfs.WriteFileAtomic(s.fs, s.cfg.Dir, abortName, []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		if !vfs.IsNoSpace(err) {
			return fmt.Errorf("store: write abort file: %w", err)
		}
		// A node restarted on a full disk still opens, refuses writes and
		// serves reads; the file only tells the next start (and the log)
		// that this one did not stop cleanly, and recovery runs anyway.
		s.log.Warn("store: disk full: abort file not written; opening anyway", "err", err)
	}

	s.db, err = offsets.Open(filepath.Join(s.cfg.Dir, "meta.db"), offsets.Options{NoSync: s.cfg.NoSyncMeta, Logger: s.log})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	s.state, err = loadState(s.db)
	if err != nil {
		return err
	}
	if s.dedupeTab, err = loadDedupeTable(s.db); err != nil {
		return err
	}
	lopts := commitlog.Options{
		SegmentSize: s.cfg.SegmentSize, Flush: s.cfg.Flush, DurableIndex: s.state.applied, Logger: s.log,
		Failpoints: s.cfg.Failpoints, WarmAhead: s.cfg.WarmAhead, CacheWindow: s.cfg.CacheWindow,
		DirectIO: s.cfg.DirectIO,
	}
	if failpoint.On(s.cfg.Failpoints, failpoint.AckBeforeFsync) {
		ackBeforeFsync(&lopts)
	}
	s.clog, err = commitlog.Open(s.fs, s.path("commitlog"), lopts)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if last := s.clog.LastIndex(); last < s.state.applied {
		return fmt.Errorf("store: %w", &commitlog.CorruptError{File: s.clog.Dir(), Index: last + 1,
			Reason: fmt.Sprintf("meta.db says index %d was applied but the log ends at %d", s.state.applied, last)})
	}
	// OwnerSyncsFS: checkpoints (captureLocked, commit) make the queues
	// durable with one SyncFS, and recoverDerived cuts them back to the
	// last checkpoint, so the queues' write path needs no sync of its own.
	derived := s.derivedFS()
	s.journal.fs = derived
	maxOpen := s.cfg.CQMaxOpenFiles
	if maxOpen == 0 {
		maxOpen = consumequeue.OpenFilesForProcess()
	}
	s.cqs, err = consumequeue.OpenSet(derived, s.path("consumequeue"), consumequeue.Options{
		UnitsPerFile: s.cfg.CQUnitsPerFile, MaxOpenFiles: maxOpen, OwnerSyncsFS: true, Logger: s.log})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	s.idx, err = index.Open(derived, s.path("index"), index.Options{SlotCount: s.cfg.IndexSlots, MaxEntries: s.cfg.IndexMaxEntries, Logger: s.log})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := s.recoverDerived(); err != nil {
		return err
	}
	s.lastPersist = time.Now()
	return nil
}

// recoverDerived cuts consume queues and the index back to the state
// persisted in bbolt, so that both agree with the applied index.
func (s *Store) recoverDerived() error {
	raw, found, err := s.readJournalMark()
	if err != nil {
		return err
	}
	if err := s.replayJournal(raw, found); err != nil {
		return err
	}
	for _, q := range s.cqs.Queues() {
		want := s.state.nextOffset(queueKey{q.Topic(), q.QueueID()})
		if q.MaxOffset() < want {
			return fmt.Errorf("store: consume queue %s/%d ends at %d but meta.db says %d: %w",
				q.Topic(), q.QueueID(), q.MaxOffset(), want, commitlog.ErrCorrupt)
		}
		if q.MaxOffset() > want {
			s.log.Info("store: cutting consume queue back to the applied index", "topic", q.Topic(), "queue", q.QueueID(), "from", q.MaxOffset(), "to", want)
			if err := q.TruncateTo(want); err != nil {
				return fmt.Errorf("store: %w", err)
			}
		}
	}
	// Queue minimums are not stored: they follow the start of the log.
	if _, err := s.cqs.DeleteBefore(s.clog.MinPosition()); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	var cp index.Checkpoint
	err = s.db.View(func(tx *offsets.Tx) error {
		if b, ok := tx.Meta(metaIndexCheckpoint); ok {
			return json.Unmarshal(b, &cp)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: read index checkpoint: %w", err)
	}
	if err := s.idx.Recover(cp); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// readJournalMark returns the tail journal's meta value, if any.
func (s *Store) readJournalMark() (raw []byte, found bool, err error) {
	err = s.db.View(func(tx *offsets.Tx) error {
		if b, ok := tx.Meta(metaTailJournal); ok {
			raw, found = append([]byte(nil), b...), true
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: read tail journal meta: %w", err)
	}
	return raw, found, nil
}

// Log returns the commitlog, which is the raft log.
func (s *Store) Log() *commitlog.Log { return s.clog }

// TopicsVersion changes whenever the topic table does.
func (s *Store) TopicsVersion() uint64 { return s.topicsVersion.Load() }

// AppliedIndex returns the index of the last applied entry.
func (s *Store) AppliedIndex() uint64 {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	return s.state.applied
}

// CleanStart reports whether the previous stop was clean.
func (s *Store) CleanStart() bool { return s.cleanStart }

// Persist makes everything applied so far durable in the consume queues,
// the index and bbolt (see the package documentation). Apply goes on while
// it syncs and commits.
func (s *Store) Persist() error {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	s.persistStarted.Add(1)
	defer s.persistDone.Add(1)
	s.applyMu.Lock()
	cp, err := s.captureLocked()
	s.applyMu.Unlock()
	if err != nil {
		return err
	}
	// The queues' writes run beside Apply: with thousands of active
	// queues they are a journal record each (or, when a new journal
	// starts, thousands of pwrites and opens of files the cache closed),
	// which must not hold up every acknowledgement.
	if err := s.markQueuesJournal(cp, false); err != nil {
		s.applyMu.Lock()
		if s.applyErr == nil {
			s.applyErr = err
		}
		s.applyMu.Unlock()
		return err
	}
	s.persistEvery.Store(int64(checkpointInterval(s.cfg.PersistInterval, cp.written)))
	return s.commit(cp)
}

// checkpointQueues is how many consume queues' tails a checkpoint writes
// per PersistInterval at most, on average: a checkpoint that wrote more
// than that pushes the next one back in proportion (checkpointInterval).
// Each tail costs a pwrite, its share of the bbolt transaction and of the
// capture (~15-20 µs of CPU here), and with 8,192 queues 2,048 tails a
// second were still ~2 µs of CPU per message on every node at ~12 k
// messages/s: 512 takes 8,192 active queues to the stretch's cap.
const checkpointQueues = 512

// maxPersistStretch bounds that: a checkpoint at least every
// maxPersistStretch intervals.
const maxPersistStretch = 8

// checkpointInterval returns the time from a checkpoint that wrote the
// tails of written consume queues to the next one: every interval, or
// longer when there were more than checkpointQueues, so that the
// checkpoints' cost stays about checkpointQueues pwrites (and their share
// of the index and bbolt work) per interval however many queues are
// active. A crash replays up to one such interval of entries.
func checkpointInterval(interval time.Duration, written int) time.Duration {
	return interval * time.Duration(min(max(written/checkpointQueues, 1), maxPersistStretch))
}

// persistLocked is Persist for a caller that holds persistMu and applyMu
// (retention, snapshots): Apply waits for the sync and the commit.
func (s *Store) persistLocked() error {
	cp, err := s.captureLocked()
	if err != nil {
		return err
	}
	// A new journal: the caller may have rewritten queue units (retention,
	// a snapshot install), over which the journal's records are stale.
	if err := s.markQueuesJournal(cp, true); err != nil {
		s.applyErr = err
		return err
	}
	return s.commit(cp)
}

// markQueues writes what the consume queues hold in memory and records in
// cp how far each dirty queue was written. It may run beside Apply (the
// caller holds persistMu, which every other writer of the queues but
// Apply holds): every unit that cp's capture covers was put and flushed
// before the capture, so it is written now, before commit's SyncFS; units
// Apply puts meanwhile are written too and are covered by no checkpoint
// yet, which recovery cuts back anyway.
func (s *Store) markQueues(cp *checkpoint) error {
	marks, err := s.cqs.MarkFlushed()
	if err != nil {
		return fmt.Errorf("store: persist: %w", err)
	}
	cp.queues = marks
	return nil
}

// persistLoop takes a checkpoint whenever Apply asks for one (every
// PersistInterval), so that no acknowledgement waits for the syncs of
// derived state.
func (s *Store) persistLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.persistKick:
		}
		s.persistUntilSpace()
	}
}

// persistUntilSpace takes a checkpoint and, while checkpoints fail for
// lack of space (checkpointNoSpace), takes it again with a backoff from
// 10 ms to 1 s until one is written or the store stops, as the raft log's
// writer and the derived writers wait for space. It waits without holding
// persistMu, so that retention (which may free the space) and snapshots
// go on meanwhile, and so does Apply.
func (s *Store) persistUntilSpace() {
	wait := 10 * time.Millisecond
	var t *time.Timer
	for {
		err := s.Persist()
		if err == nil {
			return
		}
		if !vfs.IsNoSpace(err) || !s.space.persistStalled.Load() {
			if s.persistFailure() == nil {
				// An earlier Apply failure, reported by Apply itself.
				s.log.Debug("store: checkpoint skipped", "err", err)
			}
			return
		}
		if t == nil {
			t = time.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-s.stop:
			return
		case <-s.space.stallStop:
			return
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// Checkpoints returns how many checkpoints (Persist) began and ended so
// far: a request that saw started > done at its start or started grow
// before its end ran beside one (the leader's pop traces).
func (s *Store) Checkpoints() (started, done uint64) {
	return s.persistStarted.Load(), s.persistDone.Load()
}

// kickPersist asks persistLoop for a checkpoint, without waiting.
func (s *Store) kickPersist() {
	select {
	case s.persistKick <- struct{}{}:
	default:
	}
}

// persistFailure returns the sticky checkpoint error, if any.
func (s *Store) persistFailure() error {
	if p := s.persistErr.Load(); p != nil {
		return *p
	}
	return nil
}

// checkpoint is one persist's capture: the state delta and the index
// checkpoint, valid once the file system is synced.
type checkpoint struct {
	delta  *stateDelta
	index  []byte
	queues []consumequeue.SyncMark
	// written counts the queues written or journaled (checkpointInterval).
	written int
	// journal is the tail journal as the checkpoint covers it.
	journal *journalMark
}

// captureLocked is the part of a checkpoint that needs applyMu, and no
// fsync: it writes what the index buffers, takes the index checkpoint and
// the state's delta. The caller holds persistMu and applyMu, and passes
// the result to markQueues (which needs no applyMu) and then to commit.
func (s *Store) captureLocked() (*checkpoint, error) {
	if s.applyErr != nil {
		return nil, fmt.Errorf("store: persist: refusing after an apply failure: %w", s.applyErr)
	}
	if err := s.persistFailure(); err != nil {
		return nil, fmt.Errorf("store: persist: refusing after a failed checkpoint: %w", err)
	}
	s.lastPersist = time.Now()
	// Apply leaves nothing buffered in the consume queues, but a checkpoint
	// must never cover an unwritten unit: write any first.
	if err := s.flushQueuesLocked(); err != nil {
		s.applyErr = err
		return nil, fmt.Errorf("store: persist: %w", err)
	}
	cp, err := s.idx.WriteCheckpoint()
	if err != nil {
		s.applyErr = err
		return nil, fmt.Errorf("store: persist: %w", err)
	}
	cpb, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("store: persist: %w", err)
	}
	return &checkpoint{delta: s.state.takeDelta(), index: cpb}, nil
}

// commit makes a captured checkpoint durable: one SyncFS covers every
// consume-queue and index write made before the capture (whatever the
// number of queues), then one bbolt transaction records the checkpoint.
// A failure is sticky: the delta is gone, so no later checkpoint may be
// committed over it. A failure for lack of space, of the SyncFS or of the
// bbolt commit, is not: nothing was recorded, the delta goes back
// (checkpointNoSpace), the queues stay dirty, and a later checkpoint
// syncs and records it all again (persistUntilSpace). The caller holds
// persistMu.
func (s *Store) commit(cp *checkpoint) error {
	fail := func(err error) error {
		s.persistErr.CompareAndSwap(nil, &err)
		s.log.Error("store: checkpoint failed; the node must restart and rebuild derived state from the log", "err", err)
		return err
	}
	if err := s.fs.SyncFS(s.cfg.Dir); err != nil {
		err = fmt.Errorf("store: persist: sync derived state: %w", err)
		if vfs.IsNoSpace(err) {
			return s.checkpointNoSpace(cp, err)
		}
		return fail(err)
	}
	s.cqs.SyncedByFS(cp.queues)
	if err := cp.delta.write(s.db, cp.index, cp.journal); err != nil {
		if vfs.IsNoSpace(err) {
			return s.checkpointNoSpace(cp, err)
		}
		return fail(err)
	}
	s.journalCommitted()
	s.checkpointResumed()
	return nil
}

// Changed returns a channel closed at the next Apply that changes anything
// (for long polling).
func (s *Store) Changed() <-chan struct{} {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	return s.changed
}

// TopicChanged returns a channel closed at the next Apply that touches
// topic: a message stored in it, a pop entry of one of its queues, a
// consumer offset of it committed, or a change of configuration (which
// may concern any topic). A long poll on one topic waits on it, so that
// the traffic of other topics does not wake it.
func (s *Store) TopicChanged(topic string) <-chan struct{} {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	if s.topicWatch == nil {
		s.topicWatch = map[string]chan struct{}{}
	}
	ch, ok := s.topicWatch[topic]
	if !ok {
		ch = make(chan struct{})
		s.topicWatch[topic] = ch
	}
	return ch
}

// touch records that the entry being applied touches topic. The caller
// holds applyMu.
func (s *Store) touch(topic string) {
	s.touched = append(s.touched, topic)
}

// notify wakes every waiter: anything may have changed (a snapshot).
func (s *Store) notify() {
	s.touchAll = true
	s.notifyApplied()
}

// notifyApplied wakes the waiters of Changed, and those of the topics the
// entries applied since the last call touched. The caller holds applyMu.
func (s *Store) notifyApplied() {
	s.changeMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	if s.touchAll {
		for topic, ch := range s.topicWatch {
			close(ch)
			delete(s.topicWatch, topic)
		}
	} else if len(s.topicWatch) > 0 {
		for _, topic := range s.touched {
			if ch, ok := s.topicWatch[topic]; ok {
				close(ch)
				delete(s.topicWatch, topic)
			}
		}
	}
	s.changeMu.Unlock()
	clear(s.touched)
	s.touched = s.touched[:0]
	s.touchAll = false
	s.touchGen++
}

// Close persists, stops background work and closes every file. The abort
// file is removed only when everything closed cleanly.
func (s *Store) Close() error {
	s.StopWaiting()
	close(s.stop)
	s.wg.Wait()
	// A clean stop leaves every unit in the queues' files.
	s.persistMu.Lock()
	s.journal.rotate = true
	s.persistMu.Unlock()
	err := s.Persist()
	if cerr := s.closeAll(); err == nil {
		err = cerr
	}
	if err == nil {
		if rerr := s.fs.Remove(s.path(abortName)); rerr != nil && !errors.Is(rerr, vfs.ErrNotExist) {
			err = fmt.Errorf("store: remove abort file: %w", rerr)
		} else {
			err = s.fs.SyncDir(s.cfg.Dir)
		}
	}
	if s.lock != nil {
		s.lock.Close()
	}
	return err
}

func (s *Store) closeAll() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if s.idx != nil {
		keep(s.idx.Close())
	}
	if s.journal.f != nil {
		keep(s.journal.f.Close())
		s.journal.f = nil
	}
	if s.cqs != nil {
		keep(s.cqs.Close())
	}
	if s.clog != nil {
		keep(s.clog.Close())
	}
	if s.db != nil {
		keep(s.db.Close())
	}
	return first
}
