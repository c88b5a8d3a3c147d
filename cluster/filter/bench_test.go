package filter

import (
	"testing"

	"github.com/raftmq/raftmq/message"
)

// benchProps is a typical message: a few user properties and the system
// ones a producer sets.
func benchProps() func(string) (string, bool) {
	return props("a", "7", "b", "x", "TAGS", "TagA", "KEYS", "order-1", "UNIQ_KEY", "7F0000010001", "WAIT", "true")
}

func BenchmarkMatchSQL(b *testing.B) {
	for _, bc := range []struct{ name, expr string }{
		{"typical", "a > 5 AND b = 'x'"},
		{"tags", "TAGS IN ('TagA', 'TagB') AND KEYS IS NOT NULL"},
		{"double", "a BETWEEN 1.5 AND 9.5 OR b CONTAINS 'y'"},
		{"missing", "c > 5 OR d = 'x'"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f, err := Compile(TypeSQL92, bc.expr)
			if err != nil {
				b.Fatal(err)
			}
			get := benchProps()
			want := f.MatchProperties(get)
			b.ReportAllocs()
			for range b.N {
				if f.MatchProperties(get) != want {
					b.Fatal("result changed")
				}
			}
		})
	}
}

// BenchmarkGetter is the cost of the property lookups alone in
// BenchmarkMatchSQL/typical, to tell the evaluator's share.
func BenchmarkGetter(b *testing.B) {
	get := benchProps()
	b.ReportAllocs()
	for range b.N {
		_, ok1 := get("a")
		_, ok2 := get("b")
		if !ok1 || !ok2 {
			b.Fatal("missing")
		}
	}
}

func BenchmarkMatchTagsCode(b *testing.B) {
	f, err := Compile(TypeTag, "TagA || TagB || TagC")
	if err != nil {
		b.Fatal(err)
	}
	code := message.TagsCode("TagC")
	b.ReportAllocs()
	for range b.N {
		if !f.MatchTagsCode(code) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkCompileSQL(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if _, err := Compile(TypeSQL92, "a > 5 AND b = 'x' OR TAGS IN ('TagA', 'TagB')"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCacheGet(b *testing.B) {
	c := NewCache(0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Get(TypeSQL92, "a > 5 AND b = 'x'"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
