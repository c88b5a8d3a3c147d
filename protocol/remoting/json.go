package remoting

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON header is encoded and decoded by hand: it is on the path of
// every request, and encoding/json's reflection costs several times more
// than the rest of the frame codec. The decoder accepts standard JSON (RFC
// 8259) with the leniencies the package documentation lists; like
// encoding/json it replaces invalid UTF-8 and lone surrogates with U+FFFD,
// and the encoder does the same, so a decoded header re-encodes losslessly.

// maxJSONDepth bounds the nesting of values skipped under unknown keys.
const maxJSONDepth = 64

// appendJSONHeader appends c's header as a compact JSON object, keys in the
// Go client's order; fields are c's ext fields, sorted.
func appendJSONHeader(dst []byte, c *Command, fields []extField) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	dst = appendJSONString(dst, c.Language)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"remark":`...)
	dst = appendJSONString(dst, c.Remark)
	dst = append(dst, `,"extFields":{`...)
	for i, f := range fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, f.key)
		dst = append(dst, ':')
		dst = appendJSONString(dst, f.value)
	}
	return append(dst, "}}"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Control characters, '"' and
// '\\' are escaped; invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' && b < utf8.RuneSelf {
			i++
			continue
		}
		if b >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// jsonScanner reads one JSON value from b. Every method leaves i after
// what it read. str holds the same bytes as b: strings without escapes are
// returned as substrings of it, so decoding a header allocates one string
// for all its keys and values instead of one each.
type jsonScanner struct {
	b   []byte
	str string
	i   int
}

func newJSONScanner(b []byte) *jsonScanner {
	return &jsonScanner{b: b, str: string(b)}
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("remoting: decode: JSON header at byte %d: %s: %w", s.i, fmt.Sprintf(format, args...), ErrMalformed)
}

func (s *jsonScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, or 0 at the
// end.
func (s *jsonScanner) peek() byte {
	s.skipSpace()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *jsonScanner) expect(c byte) error {
	if s.peek() != c {
		return s.errorf("want %q", c)
	}
	s.i++
	return nil
}

// literal consumes word (true, false, null) if it comes next.
func (s *jsonScanner) literal(word string) bool {
	if strings.HasPrefix(s.str[s.i:], word) {
		s.i += len(word)
		return true
	}
	return false
}

// null consumes a null if it comes next.
func (s *jsonScanner) null() bool {
	return s.peek() == 'n' && s.literal("null")
}

// object calls field for each key of the object that comes next, with the
// scanner before the key's value; field must consume the value.
func (s *jsonScanner) object(field func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.errorf("want an object key")
		}
		key, err := s.string()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		s.skipSpace()
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errorf("want ',' or '}'")
		}
	}
}

// string reads a string. Without escapes and invalid UTF-8, the result is
// a substring of str.
func (s *jsonScanner) string() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.i
	q := bytes.IndexByte(s.b[start:], '"')
	if q < 0 {
		return "", s.errorf("unterminated string")
	}
	span := s.b[start : start+q]
	if bytes.IndexByte(span, '\\') >= 0 {
		return s.unescape(start) // the quote found may be escaped
	}
	ascii := true
	for _, c := range span {
		if c < 0x20 {
			return s.unescape(start) // reports the control character
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if !ascii && !utf8.Valid(span) {
		return s.unescape(start)
	}
	s.i = start + q + 1
	return s.str[start : start+q], nil
}

// unescape decodes the string that starts at start (after its opening
// quote), handling escapes and invalid UTF-8.
func (s *jsonScanner) unescape(start int) (string, error) {
	s.i = start
	var out strings.Builder
	out.Grow(32)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return out.String(), nil
		case c < 0x20:
			return "", s.errorf("control character in string")
		case c == '\\':
			r, err := s.escape()
			if err != nil {
				return "", err
			}
			out.WriteRune(r)
		case c < utf8.RuneSelf:
			out.WriteByte(c)
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			out.WriteRune(r) // RuneError for invalid bytes
			s.i += size
		}
	}
	return "", s.errorf("unterminated string")
}

// escape decodes the escape sequence at i, including a \uXXXX\uXXXX
// surrogate pair.
func (s *jsonScanner) escape() (rune, error) {
	if s.i+1 >= len(s.b) {
		return 0, s.errorf("truncated escape")
	}
	c := s.b[s.i+1]
	s.i += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
	default:
		return 0, s.errorf("bad escape \\%c", c)
	}
	r, ok := s.hex4()
	if !ok {
		return 0, s.errorf("bad \\u escape")
	}
	if !utf16.IsSurrogate(r) {
		return r, nil
	}
	if len(s.b)-s.i >= 6 && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
		save := s.i
		s.i += 2
		if r2, ok := s.hex4(); ok {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, nil
			}
		}
		s.i = save // not a valid pair: the second escape stands alone
	}
	return utf8.RuneError, nil
}

// hex4 reads four hex digits.
func (s *jsonScanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	s.i += 4
	return r, true
}

// number reads a JSON number and returns its text.
func (s *jsonScanner) number() (string, error) {
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return "", s.errorf("bad number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return "", s.errorf("bad number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return "", s.errorf("bad number")
		}
	}
	return s.str[start:s.i], nil
}

func (s *jsonScanner) digits() int {
	n := 0
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// int32Value reads an integer that fits int32, or null as 0.
func (s *jsonScanner) int32Value(field string) (int32, error) {
	if s.null() {
		return 0, nil
	}
	text, err := s.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		return 0, s.errorf("%s: %q is not an int32", field, text)
	}
	return int32(v), nil
}

// stringValue reads a string, or null as "".
func (s *jsonScanner) stringValue() (string, error) {
	if s.null() {
		return "", nil
	}
	return s.string()
}

// skipValue skips any JSON value.
func (s *jsonScanner) skipValue(depth int) error {
	if depth > maxJSONDepth {
		return s.errorf("nested deeper than %d", maxJSONDepth)
	}
	switch s.peek() {
	case '"':
		_, err := s.string()
		return err
	case '{':
		return s.object(func(string) error { return s.skipValue(depth + 1) })
	case '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			default:
				return s.errorf("want ',' or ']'")
			}
		}
	case 't':
		if s.literal("true") {
			return nil
		}
	case 'f':
		if s.literal("false") {
			return nil
		}
	case 'n':
		if s.literal("null") {
			return nil
		}
	default:
		_, err := s.number()
		return err
	}
	return s.errorf("bad literal")
}

// scalarText reads a string, number, true or false and returns its text (a
// string's decoded content); ok is false for null.
func (s *jsonScanner) scalarText() (text string, ok bool, err error) {
	switch s.peek() {
	case '"':
		v, err := s.string()
		return v, err == nil, err
	case 't':
		if s.literal("true") {
			return "true", true, nil
		}
	case 'f':
		if s.literal("false") {
			return "false", true, nil
		}
	case 'n':
		if s.literal("null") {
			return "", false, nil
		}
	default:
		v, err := s.number()
		return v, err == nil, err
	}
	return "", false, s.errorf("bad literal")
}

// decodeJSONHeader decodes a JSON header into c.
func decodeJSONHeader(h []byte, c *Command) error {
	s := newJSONScanner(h)
	err := s.object(func(key string) error {
		var err error
		switch key {
		case "code":
			c.Code, err = s.int32Value("code")
		case "language":
			c.Language, err = s.language()
		case "version":
			c.Version, err = s.int32Value("version")
		case "opaque":
			c.Opaque, err = s.int32Value("opaque")
		case "flag":
			c.Flag, err = s.int32Value("flag")
		case "remark":
			c.Remark, err = s.stringValue()
		case "extFields":
			c.ExtFields, err = s.extFields()
		default:
			err = s.skipValue(0)
		}
		return err
	})
	if err != nil {
		return err
	}
	if s.peek() != 0 {
		return s.errorf("data after the header object")
	}
	return nil
}

// language reads the language: a name, null, or (leniently) a LanguageCode
// number.
func (s *jsonScanner) language() (string, error) {
	switch s.peek() {
	case '"':
		return s.string()
	case 'n':
		if s.null() {
			return "", nil
		}
		return "", s.errorf("bad literal")
	}
	text, err := s.number()
	if err != nil {
		return "", err
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil || v < 0 || v > math.MaxUint8 {
		return LanguageOther.String(), nil
	}
	return LanguageCode(v).String(), nil
}

// extFields reads the ext fields object, or null. Values may be strings or,
// leniently, numbers and booleans (kept as their text); null values are
// dropped, as Java drops null fields. It returns nil for no fields.
func (s *jsonScanner) extFields() (map[string]string, error) {
	if s.null() {
		return nil, nil
	}
	// Count the members first, so that the map is sized once: growing it
	// costs more than the extra scan.
	save, n := s.i, 0
	if err := s.object(func(string) error { n++; return s.skipValue(0) }); err != nil {
		return nil, err
	}
	s.i = save
	var ext map[string]string
	err := s.object(func(key string) error {
		text, ok, err := s.scalarText()
		if err != nil || !ok {
			return err
		}
		if ext == nil {
			ext = make(map[string]string, n)
		}
		ext[key] = text
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ext, nil
}
