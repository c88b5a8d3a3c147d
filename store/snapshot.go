package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/raftmq/raftmq/offsets"
)

// Snapshot layout (what a lagging replica receives from the leader when the
// entries it misses were deleted by retention). All integers big-endian:
//
//	| off    | size | field                                                  |
//	|      0 |    4 | magic 0x524D5150 ("RMQP")                              |
//	|      4 |    4 | version, 2 (1 is still read)                           |
//	|      8 |    8 | applied index P the state corresponds to               |
//	|     16 |    8 | global log position where entry P+1 goes               |
//	|     24 |    8 | length n of the bbolt database copy                    |
//	|     32 |    n | bbolt database (offsets.DB.WriteSnapshot) as of P      |
//	|   32+n |    8 | length m of the dedupe table (version 2 only)          |
//	|   40+n |    m | dedupe table as of P (version 2 only, dedupe.go)       |
//	| 40+n+m |    4 | CRC-32C of every byte before it                        |
//
// The database carries topics, groups, consumer offsets and each queue's
// next offset; the messages themselves are not in a snapshot (they are
// gone from the leader's log too): the installing replica's queues restart
// empty at the leader's next offsets. The dedupe table lists the messages
// stored before P that a retry applied after P could match (every queued
// message with a UNIQ_KEY stored within DedupeWindow of the newest store
// time at P, in the last Config.DedupeTableBytes of the log), with what a
// duplicate's answer reports; the installing
// replica keeps it in its dedupe bucket and consults it after its index. A
// version 1 snapshot has no table: the replica then has none.
const (
	snapMagic   uint32 = 0x524D5150
	snapVersion uint32 = 2
	snapV1      uint32 = 1
	snapHeader         = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadSnapshot is returned for a snapshot that does not decode.
var ErrBadSnapshot = errors.New("store: malformed snapshot")

// Snapshot persists everything applied and returns a snapshot as of the
// applied index, with that index. Apply is blocked meanwhile.
func (s *Store) Snapshot() (uint64, []byte, error) {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if err := s.persistLocked(); err != nil {
		return 0, nil, err
	}
	// A follower that installs the snapshot must not look for this node's
	// tail journal. persistLocked has just started a new, empty one (every
	// unit is in the queues' files), so without the key this node replays
	// nothing it needs; the next checkpoint records the key again.
	if err := s.db.Update(func(tx *offsets.Tx) error { return tx.DeleteMeta(metaTailJournal) }); err != nil {
		return 0, nil, fmt.Errorf("store: snapshot: %w", err)
	}
	p := s.state.applied
	if p == 0 {
		return 0, nil, fmt.Errorf("store: snapshot: nothing applied yet")
	}
	var pos int64
	if p+1 <= s.clog.LastIndex() {
		var err error
		if pos, err = s.clog.Position(p + 1); err != nil {
			return 0, nil, fmt.Errorf("store: snapshot: %w", err)
		}
	} else {
		pos = s.clog.EndPosition()
	}
	tab, cutoff, err := s.buildDedupeTable(pos)
	if err != nil {
		return 0, nil, fmt.Errorf("store: snapshot: %w", err)
	}
	// What the table leaves out can no longer match: drop it here too.
	if err := s.pruneDedupeTable(cutoff); err != nil {
		return 0, nil, fmt.Errorf("store: snapshot: %w", err)
	}
	section, err := encodeDedupeTable(tab)
	if err != nil {
		return 0, nil, fmt.Errorf("store: snapshot: %w", err)
	}
	var buf bytes.Buffer
	buf.Write(make([]byte, snapHeader))
	if err := s.db.WriteSnapshot(&buf); err != nil {
		return 0, nil, fmt.Errorf("store: snapshot: %w", err)
	}
	b := buf.Bytes()
	binary.BigEndian.PutUint32(b[0:], snapMagic)
	binary.BigEndian.PutUint32(b[4:], snapVersion)
	binary.BigEndian.PutUint64(b[8:], p)
	binary.BigEndian.PutUint64(b[16:], uint64(pos))
	binary.BigEndian.PutUint64(b[24:], uint64(len(b)-snapHeader))
	b = binary.BigEndian.AppendUint64(b, uint64(len(section)))
	b = append(b, section...)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return p, b, nil
}

// SnapshotInfo is a decoded snapshot header.
type SnapshotInfo struct {
	Index uint64
	Pos   int64
	DB    []byte
	// dedupe is the snapshot's dedupe table (empty for version 1).
	dedupe dedupeTable
}

// DecodeSnapshot checks and splits a snapshot (version 1 or 2).
func DecodeSnapshot(b []byte) (SnapshotInfo, error) {
	if len(b) < snapHeader+4 {
		return SnapshotInfo{}, fmt.Errorf("%w: %d bytes", ErrBadSnapshot, len(b))
	}
	version := binary.BigEndian.Uint32(b[4:])
	if binary.BigEndian.Uint32(b) != snapMagic || (version != snapVersion && version != snapV1) {
		return SnapshotInfo{}, fmt.Errorf("%w: bad magic or version", ErrBadSnapshot)
	}
	end := len(b) - 4
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
		return SnapshotInfo{}, fmt.Errorf("%w: checksum mismatch", ErrBadSnapshot)
	}
	n := binary.BigEndian.Uint64(b[24:])
	if n > uint64(end-snapHeader) {
		return SnapshotInfo{}, fmt.Errorf("%w: database length %d in %d bytes", ErrBadSnapshot, n, len(b))
	}
	dbEnd := snapHeader + int(n)
	info := SnapshotInfo{Index: binary.BigEndian.Uint64(b[8:]), Pos: int64(binary.BigEndian.Uint64(b[16:])), DB: b[snapHeader:dbEnd], dedupe: dedupeTable{}}
	if version == snapV1 {
		if dbEnd != end {
			return SnapshotInfo{}, fmt.Errorf("%w: database length %d in %d bytes", ErrBadSnapshot, n, len(b))
		}
		return info, nil
	}
	if end-dbEnd < 8 {
		return SnapshotInfo{}, fmt.Errorf("%w: no dedupe table length after the database", ErrBadSnapshot)
	}
	m := binary.BigEndian.Uint64(b[dbEnd:])
	if m != uint64(end-dbEnd-8) {
		return SnapshotInfo{}, fmt.Errorf("%w: dedupe table length %d in %d bytes", ErrBadSnapshot, m, end-dbEnd-8)
	}
	var err error
	if info.dedupe, err = decodeDedupeTable(b[dbEnd+8 : end]); err != nil {
		return SnapshotInfo{}, err
	}
	return info, nil
}

// Restore replaces the store's state with a snapshot's. resetLog must make
// the log continue with entry info.Index+1 at info.Pos (the raft storage's
// ApplySnapshot does, recording the snapshot's metadata first). The log is
// reset first, then the database replaced, then queues reset and the index
// emptied; the store opens after a crash at any point, and the caller
// (which keeps the snapshot in a file until Restore returns) repeats it.
func (s *Store) Restore(snap []byte, resetLog func(info SnapshotInfo) error) error {
	info, err := DecodeSnapshot(snap)
	if err != nil {
		return err
	}
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	defer s.topicsVersion.Add(1)
	if err := resetLog(info); err != nil {
		return fmt.Errorf("store: restore: reset log: %w", err)
	}
	path := filepath.Join(s.cfg.Dir, "meta.db")
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: restore: close meta.db: %w", err)
	}
	if err := offsets.RestoreSnapshot(path, bytes.NewReader(info.DB)); err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	if s.db, err = offsets.Open(path, offsets.Options{NoSync: s.cfg.NoSyncMeta, Logger: s.log}); err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	// Snapshot leaves the tail journal's key out; should one come with
	// the database all the same, this node's journals hold other units:
	// nothing is replayed until the checkpoint below names a new one.
	if err := s.db.Update(func(tx *offsets.Tx) error { return tx.DeleteMeta(metaTailJournal) }); err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	// The leader's own dedupe bucket came with its database: replace it
	// with the snapshot's table (none for a version 1 snapshot).
	if err := saveDedupeTable(s.db, info.dedupe); err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	s.dedupeTab = info.dedupe
	st, err := loadState(s.db)
	if err != nil {
		return err
	}
	if st.applied != info.Index {
		return fmt.Errorf("%w: database applied index %d, header says %d", ErrBadSnapshot, st.applied, info.Index)
	}
	for _, q := range s.cqs.Queues() {
		if err := q.ResetTo(st.nextOffset(queueKey{q.Topic(), q.QueueID()})); err != nil {
			return fmt.Errorf("store: restore: %w", err)
		}
	}
	for k, p := range st.queues {
		next := *p
		q, err := s.cqs.Queue(k.topic, k.queue, true)
		if err != nil {
			return fmt.Errorf("store: restore: %w", err)
		}
		if q.MaxOffset() != next || q.MinOffset() != next {
			if err := q.ResetTo(next); err != nil {
				return fmt.Errorf("store: restore: %w", err)
			}
		}
	}
	if err := s.cqs.SyncDirty(); err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	if _, err := s.idx.DeleteBefore(s.clog.MinPosition()); err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	cur := s.state
	cur.mu.Lock()
	cur.applied, cur.appliedTerm, cur.persisted = st.applied, st.appliedTerm, st.persisted
	cur.topics, cur.groups, cur.consumer, cur.queues = st.topics, st.groups, st.consumer, st.queues
	cur.sched, cur.txns, cur.pop = st.sched, st.txns, st.pop
	cur.recall = st.recall
	cur.levels = st.levels
	cur.acl = st.acl
	s.aclVersion.Add(1)
	cur.brokerConfig = st.brokerConfig
	s.brokerConfigVersion.Add(1)
	cur.clearDirty()
	cur.mu.Unlock()
	s.log.Info("store: installed snapshot", "index", info.Index, "next_position", info.Pos, "dedupe_keys", len(info.dedupe))
	s.notify()
	// Write our own index checkpoint over the leader's.
	return s.persistLocked()
}
