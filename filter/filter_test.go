package filter

import (
	"errors"
	"testing"

	"github.com/raftmq/raftmq/commitlog/message"
)

func props(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// RocketMQ's own expression tests and what its broker was seen doing,
// one row per case.
func TestSQL92Semantics(t *testing.T) {
	for _, tc := range []struct {
		expr  string
		props []string
		want  bool
	}{
		{"a=3 and b<>4 And c>5 AND d<=4", []string{"a", "3", "b", "5", "c", "6", "d", "1"}, true},
		{"a=3 and b<>4 And c>5 AND d<=4", []string{"a", "4", "b", "5", "c", "6", "d", "1"}, false},
		{"a=3 or b<>4 Or c>5 OR d<=4", []string{"a", "4", "b", "4", "c", "3", "d", "10"}, false},
		{"a in ('3', '4', '5')", []string{"a", "5"}, true},
		{"a in ('3', '4', '5')", []string{"a", "8"}, false},
		{"a not in ('3', '4', '5')", []string{"a", "8"}, true},
		{"a not in ('3', '4', '5')", []string{"a", "3"}, false},
		{"a not in ('3', '4', '5')", nil, false}, // null stays null
		{"a between 2 and 10", []string{"a", "2"}, true},
		{"a between 2 and 10", []string{"a", "10"}, true},
		{"a between 2 and 10", []string{"a", "1"}, false},
		{"a between 2 and 10", []string{"a", "11"}, false},
		{"a not between 2 and 10", []string{"a", "1"}, true},
		{"a not between 2 and 10", []string{"a", "3"}, false},
		{"a is null", []string{"abc", "2"}, true},
		{"a is null", []string{"a", "2"}, false},
		{"a is not null", []string{"a", ""}, true}, // empty is present
		{"a is null OR a='hello'", nil, true},
		{"a is null OR a='hello'", []string{"a", "hello"}, true},
		{"a is null OR a='hello'", []string{"a", "abc"}, false},
		{"a=TRUE OR b=FALSE", []string{"a", "true", "b", "false"}, true},
		{"a=TRUE OR b=FALSE", []string{"a", "false", "b", "true"}, false},
		{"TAGS is not null and TAGS='''''tag'''''", []string{"TAGS", "''tag''"}, true},
		{"a > 3.14", []string{"a", "3.1415"}, true},
		{"a > 3.1E10", []string{"a", "3.1415E10"}, true},
		{"a > b", []string{"a", "10", "b", "20"}, false},
		{"a > b", []string{"a", "20", "b", "10"}, true},
		{"value contains 'x'", []string{"value", "axb"}, true},
		{"value startswith 'ax'", []string{"value", "axb"}, true},
		{"value endswith 'xb'", []string{"value", "axb"}, true},
		{"value not contains 'x'", nil, false},
		{"NOT (value contains 'x')", nil, true},
		{"value contains ''", []string{"value", "axb"}, false},
		{"value not contains ''", []string{"value", "axb"}, false},
		{"a not in ('4','4','5') and b between 3 and 10 and c not contains 'axbc'", []string{"a", "3", "b", "3", "c", "axbdc"}, true},
		{"a > 5", []string{"a", "3.5"}, false},         // conversion error
		{"a > 5", []string{"a", "10000000000"}, false}, // beyond int32
		{"a > 5", []string{"a", "abc"}, false},
		{"a > 5", []string{"a", " 10"}, false},
		{"a > 5", nil, false},
		{"a > 5.0", []string{"a", "3.5"}, false},
		{"a > 5.0", []string{"a", " 7.5 "}, true}, // Double.valueOf trims
		{"a = 3", []string{"a", "3"}, true},
		{"a = 3", []string{"a", "03"}, true},
		{"a = 3", []string{"a", "3.0"}, false},
		{"a = '3'", []string{"a", "3"}, true},
		{"a = b", []string{"a", "1.0", "b", "1"}, false},
		{"a <> 'abc'", nil, false},
		{"NOT (a = 'abc')", nil, false},
		{"NOT a = 'abc'", []string{"a", "x"}, false}, // (NOT a) = 'abc': a cast error
		{"a = FALSE", []string{"a", "hello"}, true},
		{"TAGS = 'TagA' AND b > 1", []string{"TAGS", "TagA", "b", "2"}, true},
		{"tags = 'TagA'", []string{"TAGS", "TagA"}, false}, // names are case-sensitive
		{"a >= 1 AND a <= 3 OR b", []string{"b", "true"}, false},
		{"b", []string{"b", "true"}, false},
		{"a = 1 or b = 2 and c = 3", []string{"a", "1"}, true},
		{"(a = 1 or b = 2) and c = 3", []string{"a", "1"}, false},
		{"a > -5 AND a < +5", []string{"a", "0"}, true},
		{"a = 9223372036854775807", []string{"a", "9223372036854775807"}, true},
		{"a > 2147483647", []string{"a", "2147483648"}, false}, // the literal is an int32: the value does not convert
		{"a > 2147483648", []string{"a", "2147483649"}, true},  // an int64 literal
		{"a = 1 /* comment */ -- tail\n", []string{"a", "1"}, true},
		{"TRUE", nil, true},
		{"FALSE OR a = 'x'", []string{"a", "x"}, true},
		{"-a = 1", []string{"a", "-1"}, false}, // -property is null
		{"a IS NULL AND b IS NOT NULL", []string{"b", "1"}, true},
	} {
		f, err := Compile(TypeSQL92, tc.expr)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		if got := f.MatchProperties(props(tc.props...)); got != tc.want {
			t.Errorf("%q on %v: got %v, want %v", tc.expr, tc.props, got, tc.want)
		}
		if !f.MatchTagsCode(12345) {
			t.Errorf("%q: an SQL92 filter must not skip by tags code", tc.expr)
		}
	}
}

func TestSQL92CompileErrors(t *testing.T) {
	for _, expr := range []string{
		"", "3", "'x'", "a and between 2 and 10", "a between 10 and 0", "a > 100000000000000000000000",
		"a > 0.0", "a > .0", "a = NULL", "NULL <> a", "a > 'x'", "a between 'x' and 'z'", "a IN (1, 2)",
		"NOT a IN ('x')", "'x' IN ('x')", "a = \"x\"", "a = 'x", "a.b = 1", "a = 1 b", "a =", "(a = 1",
		"a IS 3", "a NOT 3", "a > (b = 1)", "TRUE = 3", "a = 1 -- no line end", "a /* open", "a = 007",
		"AND = 1", "a ! 1", "a = 1L2",
	} {
		f, err := Compile(TypeSQL92, expr)
		if err == nil {
			t.Errorf("%q compiled (%v), want an error", expr, f)
			continue
		}
		if !errors.Is(err, ErrBadExpression) {
			t.Errorf("%q: %v does not wrap ErrBadExpression", expr, err)
		}
	}
	if _, err := Compile("XPATH", "a"); !errors.Is(err, ErrBadExpression) {
		t.Errorf("unknown type: %v", err)
	}
}

func TestTagFilter(t *testing.T) {
	for _, all := range []string{"", "*", " * ", "||"} {
		if f, err := Compile("TAG", all); err != nil || f != nil {
			t.Errorf("%q: want no filter, got %v %v", all, f, err)
		}
	}
	f, err := Compile("", "TagA || TagB")
	if err != nil || f == nil {
		t.Fatalf("compile: %v", err)
	}
	if !f.MatchTagsCode(message.TagsCode("TagA")) || !f.MatchTagsCode(message.TagsCode("TagB")) {
		t.Error("a subscribed tag is rejected")
	}
	if f.MatchTagsCode(message.TagsCode("TagC")) {
		t.Error("an unsubscribed tag is accepted")
	}
	if !f.MatchProperties(props()) {
		t.Error("a TAG filter must leave properties to the client")
	}
}

func TestCacheCompilesOnce(t *testing.T) {
	c := NewCache(2)
	a, err := c.Get(TypeSQL92, "a = 1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Get(TypeSQL92, "a = 1")
	if a != b {
		t.Error("the same expression compiled twice")
	}
	if _, err := c.Get(TypeSQL92, "a ="); err == nil {
		t.Error("a bad expression compiled")
	}
	if _, err := c.Get(TypeSQL92, "a ="); !errors.Is(err, ErrBadExpression) {
		t.Error("a cached error lost its kind")
	}
	c.Get(TypeSQL92, "b = 1")
	if len(c.m) > 2 {
		t.Errorf("cache holds %d entries, bound 2", len(c.m))
	}
}

func BenchmarkMatchSQL(b *testing.B) {
	f, err := Compile(TypeSQL92, "a > 5 AND b = 'x'")
	if err != nil {
		b.Fatal(err)
	}
	get := props("a", "7", "b", "x", "TAGS", "t")
	b.ReportAllocs()
	for range b.N {
		if !f.MatchProperties(get) {
			b.Fatal("no match")
		}
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range []string{"a=3 and b<>4", "a in ('3','4')", "a between 2 and 10", "a is not null or b contains 'x'",
		"NOT (a > 1.5E3)", "-a = +3L", "TAGS = '''x'''", "/* c */ a = 1 -- d\n"} {
		f.Add(s, "3", "x")
	}
	f.Fuzz(func(t *testing.T, expr, a, b string) {
		flt, err := Compile(TypeSQL92, expr)
		if err != nil {
			if !errors.Is(err, ErrBadExpression) {
				t.Fatalf("%q: %v does not wrap ErrBadExpression", expr, err)
			}
			return
		}
		flt.MatchProperties(props("a", a, "b", b))
	})
}
