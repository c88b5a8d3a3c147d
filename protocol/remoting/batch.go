package remoting

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/raftmq/raftmq/message"
)

// Batch body of SEND_BATCH_MESSAGE (320): entries back to back until the
// body ends, each (big-endian, RocketMQ's MessageDecoder.encodeMessage):
//
//	| off  | size | field                                              |
//	|    0 |    4 | TOTALSIZE = 20 + b + 2 + p, this field included    |
//	|    4 |    4 | MAGICCODE: clients write 0; ignored                |
//	|    8 |    4 | BODYCRC: clients write 0; ignored                  |
//	|   12 |    4 | FLAG: the entry's user flag                        |
//	|   16 |    4 | BODYLEN b                                          |
//	|   20 |    b | BODY                                               |
//	| 20+b |    2 | PROPERTIESLEN p (int16)                            |
//	| 22+b |    p | PROPERTIES, message.EncodeProperties form          |
//
// The request's topic, queue, sysFlag, born timestamp and reconsume times
// apply to every entry; the outer properties header is not merged in.
const (
	batchOffTotalSize = 0
	batchOffMagic     = 4
	batchOffBodyCRC   = 8
	batchOffFlag      = 12
	batchOffBodyLen   = 16
	batchOffBody      = 20
	// batchPropsLenSize is the size of PROPERTIESLEN.
	batchPropsLenSize = 2
	// batchFixedSize is an entry's size with empty body and properties.
	batchFixedSize = batchOffBody + batchPropsLenSize
)

// BatchEntry is one message of a batch body.
type BatchEntry struct {
	Flag int32
	// Body aliases the batch body when decoded; nil when empty.
	Body []byte
	// Properties are the entry's own properties (UNIQ_KEY, KEYS, TAGS,
	// ...); nil when there are none.
	Properties map[string]string
	// RawProperties are the entry's properties as sent, checked, in
	// message.CheckRawProperties form; set instead of Properties by
	// DecodeBatchRaw. HasUniqKey tells whether they have a UNIQ_KEY.
	// AppendBatch writes RawProperties as they are, unchecked, when
	// Properties is nil: the caller has built them by the rules.
	RawProperties string
	HasUniqKey    bool
}

// AppendBatch appends the batch body of entries to dst. Properties (a
// map) are checked as message.Append checks them; the size of either
// form is checked: an error wraps
// message.ErrBadProperty or message.ErrPropertiesTooLarge. On error dst is
// returned unchanged (truncated to its original length).
func AppendBatch(dst []byte, entries []BatchEntry) ([]byte, error) {
	start := len(dst)
	for i := range entries {
		e := &entries[i]
		props := e.RawProperties
		if e.Properties != nil || props == "" {
			if err := checkBatchProperties(e.Properties); err != nil {
				return dst[:start], fmt.Errorf("remoting: batch entry %d: %w", i, err)
			}
			props = message.EncodeProperties(e.Properties)
		}
		if len(props) > message.MaxPropertiesSize {
			return dst[:start], fmt.Errorf("remoting: batch entry %d: properties of %d bytes exceed %d: %w",
				i, len(props), message.MaxPropertiesSize, message.ErrPropertiesTooLarge)
		}
		total := batchFixedSize + len(e.Body) + len(props)
		if total > math.MaxInt32 {
			return dst[:start], fmt.Errorf("remoting: batch entry %d: %d bytes: %w", i, total, ErrFrameTooLarge)
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(total))
		dst = binary.BigEndian.AppendUint32(dst, 0) // MAGICCODE
		dst = binary.BigEndian.AppendUint32(dst, 0) // BODYCRC
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Flag))
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Body)))
		dst = append(dst, e.Body...)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(props)))
		dst = append(dst, props...)
	}
	return dst, nil
}

func checkBatchProperties(props map[string]string) error {
	for k, v := range props {
		if k == "" || strings.ContainsAny(k, "\x01\x02") || strings.ContainsAny(v, "\x01\x02") {
			return fmt.Errorf("remoting: property %q=%q: %w", k, v, message.ErrBadProperty)
		}
	}
	return nil
}

// DecodeBatch decodes a batch body. Entry bodies alias body. An empty body,
// a truncated entry, a TOTALSIZE that disagrees with the entry's lengths,
// or bad properties give an error wrapping ErrMalformed. It never panics.
func DecodeBatch(body []byte) ([]BatchEntry, error) { return decodeBatch(body, false) }

// DecodeBatchRaw is DecodeBatch leaving each entry's properties encoded
// (RawProperties) rather than building a map: what a broker needs to store
// them.
func DecodeBatchRaw(body []byte) ([]BatchEntry, error) { return decodeBatch(body, true) }

func decodeBatch(body []byte, raw bool) ([]BatchEntry, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("remoting: batch: empty body: %w", ErrMalformed)
	}
	var entries []BatchEntry
	for off := 0; off < len(body); {
		e, n, err := decodeBatchEntry(body[off:], raw)
		if err != nil {
			return nil, fmt.Errorf("remoting: batch entry %d at byte %d: %w", len(entries), off, err)
		}
		entries = append(entries, e)
		off += n
	}
	return entries, nil
}

// decodeBatchEntry decodes the entry at the start of b and returns its size.
func decodeBatchEntry(b []byte, raw bool) (BatchEntry, int, error) {
	if len(b) < batchFixedSize {
		return BatchEntry{}, 0, fmt.Errorf("%d bytes left, an entry needs %d: %w", len(b), batchFixedSize, ErrMalformed)
	}
	total := int64(int32(binary.BigEndian.Uint32(b[batchOffTotalSize:])))
	bodyLen := int64(int32(binary.BigEndian.Uint32(b[batchOffBodyLen:])))
	if bodyLen < 0 || bodyLen > int64(len(b)-batchFixedSize) {
		return BatchEntry{}, 0, fmt.Errorf("body length %d out of range: %w", bodyLen, ErrMalformed)
	}
	propsAt := batchOffBody + int(bodyLen)
	propsLen := int(int16(binary.BigEndian.Uint16(b[propsAt:])))
	propsStart := propsAt + batchPropsLenSize
	if propsLen < 0 || propsLen > len(b)-propsStart {
		return BatchEntry{}, 0, fmt.Errorf("properties length %d out of range: %w", propsLen, ErrMalformed)
	}
	size := propsStart + propsLen
	if total != int64(size) {
		return BatchEntry{}, 0, fmt.Errorf("TOTALSIZE %d, fields add up to %d: %w", total, size, ErrMalformed)
	}
	e := BatchEntry{Flag: int32(binary.BigEndian.Uint32(b[batchOffFlag:]))}
	if bodyLen > 0 {
		e.Body = b[batchOffBody:propsAt:propsAt]
	}
	var err error
	if raw {
		e.RawProperties, e.HasUniqKey, _, err = message.LenientRawProperties(string(b[propsStart:size]))
	} else {
		e.Properties, err = message.DecodeProperties(string(b[propsStart:size]))
	}
	if err != nil {
		return BatchEntry{}, 0, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return e, size, nil
}
