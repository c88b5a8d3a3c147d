package consumequeue

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// On-disk constants. See the package documentation; they must not change.
const (
	// UnitSize is the size in bytes of one consume-queue unit.
	UnitSize = 20

	unitOffPhyOffset = 0  // commitLogOffset int64
	unitOffSize      = 8  // size int32
	unitOffTagsCode  = 12 // tagsCode int64

	// DefaultUnitsPerFile is RocketMQ's mappedFileSizeConsumeQueue / 20.
	DefaultUnitsPerFile = 300_000

	// fileNameLen is the length of a file name: the byte offset of the
	// file's first unit as zero-padded decimal digits.
	fileNameLen = 20

	// blankSize is the size field of a blank unit (RocketMQ fillPreBlank).
	blankSize = math.MaxInt32
)

// Unit is one consume-queue entry: where the message at queue offset Offset
// sits in the commit log.
type Unit struct {
	Offset    int64 // queue offset
	PhyOffset int64 // byte position of the message in the commit log
	Size      int32 // message length in the commit log
	TagsCode  int64 // hash of the message's tags
}

// rawUnit is a unit as stored, without its queue offset.
type rawUnit struct {
	phy  int64
	size int32
	tags int64
}

// encodeUnit writes u into the first UnitSize bytes of b.
func encodeUnit(b []byte, u rawUnit) {
	_ = b[UnitSize-1]
	binary.BigEndian.PutUint64(b[unitOffPhyOffset:], uint64(u.phy))
	binary.BigEndian.PutUint32(b[unitOffSize:], uint32(u.size))
	binary.BigEndian.PutUint64(b[unitOffTagsCode:], uint64(u.tags))
}

// decodeUnit reads the unit in the first UnitSize bytes of b. ok is false
// when b is too short.
func decodeUnit(b []byte) (u rawUnit, ok bool) {
	if len(b) < UnitSize {
		return rawUnit{}, false
	}
	u.phy = int64(binary.BigEndian.Uint64(b[unitOffPhyOffset:]))
	u.size = int32(binary.BigEndian.Uint32(b[unitOffSize:]))
	u.tags = int64(binary.BigEndian.Uint64(b[unitOffTagsCode:]))
	return u, true
}

// empty reports whether the unit marks the end of the written units.
func (u rawUnit) empty() bool { return u.size == 0 }

// blank reports whether u is a fill unit (RocketMQ fillPreBlank).
func (u rawUnit) blank() bool { return u.phy == 0 && u.size == blankSize && u.tags == 0 }

// valid reports whether u is a well-formed message unit.
func (u rawUnit) valid() bool { return u.phy >= 0 && u.size > 0 && !u.blank() }

// end is the commit-log offset just past the message.
func (u rawUnit) end() int64 { return u.phy + int64(u.size) }

func (u rawUnit) String() string {
	return fmt.Sprintf("(phy %d size %d tags %d)", u.phy, u.size, u.tags)
}

func (u rawUnit) unit(offset int64) Unit {
	return Unit{Offset: offset, PhyOffset: u.phy, Size: u.size, TagsCode: u.tags}
}

// fileName returns the name of the file whose first unit is at byte offset
// byteOff.
func fileName(byteOff int64) string {
	return fmt.Sprintf("%0*d", fileNameLen, byteOff)
}

// parseFileName returns the byte offset a file name stands for. ok is false
// for names that are not consume-queue files.
func parseFileName(name string) (byteOff int64, ok bool) {
	if len(name) != fileNameLen {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}
