package filter

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/raftmq/raftmq/message"
)

// Expression types, as RocketMQ's clients name them (case matters).
const (
	TypeTag   = "TAG"
	TypeSQL92 = "SQL92"
)

// ErrBadExpression is wrapped by every error Compile returns: an
// expression that does not compile, or an unknown expression type.
var ErrBadExpression = errors.New("filter: bad expression")

// Filter decides whether a message matches a subscription. A Filter is
// immutable and safe for concurrent use.
type Filter interface {
	// MatchTagsCode reports whether a message whose consume-queue unit
	// holds this tags code may match; false skips it without reading it.
	// SQL92 filters answer true.
	MatchTagsCode(code int64) bool
	// MatchProperties evaluates the filter on a message's properties: get
	// returns a property's value and whether the message has it. The
	// strings get returns are not kept after MatchProperties returns, so
	// they may alias a buffer the caller reuses. TAG filters answer true
	// (the client compares the tag strings, as RocketMQ's clients do).
	MatchProperties(get func(name string) (string, bool)) bool
}

// IsTagType reports whether typ names a TAG expression: "TAG" or "".
func IsTagType(typ string) bool { return typ == "" || typ == TypeTag }

// Compile compiles an expression of type TAG (or "") or SQL92.
//
// A TAG expression that matches every message, "" or "*", compiles to a
// nil Filter and no error: callers test for nil and skip filtering.
// Errors wrap ErrBadExpression and say where the expression went wrong.
func Compile(typ, expr string) (Filter, error) {
	switch {
	case IsTagType(typ):
		f, err := compileTags(expr)
		if f == nil || err != nil {
			return nil, err // not a nil *tagFilter in a non-nil Filter
		}
		return f, nil
	case typ == TypeSQL92:
		f, err := compileSQL(expr)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("%w: unknown expression type %q: want %q or %q", ErrBadExpression, typ, TypeTag, TypeSQL92)
}

// tagFilter matches the tags codes of a TAG expression's tags.
type tagFilter struct {
	codes []int32 // sorted, distinct
	text  string
}

// compileTags compiles "tag1 || tag2 || ...". As RocketMQ's broker does:
// only "" and "*" exactly match everything; each tag is trimmed of spaces
// and control characters and empty ones are dropped (so " || " matches
// nothing), and an expression of nothing but separators is refused.
func compileTags(expr string) (*tagFilter, error) {
	if expr == "" || expr == "*" {
		return nil, nil
	}
	parts := strings.Split(expr, "||")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1] // as Java's String.split
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: TAG expression %q names no tag: write tags separated by ||, or * for all", ErrBadExpression, expr)
	}
	f := &tagFilter{text: expr}
	for _, t := range parts {
		if t = javaTrim(t); t != "" {
			f.codes = append(f.codes, int32(message.TagsCode(t)))
		}
	}
	slices.Sort(f.codes)
	f.codes = slices.Compact(f.codes)
	return f, nil
}

// MatchTagsCode reports whether code is one of the tags' codes. Codes are
// compared as 32-bit hashes, as RocketMQ compares them.
func (f *tagFilter) MatchTagsCode(code int64) bool {
	c := int32(code)
	if len(f.codes) <= 8 {
		return slices.Contains(f.codes, c)
	}
	_, ok := slices.BinarySearch(f.codes, c)
	return ok
}

func (*tagFilter) MatchProperties(func(string) (string, bool)) bool { return true }

func (f *tagFilter) String() string { return f.text }

// sqlFilter is a compiled SQL92 expression.
type sqlFilter struct {
	root cond
	text string
}

func compileSQL(expr string) (*sqlFilter, error) {
	root, err := parseSQL(expr, true)
	if err != nil {
		return nil, err
	}
	return &sqlFilter{root: root, text: expr}, nil
}

func (*sqlFilter) MatchTagsCode(int64) bool { return true }

// MatchProperties reports whether the expression is true for the
// properties; false, null (unknown) and a failed evaluation do not match.
func (f *sqlFilter) MatchProperties(get func(string) (string, bool)) bool {
	return f.root.test(get) == triTrue
}

func (f *sqlFilter) String() string { return f.text }
