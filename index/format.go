package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/message"
)

// Header layout. These constants are part of the on-disk format and must not
// change.
const (
	headerSize        = 40
	offBeginTimestamp = 0
	offEndTimestamp   = 8
	offBeginPhyOffset = 16
	offEndPhyOffset   = 24
	offHashSlotCount  = 32
	offIndexCount     = 36
)

// Slot and entry layout. These constants are part of the on-disk format and
// must not change.
const (
	slotSize = 4

	entrySize         = 20
	offEntryKeyHash   = 0
	offEntryPhyOffset = 4
	offEntryTimeDiff  = 12
	offEntryPrevIndex = 16
)

// firstOrdinal is the ordinal of a file's first entry; 0 means "no entry" in
// slots and prevIndex.
const firstOrdinal = 1

// File naming: yyyyMMddHHmmssSSS in UTC.
const (
	nameLen       = 17
	nameLayoutSec = "20060102150405" // followed by 3 digits of milliseconds
)

var maxNameMillis = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()

// header is a file's 40-byte header.
//
// Invariant (checkHeader enforces it on load): 1 <= indexCount <=
// MaxEntries; with indexCount == 1 every other field is 0; otherwise
// 1 <= hashSlotCount <= min(SlotCount, indexCount-1),
// 0 <= beginTimestamp <= endTimestamp and 0 <= beginPhyOffset <= endPhyOffset.
type header struct {
	beginTimestamp int64
	endTimestamp   int64
	beginPhyOffset int64
	endPhyOffset   int64
	hashSlotCount  int32
	indexCount     int32
}

func (h *header) encode() []byte {
	b := make([]byte, headerSize)
	binary.BigEndian.PutUint64(b[offBeginTimestamp:], uint64(h.beginTimestamp))
	binary.BigEndian.PutUint64(b[offEndTimestamp:], uint64(h.endTimestamp))
	binary.BigEndian.PutUint64(b[offBeginPhyOffset:], uint64(h.beginPhyOffset))
	binary.BigEndian.PutUint64(b[offEndPhyOffset:], uint64(h.endPhyOffset))
	binary.BigEndian.PutUint32(b[offHashSlotCount:], uint32(h.hashSlotCount))
	binary.BigEndian.PutUint32(b[offIndexCount:], uint32(h.indexCount))
	return b
}

// decodeHeader decodes b, which must hold at least headerSize bytes.
func decodeHeader(b []byte) header {
	return header{
		beginTimestamp: int64(binary.BigEndian.Uint64(b[offBeginTimestamp:])),
		endTimestamp:   int64(binary.BigEndian.Uint64(b[offEndTimestamp:])),
		beginPhyOffset: int64(binary.BigEndian.Uint64(b[offBeginPhyOffset:])),
		endPhyOffset:   int64(binary.BigEndian.Uint64(b[offEndPhyOffset:])),
		hashSlotCount:  int32(binary.BigEndian.Uint32(b[offHashSlotCount:])),
		indexCount:     int32(binary.BigEndian.Uint32(b[offIndexCount:])),
	}
}

// entry is one 20-byte index entry.
type entry struct {
	keyHash   int32
	phyOffset int64
	timeDiff  int32
	prevIndex int32
}

// append appends the encoded entry to b.
func (e *entry) append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(e.keyHash))
	b = binary.BigEndian.AppendUint64(b, uint64(e.phyOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(e.timeDiff))
	return binary.BigEndian.AppendUint32(b, uint32(e.prevIndex))
}

// decodeEntry decodes b, which must hold at least entrySize bytes.
func decodeEntry(b []byte) entry {
	return entry{
		keyHash:   int32(binary.BigEndian.Uint32(b[offEntryKeyHash:])),
		phyOffset: int64(binary.BigEndian.Uint64(b[offEntryPhyOffset:])),
		timeDiff:  int32(binary.BigEndian.Uint32(b[offEntryTimeDiff:])),
		prevIndex: int32(binary.BigEndian.Uint32(b[offEntryPrevIndex:])),
	}
}

// geometry is the size of a file's regions, fixed by Options.
type geometry struct {
	slotCount  int32
	maxEntries int32
}

func (g geometry) slotOffset(slot int32) int64 {
	return headerSize + int64(slot)*slotSize
}

func (g geometry) entryOffset(ordinal int32) int64 {
	return headerSize + int64(g.slotCount)*slotSize + int64(ordinal)*entrySize
}

func (g geometry) fileSize() int64 { return g.entryOffset(g.maxEntries) }

// keyHash is RocketMQ's IndexFile key hash: Math.abs(key.hashCode()), with
// the one negative result of Math.abs (MinInt32) mapped to 0.
func keyHash(key string) int32 { return absHash(message.JavaHashCode(key)) }

// KeyHash returns the hash under which Put files key = p + s, given
// prefix = message.JavaHashCode(p) (p valid UTF-8), without building the
// key: for PutHash and QueryHash.
func KeyHash(prefix int32, s string) int32 {
	return absHash(message.JavaHashCodeFrom(prefix, s))
}

// absHash is RocketMQ's abs of a key's Java hash code (MinInt32 to 0).
func absHash(h int32) int32 {
	switch {
	case h == math.MinInt32:
		return 0
	case h < 0:
		return -h
	}
	return h
}

// timeDiff is the entry's seconds since beginTimestamp, clamped to
// [0, MaxInt32] as RocketMQ does.
func timeDiff(storeTimestamp, beginTimestamp int64) int32 {
	d := (storeTimestamp - beginTimestamp) / 1000
	if beginTimestamp <= 0 || d < 0 {
		return 0
	}
	if d > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(d)
}

// entryTime is the store timestamp an entry stands for (ms), rounded down to
// a whole second after beginTimestamp.
func entryTime(beginTimestamp int64, timeDiff int32) int64 {
	return beginTimestamp + int64(timeDiff)*1000
}

// fileName formats a millisecond timestamp as yyyyMMddHHmmssSSS in UTC.
func fileName(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	return fmt.Sprintf("%s%03d", t.Format(nameLayoutSec), ms%1000)
}

// parseFileName is the inverse of fileName. ok is false for names raftmq
// did not write.
func parseFileName(name string) (ms int64, ok bool) {
	if len(name) != nameLen {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	t, err := time.ParseInLocation(nameLayoutSec, name[:len(nameLayoutSec)], time.UTC)
	if err != nil {
		return 0, false
	}
	milli, err := strconv.Atoi(name[len(nameLayoutSec):])
	if err != nil {
		return 0, false
	}
	ms = t.UnixMilli() + int64(milli)
	if fileName(ms) != name { // rejects e.g. month 13 normalised by Parse
		return 0, false
	}
	return ms, true
}
