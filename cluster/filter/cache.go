package filter

import (
	"container/list"
	"sync"
)

// DefaultCacheSize is the bound NewCache uses when given none.
const DefaultCacheSize = 1024

// Cache keeps compiled filters, and compile errors, by expression type
// and text, so that a broker compiles a subscription once rather than on
// every pull. It holds at most a fixed number of entries and forgets the
// least recently used first. It is safe for concurrent use.
type Cache struct {
	max int
	mu  struct {
		sync.Mutex
		entries map[cacheKey]*list.Element // of *cacheEntry
		lru     list.List                  // most recently used first
	}
}

type cacheKey struct{ typ, expr string }

type cacheEntry struct {
	key cacheKey
	f   Filter
	err error
}

// NewCache returns a cache of at most max entries (DefaultCacheSize if
// max <= 0).
func NewCache(max int) *Cache {
	if max <= 0 {
		max = DefaultCacheSize
	}
	c := &Cache{max: max}
	c.mu.entries = make(map[cacheKey]*list.Element)
	return c
}

// Get returns what Compile returns for the expression, compiling it on
// first use. Two goroutines asking for a new expression at once may both
// compile it; they get equivalent filters.
func (c *Cache) Get(typ, expr string) (Filter, error) {
	k := cacheKey{typ, expr}
	c.mu.Lock()
	if e, ok := c.mu.entries[k]; ok {
		c.mu.lru.MoveToFront(e)
		ce := e.Value.(*cacheEntry)
		c.mu.Unlock()
		return ce.f, ce.err
	}
	c.mu.Unlock()

	f, err := Compile(typ, expr)

	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.mu.entries[k]; ok { // compiled meanwhile
		c.mu.lru.MoveToFront(e)
		ce := e.Value.(*cacheEntry)
		return ce.f, ce.err
	}
	c.mu.entries[k] = c.mu.lru.PushFront(&cacheEntry{key: k, f: f, err: err})
	for c.mu.lru.Len() > c.max {
		old := c.mu.lru.Back()
		c.mu.lru.Remove(old)
		delete(c.mu.entries, old.Value.(*cacheEntry).key)
	}
	return f, err
}

// Len returns the number of cached expressions.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.lru.Len()
}
