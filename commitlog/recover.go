package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"time"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/internal/vfs"
)

const ckptName = "checkpoint"

// Checkpoint slot flags (the reserved word at offset 4).
const ckptFlagClean = 1

type ckptMode int

const (
	ckptLazy  ckptMode = iota // from the flusher: never above the live durable index
	ckptForce                 // exact value, before a truncation or reset
	ckptClean                 // at Close: the log was shut down cleanly
)

type ckpt struct {
	seq     uint64
	durable uint64
	clean   bool
}

func (l *Log) openCheckpoint() error {
	path := vfs.Join(l.dir, ckptName)
	f, err := l.fs.OpenReadWrite(path)
	if err != nil {
		return fmt.Errorf("commitlog: open %s: %w", path, err)
	}
	l.ckptFile = f
	return nil
}

// readCheckpoint returns the newest valid slot (zero if none).
func (l *Log) readCheckpoint() ckpt {
	var best ckpt
	for slot := 0; slot < 2; slot++ {
		var b [ckptSlotLen]byte
		if _, err := l.ckptFile.ReadAt(b[:], int64(slot*ckptSlotStride)); err != nil && !errors.Is(err, io.EOF) {
			continue
		}
		if binary.BigEndian.Uint32(b[ckptOffMagic:]) != ckptMagic ||
			crc32.Checksum(b[:ckptOffCRC], castagnoli) != binary.BigEndian.Uint32(b[ckptOffCRC:]) {
			continue
		}
		c := ckpt{
			seq:     binary.BigEndian.Uint64(b[ckptOffSeq:]),
			durable: binary.BigEndian.Uint64(b[ckptOffDurable:]),
			clean:   binary.BigEndian.Uint32(b[ckptOffMagic+4:])&ckptFlagClean != 0,
		}
		if c.seq >= best.seq {
			best = c
		}
	}
	return best
}

// writeCheckpoint writes and syncs the next checkpoint slot.
func (l *Log) writeCheckpoint(durable uint64, mode ckptMode) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	if mode == ckptLazy {
		if d := l.durableIndex(); durable > d {
			durable = d
		}
	}
	l.sm.Lock()
	l.sm.ckptSeq++
	seq := l.sm.ckptSeq
	l.sm.Unlock()
	var b [ckptSlotLen]byte
	binary.BigEndian.PutUint32(b[ckptOffMagic:], ckptMagic)
	if mode == ckptClean {
		binary.BigEndian.PutUint32(b[ckptOffMagic+4:], ckptFlagClean)
	}
	binary.BigEndian.PutUint64(b[ckptOffSeq:], seq)
	binary.BigEndian.PutUint64(b[ckptOffDurable:], durable)
	binary.BigEndian.PutUint32(b[ckptOffCRC:], crc32.Checksum(b[:ckptOffCRC], castagnoli))
	if _, err := l.ckptFile.WriteAt(b[:], int64(seq%2)*ckptSlotStride); err != nil {
		return fmt.Errorf("commitlog: write checkpoint: %w", err)
	}
	if err := l.ckptFile.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync checkpoint: %w", err)
	}
	l.sm.Lock()
	l.sm.ckpt = durable
	l.sm.ckptTime = time.Now()
	l.sm.Unlock()
	return nil
}

// recover opens the segments, rebuilds the in-memory index and cuts a torn
// tail. Called from Open only.
func (l *Log) recover() error {
	c := l.readCheckpoint()
	l.sm.ckptSeq = c.seq
	durable := c.durable
	if l.opts.DurableIndex > durable {
		durable = l.opts.DurableIndex
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return fmt.Errorf("commitlog: list %s: %w", l.dir, err)
	}
	var bases []int64
	for _, n := range names {
		if strings.HasSuffix(n, ".tmp") {
			_ = l.fs.Remove(vfs.Join(l.dir, n)) // an interrupted atomic write
			continue
		}
		if b, ok := parseSegmentName(n); ok {
			bases = append(bases, b)
		}
	}
	l.mu.first, l.mu.last = 1, 0
	cut := false // a torn tail was cut: later segments go
	for k, base := range bases {
		last := k == len(bases)-1
		path := vfs.Join(l.dir, segmentName(base))
		if cut {
			l.log.Warn("commitlog: removing segment after a torn tail", "file", path)
			if err := l.fs.Remove(path); err != nil {
				return fmt.Errorf("commitlog: remove %s: %w", path, err)
			}
			_ = l.fs.Remove(path + ".idx")
			continue
		}
		expect := l.mu.last + 1
		s, torn, err := l.openSegment(path, base, expect, last, durable, k == 0)
		if err != nil {
			return err
		}
		if s == nil { // a segment whose creation never became durable
			cut = true
			if err := l.fs.Remove(path); err != nil {
				return fmt.Errorf("commitlog: remove %s: %w", path, err)
			}
			_ = l.fs.Remove(path + ".idx")
			continue
		}
		if k > 0 {
			prev := l.mu.segs[k-1]
			if s.base != prev.base+prev.size {
				s.close()
				return &CorruptError{File: path, Index: expect, Reason: fmt.Sprintf("segment missing before it: previous segment ends at %d", prev.base+prev.size)}
			}
		} else {
			l.mu.first = s.first
		}
		l.mu.segs = append(l.mu.segs, s)
		if len(s.pos) > 0 {
			l.mu.last = s.last()
			l.mu.lastTerm = binary.BigEndian.Uint64(s.data[int(s.pos[len(s.pos)-1])+entOffTerm:])
		} else {
			l.mu.last = s.first - 1
		}
		if torn || (last && !c.clean) {
			// Zero everything after the last good entry, so no stale bytes
			// of an earlier incarnation can ever be read as entries.
			if err := zeroFrom(s, s.end); err != nil {
				return err
			}
			if torn {
				cut = !last
			}
		}
	}
	if l.mu.last < durable && len(bases) > 0 {
		return &CorruptError{File: l.dir, Index: l.mu.last + 1,
			Reason: fmt.Sprintf("log ends at index %d but entries up to %d were synced", l.mu.last, durable)}
	}
	if cut {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("commitlog: sync dir: %w", err)
		}
	}
	// What the page cache holds after a process crash may not be on disk
	// yet: sync it before calling it durable.
	if n := len(l.mu.segs); n > 0 {
		if err := l.mu.segs[n-1].f.Sync(); err != nil {
			return fmt.Errorf("commitlog: sync %s: %w", l.mu.segs[n-1].path, err)
		}
	}
	l.sm.durable = l.mu.last
	return l.writeCheckpoint(l.mu.last, ckptForce)
}

// openSegment opens and maps one segment and finds its entries. expect is
// the index the segment's first entry must have (ignored for the first
// segment, which starts wherever its header says). It returns a nil segment
// when the last segment's header never became durable and holds nothing
// synced, and torn when the scan stopped at a bad entry past the durable
// index.
func (l *Log) openSegment(path string, base int64, expect uint64, last bool, durable uint64, firstSeg bool) (*segment, bool, error) {
	f, err := l.fs.OpenReadWrite(path)
	if err != nil {
		return nil, false, fmt.Errorf("commitlog: open %s: %w", path, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("commitlog: stat %s: %w", path, err)
	}
	var hb [SegmentHeaderSize]byte
	_, rerr := f.ReadAt(hb[:], 0)
	h, reason := parseSegHeader(hb[:])
	if rerr != nil && reason == "" {
		reason = rerr.Error()
	}
	if reason == "" && h.base != base {
		reason = fmt.Sprintf("header says base %d, file name says %d", h.base, base)
	}
	if reason == "" && h.size != size {
		reason = fmt.Sprintf("header says size %d, file has %d bytes", h.size, size)
	}
	if reason == "" && !firstSeg && h.first != expect {
		reason = fmt.Sprintf("first index %d, want %d", h.first, expect)
	}
	if reason != "" {
		f.Close()
		if last && (firstSeg || expect > durable) {
			l.log.Warn("commitlog: discarding a segment whose creation was interrupted", "file", path, "reason", reason)
			return nil, false, nil
		}
		return nil, false, &CorruptError{File: path, Offset: 0, Index: expect, Reason: reason}
	}
	m, err := f.Map(size)
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("commitlog: map %s: %w", path, err)
	}
	s := &segment{base: base, size: size, start: int64(h.start), first: h.first, path: path, f: f, m: m, data: m.Bytes(), end: int64(h.start)}
	if !last && l.loadSidecar(s) {
		return s, false, nil
	}
	torn, err := l.scanSegment(s, last, durable)
	if err != nil {
		s.close()
		return nil, false, err
	}
	return s, torn, nil
}

// loadSidecar fills s.pos from a valid index sidecar.
func (l *Log) loadSidecar(s *segment) bool {
	b, err := vfs.ReadFile(l.fs, s.path+".idx")
	if err != nil || len(b) < idxOffPos+4 {
		return false
	}
	n := len(b) - 4
	if binary.BigEndian.Uint32(b[idxOffMagic:]) != idxMagic ||
		crc32.Checksum(b[:n], castagnoli) != binary.BigEndian.Uint32(b[n:]) {
		l.log.Warn("commitlog: ignoring a bad index sidecar", "file", s.path+".idx")
		return false
	}
	count := int(binary.BigEndian.Uint32(b[idxOffCount:]))
	if idxOffPos+4*count != n || binary.BigEndian.Uint64(b[idxOffFirst:]) != s.first || count == 0 {
		return false
	}
	pos := make([]uint32, count)
	prev := int64(-1)
	for i := range pos {
		pos[i] = binary.BigEndian.Uint32(b[idxOffPos+4*i:])
		if int64(pos[i]) <= prev || int64(pos[i])+HeaderSize > s.size {
			return false
		}
		prev = int64(pos[i])
	}
	lastPos := int64(pos[count-1])
	h, reason := parseHeader(s.data[lastPos:], s.size-lastPos)
	if reason != "" || h.index != s.first+uint64(count-1) {
		return false
	}
	s.pos = pos
	s.end = lastPos + int64(h.size)
	s.sealed = true
	return true
}

// scanStop says where and why a segment scan stopped.
type scanStop struct {
	pos      int64  // the end of the last good entry (where a seal or bad entry sits)
	next     uint64 // the index the next entry would have
	lastTerm uint64
	sealed   bool   // stopped at a seal or at the segment's end
	reason   string // set when stopped at a bad entry
}

// scanEntries walks the entries of one segment's bytes from start,
// checking magic, size, index continuity from next, term order and CRC
// (unless skipCRC: the crc-unchecked mutant),
// and calls fn for each good entry. In the last segment, zeros end the log;
// in any other they are a bad entry. An error from fn stops the scan and is
// returned.
func scanEntries(data []byte, start int64, next, lastTerm uint64, last, skipCRC bool, fn func(pos int64, h header) error) (scanStop, error) {
	size := int64(len(data))
	st := scanStop{pos: start, next: next, lastTerm: lastTerm}
	for {
		room := size - st.pos
		if room < sealSize {
			st.sealed = true
			return st, nil
		}
		b := data[st.pos:]
		switch magic := binary.BigEndian.Uint32(b[entOffMagic:]); magic {
		case sealMagic:
			if int64(binary.BigEndian.Uint32(b[sealOffLeft:])) == room {
				st.sealed = true
				return st, nil
			}
			st.reason = "seal with a wrong length"
		case 0:
			if last {
				return st, nil // the end of the log
			}
			st.reason = "zeros before the end of a sealed segment"
		case entryMagic:
			h, r := parseHeader(b, room)
			switch {
			case r != "":
				st.reason = r
			case h.index != st.next:
				st.reason = fmt.Sprintf("index %d, want %d", h.index, st.next)
			case h.term < st.lastTerm:
				st.reason = fmt.Sprintf("term %d below previous term %d", h.term, st.lastTerm)
			case !skipCRC && entryCRC(b[:h.size]) != h.crc:
				st.reason = "CRC mismatch"
			default:
				if err := fn(st.pos, h); err != nil {
					return st, err
				}
				st.pos += int64(h.size)
				st.lastTerm = h.term
				st.next++
				continue
			}
		default:
			st.reason = fmt.Sprintf("bad entry magic %#08x", magic)
		}
		return st, nil
	}
}

// scanSegment finds the entries of s. It returns torn when it stopped at a
// bad entry that may be an unsynced write (past the durable index), and a
// *CorruptError when the bad entry was synced.
func (l *Log) scanSegment(s *segment, last bool, durable uint64) (bool, error) {
	var lastTerm uint64
	if len(l.mu.segs) > 0 {
		lastTerm = l.mu.lastTerm
	}
	verify := true
	if failpoint.On(l.opts.Failpoints, failpoint.CRCUnchecked) {
		verify = crcUnchecked(verify)
	}
	st, _ := scanEntries(s.data, s.start, s.first, lastTerm, last, !verify, func(pos int64, _ header) error {
		s.pos = append(s.pos, uint32(pos))
		return nil
	})
	s.end, s.sealed = st.pos, st.sealed
	if st.reason == "" {
		return false, nil
	}
	if st.next <= durable {
		return false, &CorruptError{File: s.path, Offset: st.pos, Index: st.next, Reason: st.reason}
	}
	l.log.Warn("commitlog: cutting a torn tail of unsynced writes", "file", s.path, "offset", st.pos, "index", st.next, "reason", st.reason)
	return true, nil
}
