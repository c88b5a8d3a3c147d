package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// On-disk constants. See the package documentation.
const (
	segMagic   uint32 = 0x524D514C // "RMQL"
	segVersion uint32 = 1
	entryMagic uint32 = 0x524D5145 // "RMQE"
	sealMagic  uint32 = 0x524D5153 // "RMQS"
	ckptMagic  uint32 = 0x524D5143 // "RMQC"
	idxMagic   uint32 = 0x524D5149 // "RMQI"

	// Segment header fields.
	segOffMagic   = 0
	segOffVersion = 4
	segOffSize    = 8
	segOffBase    = 16
	segOffFirst   = 24
	segOffStart   = 32
	segOffCRC     = 36
	// SegmentHeaderSize is the size of the header at the start of a segment.
	SegmentHeaderSize = 40

	// Entry header fields.
	entOffMagic    = 0
	entOffSize     = 4
	entOffIndex    = 8
	entOffTerm     = 16
	entOffType     = 24
	entOffBodyLen  = 28
	entOffReserved = 32
	entOffCRC      = 36
	// HeaderSize is the size of an entry header; an entry's body starts
	// HeaderSize bytes after the entry's position.
	HeaderSize = 40

	// Seal fields.
	sealOffMagic = 0
	sealOffLeft  = 4
	sealSize     = 8

	// Checkpoint slot fields.
	ckptOffMagic   = 0
	ckptOffSeq     = 8
	ckptOffDurable = 16
	ckptOffCRC     = 24
	ckptSlotLen    = 28
	ckptSlotStride = 4096

	// Index sidecar fields.
	idxOffMagic = 0
	idxOffCount = 4
	idxOffFirst = 8
	idxOffPos   = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt marks corruption of data that was synced: it is never repaired
// silently. Test with errors.Is.
var ErrCorrupt = errors.New("commitlog: corrupt")

// CorruptError says where corruption was found.
type CorruptError struct {
	File   string // path of the file
	Offset int64  // byte position in that file
	Index  uint64 // raft index expected there, if known
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("commitlog: corrupt data in %s at offset %d (raft index %d): %s; "+
		"the data was synced, so raftmq will not truncate it: restore the node from a replica",
		e.File, e.Offset, e.Index, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Sentinel errors.
var (
	// ErrCompacted is returned when a requested index is below the first
	// entry of the log (dropped by retention or a snapshot).
	ErrCompacted = errors.New("commitlog: index compacted")
	// ErrUnavailable is returned when a requested index is past the last entry.
	ErrUnavailable = errors.New("commitlog: index unavailable")
	// ErrEntryTooLarge is returned by Append for an entry that cannot fit in
	// one segment.
	ErrEntryTooLarge = errors.New("commitlog: entry larger than a segment")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("commitlog: closed")
	// ErrGap is returned by Append when entries do not follow the log.
	ErrGap = errors.New("commitlog: entries do not follow the log")
	// ErrBadPosition is returned by reads at a position holding no entry.
	ErrBadPosition = errors.New("commitlog: no entry at position")
)

// Entry is one raft entry.
type Entry struct {
	Index uint64
	Term  uint64
	Type  uint32
	Data  []byte
	// Pos is the global position of the entry's header; set by reads,
	// ignored by Append.
	Pos int64
}

// EncodedSize is the number of bytes an entry with a body of n bytes takes.
func EncodedSize(n int) int { return HeaderSize + n }

// putEntry encodes e into b, which has room for EncodedSize(len(e.Data)).
func putEntry(b []byte, e *Entry) {
	size := HeaderSize + len(e.Data)
	binary.BigEndian.PutUint32(b[entOffMagic:], entryMagic)
	binary.BigEndian.PutUint32(b[entOffSize:], uint32(size))
	binary.BigEndian.PutUint64(b[entOffIndex:], e.Index)
	binary.BigEndian.PutUint64(b[entOffTerm:], e.Term)
	binary.BigEndian.PutUint32(b[entOffType:], e.Type)
	binary.BigEndian.PutUint32(b[entOffBodyLen:], uint32(len(e.Data)))
	binary.BigEndian.PutUint32(b[entOffReserved:], 0)
	copy(b[HeaderSize:], e.Data)
	crc := crc32.Update(0, castagnoli, b[:entOffCRC])
	crc = crc32.Update(crc, castagnoli, e.Data)
	binary.BigEndian.PutUint32(b[entOffCRC:], crc)
}

// header is a decoded entry header.
type header struct {
	size    uint32
	index   uint64
	term    uint64
	typ     uint32
	bodyLen uint32
	crc     uint32
}

// parseHeader decodes and checks the structure of an entry header at b[0:]
// given room bytes available in the segment from there. It does not check
// the CRC. It returns a reason string when the bytes are not a valid header.
func parseHeader(b []byte, room int64) (header, string) {
	if room < HeaderSize || len(b) < HeaderSize {
		return header{}, "header runs past the segment end"
	}
	if m := binary.BigEndian.Uint32(b[entOffMagic:]); m != entryMagic {
		return header{}, fmt.Sprintf("bad entry magic %#08x", m)
	}
	h := header{
		size:    binary.BigEndian.Uint32(b[entOffSize:]),
		index:   binary.BigEndian.Uint64(b[entOffIndex:]),
		term:    binary.BigEndian.Uint64(b[entOffTerm:]),
		typ:     binary.BigEndian.Uint32(b[entOffType:]),
		bodyLen: binary.BigEndian.Uint32(b[entOffBodyLen:]),
		crc:     binary.BigEndian.Uint32(b[entOffCRC:]),
	}
	switch {
	case int64(h.size) > room:
		return h, fmt.Sprintf("entry size %d runs past the segment end (%d bytes left)", h.size, room)
	case uint64(h.bodyLen)+HeaderSize != uint64(h.size):
		return h, fmt.Sprintf("body length %d does not match entry size %d", h.bodyLen, h.size)
	case binary.BigEndian.Uint32(b[entOffReserved:]) != 0:
		return h, "reserved field not zero"
	case h.typ > 2:
		return h, fmt.Sprintf("unknown entry type %d", h.typ)
	}
	return h, ""
}

// entryCRC computes the CRC of an encoded entry (header and body).
func entryCRC(b []byte) uint32 {
	crc := crc32.Update(0, castagnoli, b[:entOffCRC])
	return crc32.Update(crc, castagnoli, b[HeaderSize:])
}

func putSegHeader(b []byte, size, base int64, first uint64, start uint32) {
	binary.BigEndian.PutUint32(b[segOffMagic:], segMagic)
	binary.BigEndian.PutUint32(b[segOffVersion:], segVersion)
	binary.BigEndian.PutUint64(b[segOffSize:], uint64(size))
	binary.BigEndian.PutUint64(b[segOffBase:], uint64(base))
	binary.BigEndian.PutUint64(b[segOffFirst:], first)
	binary.BigEndian.PutUint32(b[segOffStart:], start)
	binary.BigEndian.PutUint32(b[segOffCRC:], crc32.Checksum(b[:segOffCRC], castagnoli))
}

type segHeader struct {
	size  int64
	base  int64
	first uint64
	start uint32
}

func parseSegHeader(b []byte) (segHeader, string) {
	if len(b) < SegmentHeaderSize {
		return segHeader{}, "file shorter than a segment header"
	}
	if m := binary.BigEndian.Uint32(b[segOffMagic:]); m != segMagic {
		return segHeader{}, fmt.Sprintf("bad segment magic %#08x", m)
	}
	if crc := crc32.Checksum(b[:segOffCRC], castagnoli); crc != binary.BigEndian.Uint32(b[segOffCRC:]) {
		return segHeader{}, "segment header CRC mismatch"
	}
	if v := binary.BigEndian.Uint32(b[segOffVersion:]); v != segVersion {
		return segHeader{}, fmt.Sprintf("unsupported segment version %d", v)
	}
	h := segHeader{
		size:  int64(binary.BigEndian.Uint64(b[segOffSize:])),
		base:  int64(binary.BigEndian.Uint64(b[segOffBase:])),
		first: binary.BigEndian.Uint64(b[segOffFirst:]),
		start: binary.BigEndian.Uint32(b[segOffStart:]),
	}
	if h.size < minSegmentSize || int64(h.start) < SegmentHeaderSize || int64(h.start) > h.size {
		return h, fmt.Sprintf("implausible segment header (size %d, start %d)", h.size, h.start)
	}
	return h, ""
}

func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// parseSegmentName returns the base offset a segment file name encodes.
func parseSegmentName(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}
