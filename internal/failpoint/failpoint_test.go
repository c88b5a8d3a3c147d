package failpoint

import (
	"errors"
	"fmt"
	"testing"
)

// A default build knows no failpoint and refuses every name; a mutant build
// turns on exactly the ones named and refuses unknown names.
func TestParse(t *testing.T) {
	if s, err := Parse(" , "); err != nil || s != (Set{}) {
		t.Fatalf("Parse of an empty list: %+v, %v", s, err)
	}
	s, err := Parse("no-dedupe, crc-unchecked")
	if !Built {
		if !errors.Is(err, ErrNotBuilt) || s != (Set{}) || len(Names()) != 0 || On(s, NoDedupe) {
			t.Fatalf("default build: Parse = %+v, %v; Names = %v", s, err, Names())
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for p := range count {
		if want := p == NoDedupe || p == CRCUnchecked; On(s, p) != want {
			t.Fatalf("Parse(no-dedupe, crc-unchecked): point %d on = %v", p, On(s, p))
		}
	}
	if _, err := Parse("no-such-mutant"); err == nil {
		t.Fatal("an unknown name was accepted")
	}
	if n := len(Names()); n != int(count) {
		t.Fatalf("%d names for %d failpoints", n, count)
	}
	for i, n := range Names() {
		s, err := Parse(n)
		if err != nil || !On(s, Point(i)) || fmt.Sprint(s) != n {
			t.Fatalf("Parse(%q) = %v, %v", n, s, err)
		}
	}
}
