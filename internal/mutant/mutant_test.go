package mutant

import (
	"errors"
	"testing"
)

// A default build knows no mutant and refuses every name; a mutant build
// turns on exactly the ones named and refuses unknown names.
func TestParse(t *testing.T) {
	if s, err := Parse(" , "); err != nil || s.Any() {
		t.Fatalf("Parse of an empty list: %+v, %v", s, err)
	}
	s, err := Parse("no-dedupe, crc-unchecked")
	if !Enabled {
		if !errors.Is(err, ErrNotBuilt) || s.Any() || len(Names()) != 0 {
			t.Fatalf("default build: Parse = %+v, %v; Names = %v", s, err, Names())
		}
		return
	}
	if err != nil || s != (Set{NoDedupe: true, CRCUnchecked: true}) {
		t.Fatalf("Parse = %+v, %v", s, err)
	}
	if _, err := Parse("no-such-mutant"); err == nil {
		t.Fatal("an unknown name was accepted")
	}
	for _, n := range Names() {
		if s, err := Parse(n); err != nil || !s.Any() {
			t.Fatalf("Parse(%q) = %+v, %v", n, s, err)
		}
	}
}
