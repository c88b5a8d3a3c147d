package filter

import (
	"errors"
	"strconv"
	"sync"
	"testing"
)

func TestCacheCompilesOnce(t *testing.T) {
	c := NewCache(4)
	a, err := c.Get(TypeSQL92, "a = 1")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Get(TypeSQL92, "a = 1"); b != a {
		t.Error("the same expression compiled twice")
	}
	if b, _ := c.Get(TypeTag, "a = 1"); b == a {
		t.Error("a TAG expression shares the entry of an SQL92 one")
	}
	_, err1 := c.Get(TypeSQL92, "a =")
	_, err2 := c.Get(TypeSQL92, "a =")
	if !errors.Is(err1, ErrBadExpression) || err1 != err2 {
		t.Errorf("errors not cached: %v, %v", err1, err2)
	}
	if f, err := c.Get(TypeTag, "*"); f != nil || err != nil {
		t.Errorf("match-all TAG: %v, %v, want nil, nil", f, err)
	}
	if n := c.Len(); n != 4 {
		t.Errorf("Len %d, want 4", n)
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := NewCache(2)
	a, _ := c.Get(TypeSQL92, "a = 1")
	c.Get(TypeSQL92, "b = 1")
	c.Get(TypeSQL92, "a = 1") // a is now the most recent
	c.Get(TypeSQL92, "c = 1") // evicts b
	if n := c.Len(); n != 2 {
		t.Fatalf("Len %d, want 2", n)
	}
	if again, _ := c.Get(TypeSQL92, "a = 1"); again != a {
		t.Error("the most recently used entry was evicted")
	}
	if _, ok := c.mu.entries[cacheKey{TypeSQL92, "b = 1"}]; ok {
		t.Error("the least recently used entry was kept")
	}
	if d := NewCache(0); d.max != DefaultCacheSize {
		t.Errorf("NewCache(0) bound %d", d.max)
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := NewCache(8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				expr := "a = " + strconv.Itoa((g+i)%16)
				f, err := c.Get(TypeSQL92, expr)
				if err != nil || !f.MatchProperties(props("a", strconv.Itoa((g+i)%16))) {
					t.Errorf("%q: %v, %v", expr, f, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := c.Len(); n > 8 {
		t.Errorf("Len %d above the bound 8", n)
	}
}
