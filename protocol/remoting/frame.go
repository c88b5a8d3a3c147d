package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Errors of the frame codec. They are wrapped with detail; test them with
// errors.Is.
var (
	// ErrFrameTooLarge is returned by ReadFrame for a frame longer than the
	// limit, and by AppendFrame and senders for a command whose header or
	// frame does not fit the format or the connection's limit.
	ErrFrameTooLarge = errors.New("remoting: frame too large")
	// ErrMalformed is returned for bytes that are not a valid frame, header,
	// typed header, batch or body, and for a command that cannot be encoded
	// (a code outside int16 in a binary header, an unknown serialize type).
	ErrMalformed = errors.New("remoting: malformed")
)

// Frame layout; see the package documentation.
const (
	// lenPrefixSize is the size of the frame length prefix.
	lenPrefixSize = 4
	// typeLenSize is the size of the serialize type and header length
	// field that starts every frame after the prefix.
	typeLenSize = 4
	// maxHeaderLen is the largest header length the 24-bit field holds.
	maxHeaderLen = 1<<24 - 1
	// headerLenMask selects the header length from the type/length field.
	headerLenMask = 0x00FFFFFF
	// serializeTypeShift moves the serialize type into the top byte.
	serializeTypeShift = 24
)

// ROCKETMQ binary header layout; see the package documentation.
const (
	binOffCode      = 0
	binOffLanguage  = 2
	binOffVersion   = 3
	binOffOpaque    = 5
	binOffFlag      = 9
	binOffRemarkLen = 13
	binOffRemark    = 17
	// binFixedSize is the header size with no remark and no ext fields.
	binFixedSize = 21
	// binExtLenSize is the size of the ext fields length field.
	binExtLenSize = 4
	// binKeyLenSize and binValueLenSize prefix each ext field's key and
	// value.
	binKeyLenSize   = 2
	binValueLenSize = 4
)

// AppendFrame appends the whole frame of c, length prefix included, to dst,
// with the header encoded as c.Serialize says. Ext fields are written with
// keys sorted, so equal commands encode to equal bytes. On error dst is
// returned unchanged (truncated to its original length).
func AppendFrame(dst []byte, c *Command) ([]byte, error) {
	var stack [16]extField
	dst, _, err := appendFrame(dst, c, stack[:0])
	return dst, err
}

// appendFrame is AppendFrame with a caller-owned scratch slice for sorting
// the ext fields. It returns the scratch (grown if needed) emptied, for
// reuse.
func appendFrame(dst []byte, c *Command, scratch []extField) ([]byte, []extField, error) {
	start := len(dst)
	dst = slices.Grow(dst, lenPrefixSize+typeLenSize+estimateHeader(c)+len(c.Body))
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // prefix and type/length, patched below
	hdrStart := len(dst)
	ext := c.ExtFields
	if c.typedHeader() && c.Serialize != SerializeRocketMQ {
		w := newExtMap(16)
		c.Header.encodeExt(&w)
		ext = w.m
	}
	fields := sortedExt(ext, scratch[:0])
	var err error
	switch c.Serialize {
	case SerializeJSON:
		dst = appendJSONHeader(dst, c, fields)
	case SerializeRocketMQ:
		dst, err = appendBinaryHeader(dst, c, fields)
	default:
		err = fmt.Errorf("remoting: encode: unknown serialize type %d: %w", c.Serialize, ErrMalformed)
	}
	clear(fields) // drop the string references
	scratch = fields[:0]
	if err != nil {
		return dst[:start], scratch, err
	}
	hdrLen := len(dst) - hdrStart
	if hdrLen > maxHeaderLen {
		return dst[:start], scratch, fmt.Errorf("remoting: encode: header of %d bytes exceeds %d: %w",
			hdrLen, maxHeaderLen, ErrFrameTooLarge)
	}
	frameLen := typeLenSize + hdrLen + len(c.Body)
	if frameLen > math.MaxInt32 {
		return dst[:start], scratch, fmt.Errorf("remoting: encode: frame of %d bytes: %w", frameLen, ErrFrameTooLarge)
	}
	dst = append(dst, c.Body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(frameLen))
	binary.BigEndian.PutUint32(dst[start+lenPrefixSize:], uint32(c.Serialize)<<serializeTypeShift|uint32(hdrLen))
	return dst, scratch, nil
}

// estimateHeader returns roughly the encoded header size of c, to size the
// buffer once. It does not walk the ext fields: iterating a map costs more
// than an occasional second growth of the buffer.
func estimateHeader(c *Command) int {
	n := 96 + len(c.Language) + len(c.Remark) + 40*len(c.ExtFields)
	if c.typedHeader() {
		n += 256
	}
	return n
}

// DecodeFrame decodes a frame without its length prefix: the serialize type
// and header length field, the header and the body. The returned Body
// aliases b. It returns an error wrapping ErrMalformed for anything that is
// not a valid frame, and never panics.
func DecodeFrame(b []byte) (*Command, error) {
	if len(b) < typeLenSize {
		return nil, fmt.Errorf("remoting: decode: frame of %d bytes has no header length: %w", len(b), ErrMalformed)
	}
	v := binary.BigEndian.Uint32(b)
	st := SerializeType(v >> serializeTypeShift)
	hdrLen := int(v & headerLenMask)
	if hdrLen > len(b)-typeLenSize {
		return nil, fmt.Errorf("remoting: decode: header length %d exceeds frame of %d bytes: %w",
			hdrLen, len(b), ErrMalformed)
	}
	header := b[typeLenSize : typeLenSize+hdrLen]
	c := &Command{Serialize: st}
	var err error
	switch st {
	case SerializeJSON:
		err = decodeJSONHeader(header, c)
	case SerializeRocketMQ:
		err = decodeBinaryHeader(header, c)
	default:
		err = fmt.Errorf("remoting: decode: unknown serialize type %d: %w", st, ErrMalformed)
	}
	if err != nil {
		return nil, err
	}
	if bodyStart := typeLenSize + hdrLen; bodyStart < len(b) {
		c.Body = b[bodyStart:len(b):len(b)]
	}
	return c, nil
}

// ReadFrame reads one length-prefixed frame from r and returns the bytes
// after the prefix, in a new buffer. A frame length (the prefix value) above
// max, or above DefaultMaxFrame if max <= 0, gives an error wrapping
// ErrFrameTooLarge before anything else is read; a length below 4 one
// wrapping ErrMalformed. The buffer grows as the frame arrives, so a length
// that is announced but not sent costs little memory. It returns io.EOF if
// r ends before the frame starts and io.ErrUnexpectedEOF if it ends inside
// it.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var prefix [lenPrefixSize]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n, err := frameLength(prefix[:], max)
	if err != nil {
		return nil, err
	}
	return readBody(r, n, nil)
}

// frameLength checks the frame length in a length prefix against max
// (DefaultMaxFrame if max <= 0) and returns it.
func frameLength(prefix []byte, max int) (int, error) {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	n := int32(binary.BigEndian.Uint32(prefix))
	if n < typeLenSize {
		return 0, fmt.Errorf("remoting: frame length %d is below %d: %w", n, typeLenSize, ErrMalformed)
	}
	if int64(n) > int64(max) {
		return 0, fmt.Errorf("remoting: frame length %d exceeds limit %d: %w", n, max, ErrFrameTooLarge)
	}
	return int(n), nil
}

// appendBinaryHeader appends c's ROCKETMQ binary header; fields are c's
// ext fields, sorted.
func appendBinaryHeader(dst []byte, c *Command, fields []extField) ([]byte, error) {
	if c.Code != int32(int16(c.Code)) {
		return dst, fmt.Errorf("remoting: encode: code %d does not fit the binary header's int16: %w",
			c.Code, ErrMalformed)
	}
	if c.Version != int32(int16(c.Version)) {
		return dst, fmt.Errorf("remoting: encode: version %d does not fit the binary header's int16: %w",
			c.Version, ErrMalformed)
	}
	if len(c.Remark) > math.MaxInt32 {
		return dst, fmt.Errorf("remoting: encode: remark of %d bytes: %w", len(c.Remark), ErrFrameTooLarge)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Code))
	dst = append(dst, byte(ParseLanguage(c.Language)))
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)

	extLenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0) // ext fields length, patched below
	w := extWriter{bin: dst}
	if c.typedHeader() {
		c.Header.encodeExt(&w)
	}
	for _, f := range fields {
		k, v := f.key, f.value
		if len(k) > math.MaxInt16 {
			return w.bin, fmt.Errorf("remoting: encode: ext field key of %d bytes exceeds %d: %w",
				len(k), math.MaxInt16, ErrMalformed)
		}
		if len(v) > maxHeaderLen {
			return w.bin, fmt.Errorf("remoting: encode: ext field %q of %d bytes: %w", k, len(v), ErrFrameTooLarge)
		}
		w.str(k, v)
	}
	dst = w.bin
	extLen := len(dst) - extLenAt - binExtLenSize
	if extLen > maxHeaderLen {
		return dst, fmt.Errorf("remoting: encode: ext fields of %d bytes: %w", extLen, ErrFrameTooLarge)
	}
	binary.BigEndian.PutUint32(dst[extLenAt:], uint32(extLen))
	return dst, nil
}

// decodeBinaryHeader decodes a ROCKETMQ binary header into c. The remark
// and ext fields are substrings of one copy of h.
func decodeBinaryHeader(h []byte, c *Command) error {
	if len(h) < binFixedSize {
		return fmt.Errorf("remoting: decode: binary header of %d bytes is shorter than %d: %w",
			len(h), binFixedSize, ErrMalformed)
	}
	c.Code = int32(int16(binary.BigEndian.Uint16(h[binOffCode:])))
	c.Language = LanguageCode(h[binOffLanguage]).String()
	c.Version = int32(int16(binary.BigEndian.Uint16(h[binOffVersion:])))
	c.Opaque = int32(binary.BigEndian.Uint32(h[binOffOpaque:]))
	c.Flag = int32(binary.BigEndian.Uint32(h[binOffFlag:]))

	// Lengths are compared as int64 so that a huge uint32 cannot wrap.
	remarkLen := int64(int32(binary.BigEndian.Uint32(h[binOffRemarkLen:])))
	if remarkLen < 0 || remarkLen > int64(len(h)-binFixedSize) {
		return fmt.Errorf("remoting: decode: binary header: remark length %d out of range: %w", remarkLen, ErrMalformed)
	}
	off := binOffRemark + int(remarkLen)
	extLen := int64(int32(binary.BigEndian.Uint32(h[off:])))
	extAt := off + binExtLenSize
	if extLen != int64(len(h)-extAt) {
		return fmt.Errorf("remoting: decode: binary header: ext fields length %d, %d bytes left: %w",
			extLen, len(h)-extAt, ErrMalformed)
	}
	n, err := countBinaryExt(h[extAt:])
	if err != nil {
		return err
	}
	if remarkLen == 0 && n == 0 {
		return nil
	}
	hs := string(h)
	c.Remark = hs[binOffRemark:off]
	if n == 0 {
		return nil
	}
	// Sized once: growing a map is a large part of decoding a header.
	c.ExtFields = make(map[string]string, n)
	for off := extAt; off < len(h); {
		keyLen := int(binary.BigEndian.Uint16(h[off:]))
		off += binKeyLenSize
		key := hs[off : off+keyLen]
		off += keyLen
		valLen := int(binary.BigEndian.Uint32(h[off:]))
		off += binValueLenSize
		c.ExtFields[key] = hs[off : off+valLen]
		off += valLen
	}
	return nil
}

// countBinaryExt checks the ext field entries in b and counts them.
func countBinaryExt(b []byte) (int, error) {
	n := 0
	for off := 0; off < len(b); n++ {
		if len(b)-off < binKeyLenSize {
			return 0, fmt.Errorf("remoting: decode: binary header: truncated ext key length at %d: %w", off, ErrMalformed)
		}
		keyLen := int(int16(binary.BigEndian.Uint16(b[off:])))
		off += binKeyLenSize
		if keyLen < 0 || keyLen > len(b)-off-binValueLenSize {
			return 0, fmt.Errorf("remoting: decode: binary header: ext key length %d out of range: %w", keyLen, ErrMalformed)
		}
		off += keyLen
		valLen := int64(int32(binary.BigEndian.Uint32(b[off:])))
		off += binValueLenSize
		if valLen < 0 || valLen > int64(len(b)-off) {
			return 0, fmt.Errorf("remoting: decode: binary header: ext field %q: value length %d out of range: %w",
				b[off-binValueLenSize-keyLen:off-binValueLenSize], valLen, ErrMalformed)
		}
		off += int(valLen)
	}
	return n, nil
}

// extField is one ext field, for sorting.
type extField struct{ key, value string }

// sortedExt appends the fields of m to buf, sorted by key, so that equal
// commands encode to equal bytes.
func sortedExt(m map[string]string, buf []extField) []extField {
	for k, v := range m {
		buf = append(buf, extField{k, v})
	}
	if len(buf) > 16 {
		slices.SortFunc(buf, func(a, b extField) int { return strings.Compare(a.key, b.key) })
		return buf
	}
	// Insertion sort: headers have about a dozen fields, and this is
	// several times faster than the generic sort for so few.
	for i := 1; i < len(buf); i++ {
		for j := i; j > 0 && buf[j].key < buf[j-1].key; j-- {
			buf[j], buf[j-1] = buf[j-1], buf[j]
		}
	}
	return buf
}
