package offsets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// jsonDoc is a config file prepared for encoding/json. RocketMQ writes its
// files with fastjson, which leaves integer map keys unquoted:
//
//	"offsetTable":{"TopicTest@group":{0:250,1:249
//	}}
//
// jsonDoc quotes such keys and remembers where it inserted quotes, so that
// error positions refer to the file as written.
type jsonDoc struct {
	orig     []byte
	data     []byte
	inserted []int64 // offsets in data of the quotes added, ascending
}

func newJSONDoc(orig []byte) *jsonDoc {
	d := &jsonDoc{orig: orig, data: make([]byte, 0, len(orig)+16)}
	inString, escaped, keyPos := false, false, false
	for i := 0; i < len(orig); i++ {
		c := orig[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			d.data = append(d.data, c)
			continue
		}
		if keyPos && (c == '-' || isDigit(c)) {
			if end, ok := bareIntKey(orig, i); ok {
				d.inserted = append(d.inserted, int64(len(d.data)))
				d.data = append(d.data, '"')
				d.data = append(d.data, orig[i:end]...)
				d.inserted = append(d.inserted, int64(len(d.data)))
				d.data = append(d.data, '"')
				i, keyPos = end-1, false
				continue
			}
		}
		switch {
		case c == '"':
			inString = true
			keyPos = false
		case c == '{' || c == ',':
			keyPos = true
		case !isSpace(c):
			keyPos = false
		}
		d.data = append(d.data, c)
	}
	return d
}

// bareIntKey reports whether an integer starting at b[i] is followed, after
// optional white space, by ':' and returns the integer's end.
func bareIntKey(b []byte, i int) (end int, ok bool) {
	j := i
	if b[j] == '-' {
		j++
	}
	digits := j
	for j < len(b) && isDigit(b[j]) {
		j++
	}
	if j == digits {
		return 0, false
	}
	k := j
	for k < len(b) && isSpace(b[k]) {
		k++
	}
	return j, k < len(b) && b[k] == ':'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// origOffset maps an offset in d.data back to d.orig.
func (d *jsonDoc) origOffset(off int64) int64 {
	n := sort.Search(len(d.inserted), func(i int) bool { return d.inserted[i] >= off })
	return off - int64(n)
}

// unmarshal decodes the document into v; errors carry the line and column in
// the original file and, for type errors, the field path including the table
// entry's name (which encoding/json leaves out for map keys).
func (d *jsonDoc) unmarshal(v any) error {
	err := json.Unmarshal(d.data, v)
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := d.position(syn.Offset)
		return fmt.Errorf("line %d, column %d: %w: %w", line, col, err, ErrInvalidConfig)
	case errors.As(err, &typ):
		line, col := d.position(typ.Offset)
		return fmt.Errorf("line %d, column %d: field %s: JSON %s cannot be a Go %s: %w: %w",
			line, col, d.fieldPath(typ), typ.Value, typ.Type, err, ErrInvalidConfig)
	}
	return fmt.Errorf("%w: %w", err, ErrInvalidConfig)
}

// position returns the line and column in d.orig of the byte at which
// encoding/json stopped: the last byte it read (it reports the count of
// bytes read), or the end of the file.
func (d *jsonDoc) position(off int64) (line, col int) {
	if off > 0 && off < int64(len(d.data)) {
		off--
	}
	return position(d.orig, d.origOffset(off))
}

// fieldPath renders a type error's field, naming the table entry: a field
// "topicConfigTable.readQueueNums" becomes topicConfigTable["T"].readQueueNums.
func (d *jsonDoc) fieldPath(typ *json.UnmarshalTypeError) string {
	if typ.Field == "" {
		return "(top level)"
	}
	table, rest, _ := strings.Cut(typ.Field, ".")
	name, ok := d.entryAt(table, typ.Offset)
	if !ok {
		return typ.Field
	}
	path := fmt.Sprintf("%s[%q]", table, name)
	if rest != "" {
		path += "." + rest
	}
	return path
}

// entryAt returns the key of the entry of the top-level object table whose
// value spans offset off of d.data. d.data must be valid JSON, which it is
// when json.Unmarshal reports a type error (it validates first).
func (d *jsonDoc) entryAt(table string, off int64) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(d.data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", false
		}
		if key != table {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", false
			}
			continue
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return "", false
		}
		for dec.More() {
			tok, err := dec.Token()
			name, isString := tok.(string)
			if err != nil || !isString {
				return "", false
			}
			start := dec.InputOffset()
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", false
			}
			if start < off && off <= dec.InputOffset() {
				return name, true
			}
		}
		return "", false
	}
	return "", false
}

// position converts a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}
