package commitlog

import (
	"fmt"

	"github.com/raftmq/raftmq/internal/vfs"
)

// SegmentReport describes one segment as Inspect found it.
type SegmentReport struct {
	Path       string
	Base, Size int64
	FirstIndex uint64
	Entries    int
	Bytes      int64 // bytes of entries
	Sealed     bool
	LastIndex  uint64
	LastTerm   uint64
}

// Report is what Inspect found.
type Report struct {
	Segments      []SegmentReport
	Entries       int
	DurableIndex  uint64 // from the checkpoint
	CleanShutdown bool
	// Problem is the first corruption found (nil if none); TornTail is set
	// when the log ends in unsynced bytes that the next Open will cut.
	Problem  *CorruptError
	TornTail string
}

// Inspect reads a log directory without modifying it, verifies every
// entry's CRC and structure, and reports. fn, if not nil, is called for each
// valid entry in order (body aliases a buffer valid during the call).
func Inspect(fs vfs.FS, dir string, fn func(e EntryRef) error) (Report, error) {
	var rep Report
	names, err := fs.List(dir)
	if err != nil {
		return rep, fmt.Errorf("commitlog: list %s: %w", dir, err)
	}
	l := &Log{fs: fs, dir: dir}
	if f, err := fs.Open(vfs.Join(dir, ckptName)); err == nil {
		l.ckptFile = f
		c := l.readCheckpoint()
		rep.DurableIndex, rep.CleanShutdown = c.durable, c.clean
		f.Close()
	}
	var bases []int64
	for _, n := range names {
		if b, ok := parseSegmentName(n); ok {
			bases = append(bases, b)
		}
	}
	var next uint64
	var lastTerm uint64
	var prevEnd int64 = -1
	for k, base := range bases {
		path := vfs.Join(dir, segmentName(base))
		b, err := vfs.ReadFile(fs, path)
		if err != nil {
			return rep, fmt.Errorf("commitlog: read %s: %w", path, err)
		}
		h, reason := parseSegHeader(b)
		if reason == "" && h.base != base {
			reason = fmt.Sprintf("header says base %d", h.base)
		}
		if reason == "" && prevEnd >= 0 && base != prevEnd {
			reason = fmt.Sprintf("segment missing before it: previous segment ends at %d", prevEnd)
		}
		if reason == "" && k > 0 && h.first != next {
			reason = fmt.Sprintf("first index %d, want %d", h.first, next)
		}
		if reason != "" {
			rep.Problem = &CorruptError{File: path, Reason: reason}
			return rep, nil
		}
		prevEnd = base + h.size
		if k == 0 {
			next = h.first
		}
		sr := SegmentReport{Path: path, Base: base, Size: h.size, FirstIndex: h.first}
		st, err := scanEntries(b, int64(h.start), next, lastTerm, k == len(bases)-1, false, func(pos int64, eh header) error {
			if fn != nil {
				if err := fn(EntryRef{Index: eh.index, Term: eh.term, Type: eh.typ, Pos: base + pos,
					Body: b[pos+HeaderSize : pos+int64(eh.size)]}); err != nil {
					return err
				}
			}
			sr.Entries++
			sr.Bytes += int64(eh.size)
			sr.LastIndex, sr.LastTerm = eh.index, eh.term
			rep.Entries++
			return nil
		})
		if err != nil {
			return rep, err
		}
		sr.Sealed = st.sealed
		next, lastTerm = st.next, st.lastTerm
		if st.reason != "" {
			if k == len(bases)-1 && next > rep.DurableIndex {
				rep.TornTail = fmt.Sprintf("%s at offset %d (index %d): %s", path, st.pos, next, st.reason)
			} else {
				rep.Problem = &CorruptError{File: path, Offset: st.pos, Index: next, Reason: st.reason}
			}
			rep.Segments = append(rep.Segments, sr)
			return rep, nil
		}
		rep.Segments = append(rep.Segments, sr)
	}
	if n := next; len(bases) > 0 && n > 0 && n-1 < rep.DurableIndex && rep.Problem == nil {
		rep.Problem = &CorruptError{File: dir, Index: n, Reason: fmt.Sprintf("log ends at %d but the checkpoint says %d was synced", n-1, rep.DurableIndex)}
	}
	return rep, nil
}
