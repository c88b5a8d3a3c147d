package offsets

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Bucket names. Part of the on-disk format (see doc.go).
const (
	bucketMeta            = "meta"
	bucketConsumerOffsets = "consumer_offsets"
	bucketQueueOffsets    = "queue_offsets"
	bucketTopics          = "topics"
	bucketGroups          = "subscription_groups"
	bucketDedupe          = "dedupe"
	bucketDedupeByTime    = "dedupe_by_time"
	bucketSchedule        = "schedule"
	bucketTransactions    = "transactions"
	bucketPop             = "pop"
)

// bucketNames lists every bucket Open creates.
func bucketNames() []string {
	return []string{
		bucketMeta, bucketConsumerOffsets, bucketQueueOffsets,
		bucketTopics, bucketGroups, bucketDedupe, bucketDedupeByTime,
		bucketSchedule, bucketTransactions, bucketPop,
	}
}

// formatVersion is stored under metaKindFormat. Bump it on any layout change.
// Version 2 added the schedule and transactions buckets, version 3 the pop
// bucket; an older database is upgraded in place when opened (upgrade).
const formatVersion uint32 = 3

// Meta bucket key kinds (the first byte of every meta key).
const (
	metaKindFormat  byte = 0x01
	metaKindApplied byte = 0x02
	metaKindBlob    byte = 0x03
)

// Value layouts.
const (
	formatValueLen  = 4
	offAppliedIndex = 0
	offAppliedTerm  = 8
	appliedValueLen = 16

	int64ValueLen = 8
	queueIDLen    = 4

	offDedupeTS     = 0
	offDedupeResult = 8
	dedupeTSLen     = 8
)

// Escaped-string bytes.
const (
	escMarker  byte = 0x00 // starts an escape pair
	escZero    byte = 0xFF // 0x00 0xFF is a 0x00 byte of the name
	escEndName byte = 0x01 // 0x00 0x01 ends the name
)

func metaFormatKey() []byte  { return []byte{metaKindFormat} }
func metaAppliedKey() []byte { return []byte{metaKindApplied} }

func metaBlobKey(name string) []byte {
	k := make([]byte, 0, 1+len(name))
	k = append(k, metaKindBlob)
	return append(k, name...)
}

// appendEscaped appends the order-preserving escape of s to dst.
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == escMarker {
			dst = append(dst, escMarker, escZero)
			continue
		}
		dst = append(dst, s[i])
	}
	return append(dst, escMarker, escEndName)
}

// decodeEscaped decodes one escaped string from the front of b.
func decodeEscaped(b []byte) (s string, rest []byte, err error) {
	var out []byte
	for {
		i := bytes.IndexByte(b, escMarker)
		if i < 0 || i+1 >= len(b) {
			return "", nil, fmt.Errorf("offsets: unterminated name in key: %w", ErrCorrupt)
		}
		out = append(out, b[:i]...)
		switch b[i+1] {
		case escEndName:
			return string(out), b[i+2:], nil
		case escZero:
			out = append(out, 0)
			b = b[i+2:]
		default:
			return "", nil, fmt.Errorf("offsets: bad escape 0x00 0x%02x in key: %w", b[i+1], ErrCorrupt)
		}
	}
}

func appendQueueID(dst []byte, q int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(q))
}

func decodeQueueID(b []byte) (int32, error) {
	if len(b) != queueIDLen {
		return 0, fmt.Errorf("offsets: queue id is %d bytes, want %d: %w", len(b), queueIDLen, ErrCorrupt)
	}
	v := binary.BigEndian.Uint32(b)
	if v > 1<<31-1 {
		return 0, fmt.Errorf("offsets: negative queue id %d in key: %w", int32(v), ErrCorrupt)
	}
	return int32(v), nil
}

// consumerOffsetPrefix is the key prefix of a group's offsets, or of one
// (group, topic) when topic is not empty.
func consumerOffsetPrefix(group, topic string) []byte {
	k := appendEscaped(make([]byte, 0, len(group)+len(topic)+4+queueIDLen), group)
	if topic != "" {
		k = appendEscaped(k, topic)
	}
	return k
}

func encodeConsumerOffsetKey(group, topic string, q int32) []byte {
	k := appendEscaped(make([]byte, 0, len(group)+len(topic)+4+queueIDLen), group)
	k = appendEscaped(k, topic)
	return appendQueueID(k, q)
}

func decodeConsumerOffsetKey(k []byte) (group, topic string, q int32, err error) {
	group, rest, err := decodeEscaped(k)
	if err != nil {
		return "", "", 0, err
	}
	topic, rest, err = decodeEscaped(rest)
	if err != nil {
		return "", "", 0, err
	}
	q, err = decodeQueueID(rest)
	return group, topic, q, err
}

func encodeQueueOffsetKey(topic string, q int32) []byte {
	k := appendEscaped(make([]byte, 0, len(topic)+2+queueIDLen), topic)
	return appendQueueID(k, q)
}

func decodeQueueOffsetKey(k []byte) (topic string, q int32, err error) {
	topic, rest, err := decodeEscaped(k)
	if err != nil {
		return "", 0, err
	}
	q, err = decodeQueueID(rest)
	return topic, q, err
}

func encodeInt64(v int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, int64ValueLen), uint64(v))
}

func decodeInt64(v []byte) (int64, error) {
	if len(v) != int64ValueLen {
		return 0, fmt.Errorf("offsets: offset value is %d bytes, want %d: %w", len(v), int64ValueLen, ErrCorrupt)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func encodeApplied(index, term uint64) []byte {
	v := make([]byte, appliedValueLen)
	binary.BigEndian.PutUint64(v[offAppliedIndex:], index)
	binary.BigEndian.PutUint64(v[offAppliedTerm:], term)
	return v
}

func decodeApplied(v []byte) (index, term uint64, err error) {
	if len(v) != appliedValueLen {
		return 0, 0, fmt.Errorf("offsets: applied value is %d bytes, want %d: %w", len(v), appliedValueLen, ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v[offAppliedIndex:]), binary.BigEndian.Uint64(v[offAppliedTerm:]), nil
}

func encodeFormat(version uint32) []byte {
	return binary.BigEndian.AppendUint32(make([]byte, 0, formatValueLen), version)
}

func decodeFormat(v []byte) (uint32, error) {
	if len(v) != formatValueLen {
		return 0, fmt.Errorf("offsets: format value is %d bytes, want %d: %w", len(v), formatValueLen, ErrCorrupt)
	}
	return binary.BigEndian.Uint32(v), nil
}

func encodeDedupeTimeKey(tsMillis int64, key string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, dedupeTSLen+len(key)), uint64(tsMillis))
	return append(k, key...)
}

func decodeDedupeTimeKey(k []byte) (tsMillis int64, key string, err error) {
	if len(k) <= dedupeTSLen {
		return 0, "", fmt.Errorf("offsets: dedupe time key is %d bytes, want > %d: %w", len(k), dedupeTSLen, ErrCorrupt)
	}
	ts := binary.BigEndian.Uint64(k[:dedupeTSLen])
	if ts > 1<<63-1 {
		return 0, "", fmt.Errorf("offsets: negative dedupe timestamp in key: %w", ErrCorrupt)
	}
	return int64(ts), string(k[dedupeTSLen:]), nil
}

func encodeDedupeValue(tsMillis int64, result []byte) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, dedupeTSLen+len(result)), uint64(tsMillis))
	return append(v, result...)
}

// decodeDedupeValue returns the timestamp and a copy of the result.
func decodeDedupeValue(v []byte) (tsMillis int64, result []byte, err error) {
	if len(v) < dedupeTSLen {
		return 0, nil, fmt.Errorf("offsets: dedupe value is %d bytes, want >= %d: %w", len(v), dedupeTSLen, ErrCorrupt)
	}
	ts := binary.BigEndian.Uint64(v[offDedupeTS:])
	if ts > 1<<63-1 {
		return 0, nil, fmt.Errorf("offsets: negative dedupe timestamp in value: %w", ErrCorrupt)
	}
	return int64(ts), bytes.Clone(v[offDedupeResult:]), nil
}
