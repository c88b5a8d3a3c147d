package filter

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/raftmq/raftmq/commitlog/message"
)

// Expression types, as RocketMQ's clients name them.
const (
	TypeTag   = "TAG"
	TypeSQL92 = "SQL92"
)

// ErrBadExpression is wrapped by every error Compile returns.
var ErrBadExpression = errors.New("filter: bad expression")

// Filter decides whether a message matches a subscription.
type Filter interface {
	// MatchTagsCode reports whether a message whose consume-queue unit
	// holds this tags code may match; false skips it unread.
	MatchTagsCode(code int64) bool
	// MatchProperties evaluates the filter on a message's properties; get
	// returns a property's value and whether the message has it.
	MatchProperties(get func(name string) (string, bool)) bool
}

// IsTagType reports whether typ names a TAG expression ("" does).
func IsTagType(typ string) bool { return typ == "" || strings.EqualFold(typ, TypeTag) }

// Compile compiles an expression of type TAG (or "") or SQL92. A TAG
// expression that matches everything ("*" or "") compiles to nil: no
// filter. Errors wrap ErrBadExpression.
func Compile(typ, expr string) (Filter, error) {
	switch {
	case IsTagType(typ):
		return compileTags(expr), nil
	case strings.EqualFold(typ, TypeSQL92):
		return compileSQL(expr)
	}
	return nil, fmt.Errorf("%w: unknown expression type %q (want TAG or SQL92)", ErrBadExpression, typ)
}

// tagFilter matches tags by their hash codes.
type tagFilter map[int64]struct{}

func compileTags(expr string) Filter {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return nil
	}
	f := tagFilter{}
	for _, t := range strings.Split(expr, "||") {
		if t = strings.TrimSpace(t); t != "" {
			f[message.TagsCode(t)] = struct{}{}
		}
	}
	if len(f) == 0 {
		return nil
	}
	return f
}

func (f tagFilter) MatchTagsCode(code int64) bool {
	_, ok := f[code]
	return ok
}

func (tagFilter) MatchProperties(func(string) (string, bool)) bool { return true }

// Cache keeps compiled filters (and compile errors) by expression type and
// text, up to a bound, so a broker compiles a subscription once. It is
// safe for concurrent use.
type Cache struct {
	max int
	mu  sync.Mutex
	m   map[cacheKey]cached
}

type cacheKey struct{ typ, expr string }

type cached struct {
	f   Filter
	err error
}

// NewCache returns a cache of at most max entries (1024 if max <= 0).
func NewCache(max int) *Cache {
	if max <= 0 {
		max = 1024
	}
	return &Cache{max: max, m: map[cacheKey]cached{}}
}

// Get returns the compiled filter of an expression, compiling it on first
// use.
func (c *Cache) Get(typ, expr string) (Filter, error) {
	k := cacheKey{typ, expr}
	c.mu.Lock()
	v, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return v.f, v.err
	}
	f, err := Compile(typ, expr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for old := range c.m { // drop an arbitrary entry: a bound, not an LRU
			delete(c.m, old)
			break
		}
	}
	c.m[k] = cached{f, err}
	return f, err
}
