package message

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// ErrCorrupt is matched (errors.Is) by every *CorruptError.
var ErrCorrupt = errors.New("message: corrupt record")

// CorruptError is returned by Decode and Parse for bytes that are not a
// whole, valid record: truncated, inconsistent lengths, an unknown magic, a
// bad topic or properties, or a body that fails its CRC.
type CorruptError struct {
	Offset int // position within the record of the field found bad
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("message: corrupt record at offset %d: %s", e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(off int, format string, args ...any) error {
	return &CorruptError{Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// View is a record parsed in place, for paths that must not allocate (the
// broker's dispatch to consume queues and index). Body, Topic and
// Properties alias the parsed buffer, with their capacity cut to their
// length; they are nil when empty.
type View struct {
	Size                      int // TOTALSIZE: the record is b[:Size]
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	PhysicalOffset            int64
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  netip.AddrPort
	StoreTimestamp            int64
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	Topic                     []byte
	Properties                []byte // encoded; see PropertyValue
}

// Parse parses the record at the start of b without allocating. It checks
// everything Decode checks except the syntax of the properties string, and
// checks the body CRC only if verifyCRC is set. Errors are *CorruptError.
func Parse(b []byte, verifyCRC bool) (View, error) {
	total, topicLenSize, err := parseFrame(b)
	if err != nil {
		return View{}, err
	}
	rec := b[:total]
	v, offBodyLen, err := parseFixed(rec, topicLenSize)
	if err != nil {
		return View{}, err
	}
	if err := parseVariable(rec, &v, offBodyLen, topicLenSize); err != nil {
		return View{}, err
	}
	// Last, so that a bad length is reported as such rather than as a CRC
	// mismatch.
	if verifyCRC {
		if want, got := int32(binary.BigEndian.Uint32(rec[OffBodyCRC:])), BodyCRC(v.Body); want != got {
			return View{}, corrupt(OffBodyCRC, "BODYCRC %#08x, body has %#08x", want, got)
		}
	}
	return v, nil
}

// parseFrame checks TOTALSIZE and MAGICCODE: on success b[:total] holds at
// least the FixedSizeV4 bytes, and topicLenSize is the size of TOPICLEN.
func parseFrame(b []byte) (total, topicLenSize int, err error) {
	be := binary.BigEndian
	if len(b) < OffMagicCode+4 {
		return 0, 0, corrupt(len(b), "truncated: %d bytes, need %d for TOTALSIZE and MAGICCODE", len(b), OffMagicCode+4)
	}
	switch magic := be.Uint32(b[OffMagicCode:]); magic {
	case MagicV1:
		topicLenSize = 1
	case MagicV2:
		topicLenSize = 2
	case MagicBlank:
		return 0, 0, corrupt(OffMagicCode, "end-of-file blank magic %#08x", magic)
	default:
		return 0, 0, corrupt(OffMagicCode, "unknown magic %#08x", magic)
	}
	total = int(int32(be.Uint32(b[OffTotalSize:])))
	if total < FixedSizeV4 {
		return 0, 0, corrupt(OffTotalSize, "TOTALSIZE %d below the minimum %d", total, FixedSizeV4)
	}
	if total > len(b) {
		return 0, 0, corrupt(len(b), "truncated: TOTALSIZE %d, %d bytes available", total, len(b))
	}
	return total, topicLenSize, nil
}

// parseFixed reads the fields from QUEUEID to PREPAREDTRANSACTIONOFFSET of
// rec, a record of len(rec) = TOTALSIZE >= FixedSizeV4 bytes, and returns the
// offset of BODYLEN, which the host sizes in SYSFLAG move.
func parseFixed(rec []byte, topicLenSize int) (v View, offBodyLen int, err error) {
	be := binary.BigEndian
	v = View{
		Size:           len(rec),
		QueueID:        int32(be.Uint32(rec[OffQueueID:])),
		Flag:           int32(be.Uint32(rec[OffFlag:])),
		QueueOffset:    int64(be.Uint64(rec[OffQueueOffset:])),
		PhysicalOffset: int64(be.Uint64(rec[OffPhysicalOffset:])),
		SysFlag:        int32(be.Uint32(rec[OffSysFlag:])),
		BornTimestamp:  int64(be.Uint64(rec[OffBornTimestamp:])),
	}
	bornSize, storeSize := hostSizes(v.SysFlag)
	offStoreTimestamp := OffBornHost + bornSize
	offStoreHost := offStoreTimestamp + 8
	offReconsumeTimes := offStoreHost + storeSize
	offPrepared := offReconsumeTimes + 4
	offBodyLen = offPrepared + 8
	// The smallest record these host sizes and this magic allow.
	if minSize := offBodyLen + 4 + topicLenSize + 2; len(rec) < minSize {
		return View{}, 0, corrupt(OffTotalSize, "TOTALSIZE %d below the minimum %d for SYSFLAG %#x and this magic",
			len(rec), minSize, v.SysFlag)
	}
	if v.BornHost, err = readHost(rec, OffBornHost, bornSize); err != nil {
		return View{}, 0, err
	}
	v.StoreTimestamp = int64(be.Uint64(rec[offStoreTimestamp:]))
	if v.StoreHost, err = readHost(rec, offStoreHost, storeSize); err != nil {
		return View{}, 0, err
	}
	v.ReconsumeTimes = int32(be.Uint32(rec[offReconsumeTimes:]))
	v.PreparedTransactionOffset = int64(be.Uint64(rec[offPrepared:]))
	return v, offBodyLen, nil
}

// parseVariable reads BODY, TOPIC and PROPERTIES of rec into v, checking
// that they end exactly at TOTALSIZE. Each length is checked against the
// bytes that remain before the next length field, so no sum can overflow.
func parseVariable(rec []byte, v *View, offBodyLen, topicLenSize int) error {
	be := binary.BigEndian
	total := len(rec)
	offBody := offBodyLen + 4
	bodyLen := int(int32(be.Uint32(rec[offBodyLen:])))
	if bodyLen < 0 || bodyLen > total-offBody-topicLenSize-2 {
		return corrupt(offBodyLen, "BODYLEN %d does not fit TOTALSIZE %d", bodyLen, total)
	}
	v.Body = sub(rec, offBody, bodyLen)

	offTopicLen := offBody + bodyLen
	offTopic := offTopicLen + topicLenSize
	topicLen, maxTopicLen := int(rec[offTopicLen]), MaxTopicLength
	if topicLenSize == 2 {
		topicLen, maxTopicLen = int(be.Uint16(rec[offTopicLen:])), MaxTopicLengthV2
	}
	if topicLen == 0 || topicLen > maxTopicLen || topicLen > total-offTopic-2 {
		return corrupt(offTopicLen, "TOPICLEN %d does not fit TOTALSIZE %d (limit %d)", topicLen, total, maxTopicLen)
	}
	v.Topic = sub(rec, offTopic, topicLen)
	if !validTopic(v.Topic) {
		return corrupt(offTopic, "topic %q has characters outside [%%|a-zA-Z0-9_-]", v.Topic)
	}

	offPropLen := offTopic + topicLen
	offProps := offPropLen + 2
	propLen := int(be.Uint16(rec[offPropLen:]))
	if propLen > MaxPropertiesSize || offProps+propLen != total {
		return corrupt(offPropLen, "PROPERTIESLEN %d: fields end at %d, TOTALSIZE is %d", propLen, offProps+propLen, total)
	}
	v.Properties = sub(rec, offProps, propLen)
	return nil
}

// sub returns b[off:off+n] with its capacity cut to n, or nil if n is 0.
func sub(b []byte, off, n int) []byte {
	if n == 0 {
		return nil
	}
	return b[off : off+n : off+n]
}

// readHost reads a host field of size HostSizeV4 or HostSizeV6 at rec[off:].
func readHost(rec []byte, off, size int) (netip.AddrPort, error) {
	var a netip.Addr
	if size == HostSizeV4 {
		a = netip.AddrFrom4([4]byte(rec[off : off+4]))
	} else {
		a = netip.AddrFrom16([16]byte(rec[off : off+16]))
	}
	port := int32(binary.BigEndian.Uint32(rec[off+size-4:]))
	if port < 0 || port > 0xFFFF {
		return netip.AddrPort{}, corrupt(off+size-4, "port %d out of range", port)
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

// Decode decodes the record at the start of b and returns it with its
// length; bytes after it are ignored. It accepts MagicV1 and MagicV2 and
// IPv4 and IPv6 hosts, checks TOTALSIZE against the fields, the body CRC,
// the topic and the properties, and never panics. Every error is a
// *CorruptError. The returned Body aliases b; Topic and Properties are
// copies. Allocations are bounded by len(b).
func Decode(b []byte) (Message, int, error) {
	v, err := Parse(b, true)
	if err != nil {
		return Message{}, 0, err
	}
	props, err := DecodeProperties(string(v.Properties))
	if err != nil {
		return Message{}, 0, &CorruptError{Offset: v.Size - len(v.Properties), Reason: err.Error()}
	}
	m := Message{
		QueueID:                   v.QueueID,
		Flag:                      v.Flag,
		QueueOffset:               v.QueueOffset,
		PhysicalOffset:            v.PhysicalOffset,
		SysFlag:                   v.SysFlag,
		BornTimestamp:             v.BornTimestamp,
		BornHost:                  v.BornHost,
		StoreTimestamp:            v.StoreTimestamp,
		StoreHost:                 v.StoreHost,
		ReconsumeTimes:            v.ReconsumeTimes,
		PreparedTransactionOffset: v.PreparedTransactionOffset,
		Body:                      v.Body,
		Topic:                     string(v.Topic),
		Properties:                props,
	}
	return m, v.Size, nil
}

// PatchQueueOffset overwrites QUEUEOFFSET in rec, a record. BODYCRC covers
// only the body, so the record stays valid. rec must be at least
// OffQueueOffset+8 bytes long (any record Parse accepted is).
func PatchQueueOffset(rec []byte, off int64) {
	binary.BigEndian.PutUint64(rec[OffQueueOffset:OffQueueOffset+8], uint64(off))
}

// PatchPhysicalOffset overwrites PHYSICALOFFSET in rec, a record, as
// PatchQueueOffset does QUEUEOFFSET.
func PatchPhysicalOffset(rec []byte, off int64) {
	binary.BigEndian.PutUint64(rec[OffPhysicalOffset:OffPhysicalOffset+8], uint64(off))
}

// CountRecords returns the number of records b starts, following their
// TOTALSIZE fields without parsing them: every record Parse would accept,
// plus one for a malformed or truncated tail. It is an upper bound on the
// records a reader of b gets, for sizing their slice once.
func CountRecords(b []byte) int {
	n := 0
	for off := 0; off < len(b); n++ {
		if off+4 > len(b) {
			return n + 1
		}
		size := int(int32(binary.BigEndian.Uint32(b[off:])))
		if size < 4 {
			return n + 1
		}
		off += size
	}
	return n
}
