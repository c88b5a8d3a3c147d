package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/internal/vfs"
)

// The tail journal (<dir>/cqjournal-<id>, id 16 hex digits) holds the
// consume-queue units that checkpoints covered while the queues kept them
// in memory, waiting for their spill (consumequeue.Set.MarkJournal): a
// checkpoint appends one record per queue written since the last (one
// sequential write, covered by the checkpoint's SyncFS) instead of writing
// each queue's tail to its file (a pwrite per queue). bbolt's meta key
// metaTailJournal records, in the checkpoint's transaction, which journal
// and how many of its bytes the checkpoint covers; recovery replays those
// bytes into the queues before it cuts them back (recoverDerived).
//
// A journal starts with a header:
//
//	| off | size | field                                 |
//	|   0 |    8 | magic "RMQCQJNL"                      |
//	|   8 |    4 | format version (1), big-endian        |
//	|  12 |    8 | id, as in the file's name             |
//
// followed by records (consumequeue.JournalRecord). A checkpoint that
// finds no journal, or one of more than maxJournalBytes, or that a
// retention, snapshot install or Close takes (persistLocked, which may
// follow an operation that rewrote queue units) starts a new one: it
// writes every queue's units to its files first, as without a journal,
// creates the new journal with its header only, and removes the old one
// once bbolt records the new one. The meta value is:
//
//	| off | size | field                                |
//	|   0 |    1 | format version (1)                   |
//	|   1 |    8 | journal id                           |
//	|   9 |    8 | bytes of it the checkpoint covers    |
//
// A store without the key (written before the journal, or restored from a
// snapshot, whose key Restore deletes) replays nothing.
const (
	metaTailJournal    = "cq-tail-journal"
	journalPrefix      = "cqjournal-"
	journalMagic       = "RMQCQJNL"
	journalVersion     = 1
	journalHeaderBytes = 20
	maxJournalBytes    = 64 << 20
	// journalTailBudget bounds the units all queues keep in memory for
	// the journal (consumequeue.Set.MarkJournal): 8 KiB (409 units) each
	// with 8,192 active queues.
	journalTailBudget = 64 << 20
)

// tailJournal is the journal's writer state; persistMu guards it.
type tailJournal struct {
	// fs is the consume queues' file system: a write waits for space as
	// theirs do.
	fs   vfs.FS
	f    vfs.File
	id   uint64
	size int64  // bytes written, header included
	old  string // name of the previous journal, removed after the next commit
	buf  []byte
	// rotate asks the next checkpoint to start a new journal.
	rotate bool
}

// journalMark is what a checkpoint records of the journal.
type journalMark struct {
	id   uint64
	size int64
}

func (m journalMark) encode() []byte {
	b := []byte{journalVersion}
	b = binary.BigEndian.AppendUint64(b, m.id)
	return binary.BigEndian.AppendUint64(b, uint64(m.size))
}

func decodeJournalMark(b []byte) (journalMark, error) {
	if len(b) != 17 || b[0] != journalVersion {
		return journalMark{}, fmt.Errorf("store: tail journal meta %x: unknown format: %w", b, commitlog.ErrCorrupt)
	}
	return journalMark{id: binary.BigEndian.Uint64(b[1:]), size: int64(binary.BigEndian.Uint64(b[9:]))}, nil
}

func journalName(id uint64) string { return fmt.Sprintf("%s%016x", journalPrefix, id) }

// markQueuesJournal is markQueues with the journal: a new journal (all
// tails written to their files first) when one is due, else one record
// per queue written since the last checkpoint, appended in one write.
// The caller holds persistMu; force starts a new journal.
func (s *Store) markQueuesJournal(cp *checkpoint, force bool) error {
	j := &s.journal
	if force || j.rotate || j.f == nil || j.size > maxJournalBytes {
		return s.rotateJournal(cp)
	}
	b, marks, written, err := s.cqs.MarkJournal(j.buf[:0], journalTailBudget)
	if err != nil {
		return fmt.Errorf("store: persist: %w", err)
	}
	j.buf = b
	if len(b) > 0 {
		if _, err := j.f.WriteAt(b, j.size); err != nil {
			return fmt.Errorf("store: persist: write tail journal: %w", err)
		}
		j.size += int64(len(b))
	}
	if cap(j.buf) > 4<<20 {
		j.buf = nil
	}
	cp.queues = marks
	cp.written = written
	cp.journal = &journalMark{id: j.id, size: j.size}
	return nil
}

// rotateJournal writes every queue's units to its files (markQueues) and
// starts a new journal, which the checkpoint records; the old one is
// removed after the commit (journalCommitted).
func (s *Store) rotateJournal(cp *checkpoint) error {
	if err := s.markQueues(cp); err != nil {
		return err
	}
	j := &s.journal
	id := rand.Uint64()
	f, err := j.fs.Create(s.path(journalName(id)))
	if err != nil {
		return fmt.Errorf("store: persist: create tail journal: %w", err)
	}
	h := make([]byte, 0, journalHeaderBytes)
	h = append(h, journalMagic...)
	h = binary.BigEndian.AppendUint32(h, journalVersion)
	h = binary.BigEndian.AppendUint64(h, id)
	if _, err := f.WriteAt(h, 0); err != nil {
		f.Close()
		return fmt.Errorf("store: persist: write tail journal: %w", err)
	}
	if j.f != nil {
		if err := j.f.Close(); err != nil {
			s.log.Warn("store: close tail journal", "err", err)
		}
		if j.old == "" {
			j.old = journalName(j.id)
		} else if err := j.fs.Remove(s.path(journalName(j.id))); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			// No commit named it (none since j.old's).
			s.log.Warn("store: remove uncommitted tail journal", "err", err)
		}
	}
	j.f, j.id, j.size, j.rotate = f, id, journalHeaderBytes, false
	cp.written = len(cp.queues)
	cp.journal = &journalMark{id: id, size: j.size}
	return nil
}

// journalCommitted runs after a checkpoint's commit: the journal before
// the current one is no longer named by bbolt, and goes.
func (s *Store) journalCommitted() {
	j := &s.journal
	if j.old == "" {
		return
	}
	if err := s.fs.Remove(s.path(j.old)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		s.log.Warn("store: remove old tail journal", "name", j.old, "err", err)
		return
	}
	j.old = ""
}

// replayJournal puts the units of the journal bytes the last checkpoint
// covers back into the consume queues (before recoverDerived cuts them
// back), and removes journals no checkpoint names. The first checkpoint
// after it starts a new journal.
func (s *Store) replayJournal(raw []byte, found bool) error {
	s.journal.rotate = true
	var m journalMark
	if found {
		var err error
		if m, err = decodeJournalMark(raw); err != nil {
			return err
		}
	}
	names, err := s.fs.List(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("store: list %s: %w", s.cfg.Dir, err)
	}
	keep := ""
	if found {
		keep = journalName(m.id)
		if err := s.replayJournalFile(keep, m); err != nil {
			return err
		}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, journalPrefix) || n == keep {
			continue
		}
		if _, err := strconv.ParseUint(strings.TrimPrefix(n, journalPrefix), 16, 64); err != nil {
			continue
		}
		if err := s.fs.Remove(s.path(n)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return fmt.Errorf("store: remove stale tail journal: %w", err)
		}
	}
	if found {
		s.journal.old = keep // removed once the first checkpoint names another
	}
	return nil
}

func (s *Store) replayJournalFile(name string, m journalMark) error {
	b, err := readJournalFile(s.fs, s.path(name), name, m)
	if err != nil {
		return err
	}
	records, units := 0, 0
	for at := journalHeaderBytes; at < len(b); {
		r, n, err := consumequeue.DecodeJournalRecord(b[at:])
		if err != nil {
			return fmt.Errorf("store: tail journal %s at byte %d: %w", name, at, err)
		}
		at += n
		q, err := s.cqs.Find(r.Topic, r.QueueID)
		if err != nil {
			return fmt.Errorf("store: tail journal %s: queue %s/%d: %w (%w)", name, r.Topic, r.QueueID, err, commitlog.ErrCorrupt)
		}
		if err := q.ReplayJournal(r.Start, r.Units); err != nil {
			return fmt.Errorf("store: tail journal %s: %w", name, err)
		}
		records++
		units += len(r.Units) / consumequeue.UnitSize
	}
	s.log.Info("store: replayed the consume queues' tail journal", "name", name, "bytes", m.size, "records", records, "units", units)
	return nil
}

// readJournalFile reads the bytes of journal name (at path) that mark m
// covers and checks its header.
func readJournalFile(fs vfs.FS, path, name string, m journalMark) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("store: tail journal %s that meta.db names: %w (%w)", name, err, commitlog.ErrCorrupt)
	}
	defer f.Close()
	if m.size < journalHeaderBytes {
		return nil, fmt.Errorf("store: tail journal %s: meta.db covers %d bytes: %w", name, m.size, commitlog.ErrCorrupt)
	}
	b := make([]byte, m.size)
	if n, err := f.ReadAt(b, 0); int64(n) < m.size {
		return nil, fmt.Errorf("store: tail journal %s: read %d of %d bytes meta.db covers: %v: %w", name, n, m.size, err, commitlog.ErrCorrupt)
	}
	if !bytes.Equal(b[:8], []byte(journalMagic)) || binary.BigEndian.Uint32(b[8:]) != journalVersion || binary.BigEndian.Uint64(b[12:]) != m.id {
		return nil, fmt.Errorf("store: tail journal %s: bad header %x: %w", name, b[:journalHeaderBytes], commitlog.ErrCorrupt)
	}
	return b, nil
}
