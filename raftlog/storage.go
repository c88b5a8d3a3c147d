// Package raftlog runs etcd raft over raftmq's commitlog. This file is its
// storage half: raft.Storage implemented by the commitlog itself (the raft
// log is the CommitLog; there is no second WAL) plus a small, fsynced state
// file for HardState, ConfState and the compaction point.
//
// # State file "raftstate"
//
// Two 4096-byte slots at offsets 0 and 4096, written alternately, each
// fsynced before the write that depends on it; the valid slot with the
// higher sequence number wins, so a torn write of one slot leaves the other:
//
//	| off | size | field                                                |
//	|   0 |    4 | magic 0x524D5153 ("RMQS")                            |
//	|   4 |    4 | payload length n                                     |
//	|   8 |    8 | sequence number                                      |
//	|  16 |    8 | compaction index: entries <= it are gone             |
//	|  24 |    8 | term of the entry at the compaction index            |
//	|  32 |    8 | cluster ID of the group (0: none recorded yet)       |
//	|  40 |    4 | length h of the HardState                            |
//	|  44 |    h | HardState, protobuf (raftpb)                         |
//	| ... |  n-h | ConfState, protobuf (raftpb)                         |
//	| 40+n|    4 | CRC-32C of bytes 0 .. 40+n-1                          |
//
// Integers are big-endian; n counts the HardState length field and both
// messages. A slot with the magic 0x524D5152 ("RMQR") is the first version
// of this format, written before groups had a cluster ID: it lacks the
// field at 32, so its HardState length is at 32, the HardState at 36 and
// the CRC at 32+n. It is still read (as cluster ID 0, for the node to
// adopt one, see cluster.Start); every write is in the current version, so
// a binary older than the cluster ID cannot read a state file this one
// has written.
//
// The cluster ID names the raft group the state belongs to: it is recorded
// once (SetClusterID) and never changes, so a data directory copied into
// another group's node is recognised as foreign before raft starts.
//
// These constants are part of the on-disk format and must not change.
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/internal/vfs"
)

const (
	stateMagic    uint32 = 0x524D5153 // "RMQS": with the cluster ID
	stateMagicV1  uint32 = 0x524D5152 // "RMQR": the first version, read only
	stOffMagic           = 0
	stOffLen             = 4
	stOffSeq             = 8
	stOffCompact         = 16
	stOffCompactT        = 24
	stOffCluster         = 32
	stOffHSLen           = 40 // 32 in the first version
	stOffHSLenV1         = 32
	stSlot               = 4096
	stateName            = "raftstate"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrStateCorrupt is returned when neither state slot is valid although the
// file is not empty.
var ErrStateCorrupt = errors.New("raftlog: raft state file corrupt")

// ErrClusterMismatch is returned by SetClusterID when the state file
// already belongs to another cluster.
var ErrClusterMismatch = errors.New("raftlog: cluster ID mismatch")

// ErrClosed is returned by InitialState, FirstIndex and LastIndex after
// Close: a node must not be built over (or keep reading) a closed storage.
var ErrClosed = errors.New("raftlog: storage closed")

// Storage implements raft.Storage over a commitlog.
type Storage struct {
	fs  vfs.FS
	dir string
	log *commitlog.Log
	w   *commitlog.Writer // the log's one writer, released by Close

	mu struct {
		sync.Mutex
		hs       *pb.HardState
		cs       *pb.ConfState
		compact  uint64 // entries <= compact are gone
		compactT uint64
		seq      uint64
		cluster  uint64 // the group's cluster ID; 0 until recorded
		loaded   bool   // a state slot was read at open
		closed   bool
	}
	f vfs.File
	// SnapshotData, when set, returns the application's snapshot and the
	// index it was taken at, which must not be below the compaction point;
	// without it Snapshot says "temporarily unavailable".
	SnapshotData func() (uint64, []byte, error)
	// SnapshotInBackground makes Snapshot build the application's snapshot
	// (SnapshotData) on a goroutine of its own. Raft asks for it on the
	// owner goroutine when a follower needs entries already compacted,
	// and building it (for the store: a checkpoint, its dedupe table and a
	// copy of its database) must not keep the owner from heartbeating and
	// replicating meanwhile. Snapshot answers
	// ErrSnapshotTemporarilyUnavailable while the build runs (raft asks
	// again at the follower's next heartbeat response) and hands the
	// result to the first call after it, unless the log was compacted past
	// it. Without it (the deterministic simulator) Snapshot builds in place.
	// Set it before the node starts.
	SnapshotInBackground bool
	snap                 struct {
		sync.Mutex
		build *snapBuild
	}
	builds sync.WaitGroup

	// Failpoints are the known-bad behaviours on (internal/failpoint; only
	// in builds with -tags mutant): here vote-not-fsynced, which leaves the
	// raft state (term, vote, membership) written but not fsynced. Set it
	// before the node starts; the zero value is the correct storage.
	Failpoints failpoint.Set
}

var _ raft.Storage = (*Storage)(nil)

// OpenStorage opens the state file in dir and wraps log, taking the log's
// writer (commitlog.Log.Writer) until Close: it fails, with an error
// wrapping commitlog.ErrWriterTaken, if another owner holds it. On error
// the state file is closed and the writer released again.
func OpenStorage(fs vfs.FS, dir string, log *commitlog.Log) (_ *Storage, err error) {
	w, err := log.Writer()
	if err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	defer func() {
		if err != nil {
			w.Release()
		}
	}()
	if err := fs.MkdirAll(dir, vfs.DirMode); err != nil {
		return nil, fmt.Errorf("raftlog: create %s: %w", dir, err)
	}
	f, err := fs.OpenReadWrite(vfs.Join(dir, stateName))
	if err != nil {
		return nil, fmt.Errorf("raftlog: open state: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	s := &Storage{fs: fs, dir: dir, log: log, w: w, f: f}
	s.mu.hs, s.mu.cs = &pb.HardState{}, &pb.ConfState{}
	if err := s.load(); err != nil {
		return nil, err
	}
	if err := fs.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("raftlog: sync dir: %w", err)
	}
	if first := log.FirstIndex(); first > s.mu.compact+1 && log.LastIndex() >= first {
		return nil, fmt.Errorf("raftlog: log starts at %d but the state file's compaction point is %d: %w",
			first, s.mu.compact, commitlog.ErrCorrupt)
	}
	// A node's term is never below the term of an entry it holds, and the
	// term is made durable before the entries of that term (Node persists
	// a new term first). A state file behind its log lost synced writes:
	// starting would let this node vote again in a term it already voted
	// in.
	if last := s.lastIndexOrZero(); last > 0 {
		if t, err := s.Term(last); err == nil && t > s.mu.hs.GetTerm() {
			return nil, fmt.Errorf("%w: %s says term %d but the log's entry %d has term %d: the state file lost synced writes",
				ErrStateCorrupt, vfs.Join(dir, stateName), s.mu.hs.GetTerm(), last, t)
		}
	}
	return s, nil
}

// lastIndexOrZero is LastIndex without the error (0 for an empty log).
func (s *Storage) lastIndexOrZero() uint64 {
	last, err := s.LastIndex()
	if err != nil {
		return 0
	}
	return last
}

func (s *Storage) load() error {
	size, err := s.f.Size()
	if err != nil {
		return fmt.Errorf("raftlog: stat state: %w", err)
	}
	if size == 0 {
		return nil
	}
	found := false
	for slot := 0; slot < 2; slot++ {
		b := make([]byte, stSlot)
		if _, err := s.f.ReadAt(b, int64(slot*stSlot)); err != nil && !errors.Is(err, io.EOF) {
			continue
		}
		st, ok := decodeState(b)
		if ok && (!found || st.seq > s.mu.seq) {
			found = true
			s.mu.hs, s.mu.cs, s.mu.compact, s.mu.compactT, s.mu.seq = st.hs, st.cs, st.compact, st.compactT, st.seq
			s.mu.cluster = st.cluster
		}
	}
	if !found {
		return fmt.Errorf("%w: %s has no valid slot", ErrStateCorrupt, vfs.Join(s.dir, stateName))
	}
	s.mu.loaded = true
	return nil
}

// ClusterID returns the cluster ID recorded in the state file, 0 if none
// is (a new node, or a state file of the first version).
func (s *Storage) ClusterID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.cluster
}

// SetClusterID records the group's cluster ID durably (fsynced). Recording
// the ID already recorded does nothing; a different one fails with
// ErrClusterMismatch: a state file never changes groups.
func (s *Storage) SetClusterID(id uint64) error {
	if id == 0 {
		return fmt.Errorf("raftlog: cluster ID 0 is reserved for \"none\"")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.mu.cluster {
	case id:
		return nil
	case 0:
	default:
		return fmt.Errorf("%w: %s belongs to cluster %016x, not %016x",
			ErrClusterMismatch, vfs.Join(s.dir, stateName), s.mu.cluster, id)
	}
	s.mu.cluster = id
	// As in SetHardState: a commit index raised in memory may be ahead of
	// the entries made durable so far; never write one beyond them.
	if last := max(s.log.LastIndex(), s.mu.compact); s.mu.hs.GetCommit() > last {
		s.mu.hs.Commit = proto.Uint64(last)
	}
	if err := s.persistLocked(); err != nil {
		s.mu.cluster = 0
		return err
	}
	return nil
}

// HasState reports whether the node has any raft state: a state file that
// was written before, or log entries. A node without any is new.
func (s *Storage) HasState() bool {
	s.mu.Lock()
	loaded, compact := s.mu.loaded, s.mu.compact
	s.mu.Unlock()
	return loaded || compact > 0 || s.log.LastIndex() > 0
}

type stateRec struct {
	seq, compact, compactT uint64
	cluster                uint64
	hs                     *pb.HardState
	cs                     *pb.ConfState
}

// decodeState decodes a slot of either version (see the package
// documentation).
func decodeState(b []byte) (stateRec, bool) {
	var r stateRec
	if len(b) < stOffHSLen+4+4 {
		return r, false
	}
	var hsLenOff int
	switch binary.BigEndian.Uint32(b[stOffMagic:]) {
	case stateMagic:
		hsLenOff = stOffHSLen
	case stateMagicV1:
		hsLenOff = stOffHSLenV1
	default:
		return r, false
	}
	header := hsLenOff + 4 // where the HardState starts
	n := int(binary.BigEndian.Uint32(b[stOffLen:]))
	if n < 4 || hsLenOff+n+4 > len(b) {
		return r, false
	}
	end := hsLenOff + n
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
		return r, false
	}
	h := int(binary.BigEndian.Uint32(b[hsLenOff:]))
	if h > n-4 {
		return r, false
	}
	r.seq = binary.BigEndian.Uint64(b[stOffSeq:])
	r.compact = binary.BigEndian.Uint64(b[stOffCompact:])
	r.compactT = binary.BigEndian.Uint64(b[stOffCompactT:])
	if hsLenOff == stOffHSLen {
		r.cluster = binary.BigEndian.Uint64(b[stOffCluster:])
	}
	r.hs, r.cs = &pb.HardState{}, &pb.ConfState{}
	if proto.Unmarshal(b[header:header+h], r.hs) != nil || proto.Unmarshal(b[header+h:end], r.cs) != nil {
		return r, false
	}
	return r, true
}

// persistLocked writes and fsyncs the next slot.
func (s *Storage) persistLocked() error {
	hs, err := proto.Marshal(s.mu.hs)
	if err != nil {
		return fmt.Errorf("raftlog: encode hard state: %w", err)
	}
	cs, err := proto.Marshal(s.mu.cs)
	if err != nil {
		return fmt.Errorf("raftlog: encode conf state: %w", err)
	}
	n := 4 + len(hs) + len(cs)
	const header = stOffHSLen + 4
	if stOffHSLen+n+4 > stSlot {
		return fmt.Errorf("raftlog: raft state of %d bytes does not fit a slot", n)
	}
	b := make([]byte, stOffHSLen+n+4)
	s.mu.seq++
	binary.BigEndian.PutUint32(b[stOffMagic:], stateMagic)
	binary.BigEndian.PutUint32(b[stOffLen:], uint32(n))
	binary.BigEndian.PutUint64(b[stOffSeq:], s.mu.seq)
	binary.BigEndian.PutUint64(b[stOffCompact:], s.mu.compact)
	binary.BigEndian.PutUint64(b[stOffCompactT:], s.mu.compactT)
	binary.BigEndian.PutUint64(b[stOffCluster:], s.mu.cluster)
	binary.BigEndian.PutUint32(b[stOffHSLen:], uint32(len(hs)))
	copy(b[header:], hs)
	copy(b[header+len(hs):], cs)
	end := stOffHSLen + n
	binary.BigEndian.PutUint32(b[end:], crc32.Checksum(b[:end], castagnoli))
	if _, err := s.f.WriteAt(b, int64(s.mu.seq%2)*stSlot); err != nil {
		// The slot written is the older one; the newer still holds the
		// current state. Write this slot again next time (a retry after
		// a full disk), never the one holding the only good copy.
		s.mu.seq--
		return fmt.Errorf("raftlog: write raft state: %w", err)
	}
	if failpoint.On(s.Failpoints, failpoint.VoteNotFsynced) {
		return s.voteNotFsynced()
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("raftlog: sync raft state: %w", err)
	}
	return nil
}

// InitialState implements raft.Storage.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, nil, ErrClosed
	}
	return proto.CloneOf(s.mu.hs), proto.CloneOf(s.mu.cs), nil
}

// SetHardState records hs. A change of term or vote is persisted and
// fsynced before it returns (raft's safety rests on it); a change of the
// commit index alone is kept in memory and written with the next durable
// change: a restarted node relearns the commit index from the leader, and
// never starts below the index its state machine has applied (NewNode
// raises it).
func (s *Storage) SetHardState(hs *pb.HardState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hs.GetTerm() == s.mu.hs.GetTerm() && hs.GetVote() == s.mu.hs.GetVote() {
		if hs.GetCommit() > s.mu.hs.GetCommit() {
			s.mu.hs.Commit = proto.Uint64(hs.GetCommit())
		}
		return nil
	}
	old := s.mu.hs
	s.mu.hs = proto.CloneOf(hs)
	// The state may be persisted before this Ready's entries (a new term
	// goes first): never record a commit index beyond the durable log.
	if last := max(s.log.LastIndex(), s.mu.compact); s.mu.hs.GetCommit() > last {
		s.mu.hs.Commit = proto.Uint64(last)
	}
	if err := s.persistLocked(); err != nil {
		// Not persisted: a retry (after a full disk) must write it again.
		s.mu.hs = old
		return err
	}
	return nil
}

// raiseCommit raises the in-memory commit index (not persisted).
func (s *Storage) raiseCommit(c uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c > s.mu.hs.GetCommit() {
		s.mu.hs.Commit = proto.Uint64(c)
	}
}

// Sync persists the current hard state (with its commit index).
func (s *Storage) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.persistLocked()
}

// SetConfState persists the membership (fsynced).
func (s *Storage) SetConfState(cs *pb.ConfState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.cs = proto.CloneOf(cs)
	return s.persistLocked()
}

// Append writes entries to the log, truncating a conflicting suffix, and
// makes them durable unless the log is in FlushAsync mode, through the
// commitlog writer the Storage holds (commitlog/doc.go, "One writer"):
// its caller, raft's goroutine, is the one goroutine using that writer
// while it appends.
func (s *Storage) Append(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	ce := make([]commitlog.Entry, len(ents))
	for i, e := range ents {
		ce[i] = commitlog.Entry{Index: e.GetIndex(), Term: e.GetTerm(), Type: uint32(e.GetType()), Data: e.GetData()}
	}
	if err := s.w.AppendSync(ce...); err != nil {
		return fmt.Errorf("raftlog: append: %w", err)
	}
	return nil
}

func mapErr(err error) error {
	switch {
	case errors.Is(err, commitlog.ErrCompacted):
		return raft.ErrCompacted
	case errors.Is(err, commitlog.ErrUnavailable):
		return raft.ErrUnavailable
	}
	return err
}

// Entries implements raft.Storage.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	compact := s.mu.compact
	s.mu.Unlock()
	if lo <= compact {
		return nil, raft.ErrCompacted
	}
	if hi > s.log.LastIndex()+1 {
		return nil, raft.ErrUnavailable
	}
	ents, err := s.log.Entries(lo, hi, maxSize)
	if err != nil {
		return nil, mapErr(err)
	}
	// The log limits by body bytes, a lower bound of the encoded size raft
	// counts; trim to raft's own measure (at least one entry).
	out := make([]*pb.Entry, 0, len(ents))
	var size uint64
	for _, e := range ents {
		pe := &pb.Entry{Index: proto.Uint64(e.Index), Term: proto.Uint64(e.Term), Type: pb.EntryType(e.Type).Enum(), Data: e.Data}
		size += uint64(proto.Size(pe))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, pe)
	}
	return out, nil
}

// Term implements raft.Storage.
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	compact, compactT := s.mu.compact, s.mu.compactT
	s.mu.Unlock()
	switch {
	case i == compact:
		return compactT, nil
	case i < compact:
		return 0, raft.ErrCompacted
	}
	t, err := s.log.Term(i)
	return t, mapErr(err)
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.Lock()
	compact, closed := s.mu.compact, s.mu.closed
	s.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	return max(s.log.LastIndex(), compact), nil
}

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, ErrClosed
	}
	return s.mu.compact + 1, nil
}

// Snapshot implements raft.Storage: the application's snapshot (from
// SnapshotData, at an index of its choosing at or after the compaction
// point) with that index's term and the current membership, built in
// place or in the background (SnapshotInBackground).
func (s *Storage) Snapshot() (*pb.Snapshot, error) {
	if s.SnapshotData == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	if !s.SnapshotInBackground {
		return s.buildSnapshot()
	}
	s.snap.Lock()
	defer s.snap.Unlock()
	if b := s.snap.build; b != nil {
		select {
		case <-b.done:
		default:
			return nil, raft.ErrSnapshotTemporarilyUnavailable // still building
		}
		s.snap.build = nil
		switch first, _ := s.FirstIndex(); {
		case errors.Is(b.err, raft.ErrSnapshotTemporarilyUnavailable):
			// No space for it: try again (below).
		case b.err != nil:
			return nil, b.err
		case b.snap.GetMetadata().GetIndex()+1 >= first:
			return b.snap, nil
		}
		// Compacted past it meanwhile: the follower needs a newer one.
	}
	s.mu.Lock()
	closed := s.mu.closed
	s.mu.Unlock()
	if closed {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	b := &snapBuild{done: make(chan struct{})}
	s.snap.build = b
	s.builds.Add(1)
	go func() {
		defer s.builds.Done()
		b.snap, b.err = s.buildSnapshot()
		close(b.done)
	}()
	return nil, raft.ErrSnapshotTemporarilyUnavailable
}

// snapBuild is a snapshot being built in the background.
type snapBuild struct {
	done chan struct{}
	snap *pb.Snapshot
	err  error
}

// buildSnapshot asks the application for its snapshot and adds raft's
// metadata.
func (s *Storage) buildSnapshot() (*pb.Snapshot, error) {
	index, data, err := s.SnapshotData()
	if vfs.IsNoSpace(err) {
		// Raft panics on any other error: a full disk (the checkpoint
		// before the copy) only postpones the follower's snapshot.
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	if err != nil {
		return nil, fmt.Errorf("raftlog: snapshot data: %w", err)
	}
	term, err := s.Term(index)
	if errors.Is(err, raft.ErrCompacted) {
		// Retention (another goroutine) compacted past it meanwhile: raft
		// asks again later, and gets a newer one. (Raft compares this
		// error by identity: it must not be wrapped.)
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	if err != nil {
		return nil, fmt.Errorf("raftlog: snapshot at %d: %w", index, err)
	}
	s.mu.Lock()
	md := &pb.SnapshotMetadata{Index: proto.Uint64(index), Term: proto.Uint64(term), ConfState: proto.CloneOf(s.mu.cs)}
	s.mu.Unlock()
	return &pb.Snapshot{Metadata: md, Data: data}, nil
}

// Compact drops whole log segments below index (index must be applied).
// It records the new compaction point durably before deleting anything, and
// returns it. It may run on any goroutine, concurrently with Append: the
// commitlog's DropPrefix never touches the segment being written.
func (s *Storage) Compact(index uint64) (uint64, error) {
	keep := uint64(0) // first index that remains
	for _, sg := range s.log.Segments() {
		if sg.Entries == 0 {
			break
		}
		if sg.FirstIndex+uint64(sg.Entries)-1 >= index {
			keep = sg.FirstIndex
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if keep == 0 || keep-1 <= s.mu.compact {
		return s.mu.compact, nil
	}
	t, err := s.log.Term(keep - 1)
	if err != nil {
		return s.mu.compact, fmt.Errorf("raftlog: compact: %w", err)
	}
	s.mu.compact, s.mu.compactT = keep-1, t
	if err := s.persistLocked(); err != nil {
		return 0, err
	}
	if _, err := s.log.DropPrefix(keep); err != nil {
		return 0, fmt.Errorf("raftlog: compact: %w", err)
	}
	return keep - 1, nil
}

// ApplySnapshot records a snapshot's metadata and resets the log so the
// next entry is Index+1 at global position pos (carried in the snapshot's
// data by the application). The reset goes through the Storage's
// commitlog writer, which must have no other call under way: raft's
// goroutine waits for it when it hands the install to another goroutine
// (Node does, to the applier).
func (s *Storage) ApplySnapshot(md *pb.SnapshotMetadata, pos int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := md.GetIndex()
	if idx <= s.mu.compact {
		return raft.ErrSnapOutOfDate
	}
	s.mu.compact, s.mu.compactT = idx, md.GetTerm()
	if md.GetConfState() != nil {
		s.mu.cs = proto.CloneOf(md.GetConfState())
	}
	if s.mu.hs.GetCommit() < idx {
		s.mu.hs.Commit = proto.Uint64(idx)
	}
	if err := s.persistLocked(); err != nil {
		return err
	}
	if err := s.w.Reset(idx+1, pos); err != nil {
		return fmt.Errorf("raftlog: reset log for snapshot: %w", err)
	}
	return nil
}

// Close closes the state file and releases the log's writer (it does not
// close the log).
func (s *Storage) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
	s.builds.Wait() // a background snapshot reads the application's state
	s.w.Release()
	return s.f.Close()
}
