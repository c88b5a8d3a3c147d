package filter

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/message"
)

// props returns a property getter over name, value pairs.
func props(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return propsOf(m)
}

// eval3 compiles an SQL92 expression as Compile does and evaluates it:
// "T", "F", "N" (null) or "X" (failed).
func eval3(t *testing.T, expr string, kv ...string) string {
	t.Helper()
	f, err := compileSQL(expr)
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	return string(letter(f.root.test(props(kv...))))
}

type evalCase struct {
	expr string
	kv   []string
	want string // T, F, N or X
}

func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, tc := range cases {
		if got := eval3(t, tc.expr, tc.kv...); got != tc.want {
			t.Errorf("%q on %q: got %s, want %s", tc.expr, tc.kv, got, tc.want)
		}
		f, _ := Compile(TypeSQL92, tc.expr)
		if match := f.MatchProperties(props(tc.kv...)); match != (tc.want == "T") {
			t.Errorf("%q on %q: MatchProperties %v, want %v", tc.expr, tc.kv, match, tc.want == "T")
		}
		if !f.MatchTagsCode(12345) {
			t.Errorf("%q: an SQL92 filter skipped a tags code", tc.expr)
		}
	}
}

// RocketMQ's own expression and parser tests, and what its broker was
// seen doing, numbered as in raftmq's research notes.
func TestSQL92RocketMQExamples(t *testing.T) {
	kv := func(s ...string) []string { return s }
	runEvalCases(t, []evalCase{
		{"a=3 and b<>4 And c>5 AND d<=4", kv("a", "3", "b", "5", "c", "6", "d", "1"), "T"}, // 1
		{"a=3 and b<>4 And c>5 AND d<=4", kv("a", "4", "b", "5", "c", "6", "d", "1"), "F"}, // 2
		{"a=3 or b<>4 Or c>5 OR d<=4", kv("a", "4", "b", "4", "c", "3", "d", "10"), "F"},   // 3
		{"a in ('3', '4', '5')", kv("a", "5"), "T"},                                        // 4
		{"a in ('3', '4', '5')", kv("a", "8"), "F"},
		{"a not in ('3', '4', '5')", kv("a", "8"), "T"}, // 5
		{"a not in ('3', '4', '5')", kv("a", "3"), "F"},
		{"a between 2 and 10", kv("a", "2"), "T"}, // 6
		{"a between 2 and 10", kv("a", "10"), "T"},
		{"a between 2 and 10", kv("a", "1"), "F"},
		{"a between 2 and 10", kv("a", "11"), "F"},
		{"a not between 2 and 10", kv("a", "1"), "T"}, // 7
		{"a not between 2 and 10", kv("a", "3"), "F"},
		{"a is null", kv("abc", "2"), "T"}, // 8
		{"a is null", kv("a", "2"), "F"},
		{"a is null OR a='hello'", nil, "T"}, // 9
		{"a is null OR a='hello'", kv("a", "hello"), "T"},
		{"a is null OR a='hello'", kv("a", "abc"), "F"},
		{"a=TRUE OR b=FALSE", kv("a", "true", "b", "false"), "T"}, // 10
		{"a=TRUE OR b=FALSE", kv("a", "false", "b", "true"), "F"},
		{"TAGS is not null and TAGS='''''tag'''''", kv("TAGS", "''tag''"), "T"}, // 11
		{"a > 3.14", kv("a", "3.1415"), "T"},                                    // 12
		{"a > 3.1E10", kv("a", "3.1415E10"), "T"},
		{"a > b", kv("a", "10", "b", "20"), "F"}, // 13
		{"a > b", kv("a", "20", "b", "10"), "T"},
		{"value contains 'x'", kv("value", "axb"), "T"}, // 14
		{"value startswith 'ax'", kv("value", "axb"), "T"},
		{"value endswith 'xb'", kv("value", "axb"), "T"},
		{"value not contains 'x'", nil, "F"},           // 15
		{"value contains ''", kv("value", "axb"), "F"}, // 16
		{"value not contains ''", kv("value", "axb"), "F"},
		{"a not in ('4','4','5') and b between 3 and 10 and c not contains 'axbc'", kv("a", "3", "b", "3", "c", "axbdc"), "T"}, // 17
		{"a > 5", kv("a", "3.5"), "X"}, // 19
		{"a > 5", kv("a", "abc"), "X"},
		{"a > 5", nil, "N"},
		{"a <> 'abc'", nil, "N"}, // 20
		{"NOT (a = 'abc')", nil, "N"},
		{"NOT a = 'abc'", kv("a", "x"), "X"},                           // 21: (NOT a) = 'abc'
		{"a = FALSE", kv("a", "hello"), "T"},                           // 22
		{"TAGS = 'TagA' AND b > 1", kv("TAGS", "TagA", "b", "2"), "T"}, // 24
		{"tags = 'TagA'", kv("TAGS", "TagA", "b", "2"), "N"},           // names are case-sensitive
		{"a >= 1 AND a <= 3 OR b", kv("b", "true"), "N"},               // 25: a bare property is never true
	})
	for _, expr := range []string{ // 18, 23
		"a and between 2 and 10", " a between 10 and 0", "a > 100000000000000000000000", "a > 0.0",
	} {
		if _, err := Compile(TypeSQL92, expr); !errors.Is(err, ErrBadExpression) {
			t.Errorf("%q: got %v, want a compile error", expr, err)
		}
	}
}

func TestSQL92Equality(t *testing.T) {
	runEvalCases(t, []evalCase{
		// Strings compare as strings, byte for byte.
		{"a = 'x'", []string{"a", "x"}, "T"},
		{"a = 'x'", []string{"a", "X"}, "F"},
		{"a = ''", []string{"a", ""}, "T"},
		{"a = '3'", []string{"a", "03"}, "F"},
		{"a = b", []string{"a", "1.0", "b", "1"}, "F"}, // two properties: strings
		{"a = b", []string{"a", "x", "b", "x"}, "T"},
		// Nulls: left null is null, right null is false, both true.
		{"a = 'x'", nil, "N"},
		{"'x' = a", nil, "F"},
		{"a = b", nil, "T"},
		{"a = b", []string{"b", "x"}, "N"},
		{"a = b", []string{"a", "x"}, "F"},
		{"a = -NULL", nil, "T"}, // a negated NULL is not the NULL literal
		// A property compared with an int32 literal reads as Java's int.
		{"a = 3", []string{"a", "3"}, "T"},
		{"a = 3", []string{"a", "03"}, "T"},
		{"a = 3", []string{"a", "+3"}, "T"},
		{"a = 3", []string{"a", "٣"}, "T"}, // any script's digits, as Java
		{"a = 3", []string{"a", "3.0"}, "X"},
		{"a = 3", []string{"a", " 3"}, "X"},
		{"a = 3", []string{"a", "2147483648"}, "X"},
		{"a = 3L", []string{"a", "3"}, "T"}, // L does not make an int64
		{"a = -3", []string{"a", "-3"}, "T"},
		// ... with an int64 literal, as Java's long.
		{"a = 2147483648", []string{"a", "2147483648"}, "T"},
		{"a = 2147483648", []string{"a", "9223372036854775808"}, "X"},
		{"a = -2147483648", []string{"a", "-2147483648"}, "T"},
		// ... with a float literal, as Java's double.
		{"a = 1.5", []string{"a", "1.5"}, "T"},
		{"a = 1.5", []string{"a", " 1.5e0d "}, "T"},
		{"a = 1.5", []string{"a", "0x1.8p0"}, "T"},
		{"a = 1.5", []string{"a", "abc"}, "X"},
		{"a = 3.0", []string{"a", "3"}, "T"},
		// ... with a boolean: true iff "true" in any case.
		{"a = TRUE", []string{"a", "True"}, "T"},
		{"a = TRUE", []string{"a", "yes"}, "F"},
		{"a = FALSE", []string{"a", "yes"}, "T"},
		// A boolean on the left of a string fails, as in RocketMQ.
		{"TRUE = a", []string{"a", "true"}, "X"},
		{"(a = 'x') = 'x'", []string{"a", "x"}, "X"},
		{"(a = 'x') = TRUE", []string{"a", "x"}, "T"},
		// Literals of different kinds.
		{"'3' = 3", nil, "T"},
		{"3 = 3.0", nil, "T"},
		{"3 = 2147483648", nil, "F"},
		{"5 = TRUE", nil, "F"},
		{"'abc' = 3", nil, "X"},
		// <> is NOT =: null and failures stay.
		{"a <> 'x'", []string{"a", "y"}, "T"},
		{"a <> 'x'", []string{"a", "x"}, "F"},
		{"a <> 'x'", nil, "N"},
		{"'x' <> a", nil, "T"},
		{"a <> 3", []string{"a", "x"}, "X"},
	})
}

func TestSQL92Ordering(t *testing.T) {
	runEvalCases(t, []evalCase{
		{"a > 5", []string{"a", "6"}, "T"},
		{"a > 5", []string{"a", "5"}, "F"},
		{"a >= 5", []string{"a", "5"}, "T"},
		{"a < 5", []string{"a", "-6"}, "T"},
		{"a <= 5", []string{"a", "6"}, "F"},
		{"5 < a", []string{"a", "6"}, "T"},
		{"a > 5", []string{"a", "10000000000"}, "X"}, // not an int32
		{"a > 5", []string{"a", " 10"}, "X"},
		{"a > 5.0", []string{"a", "3.5"}, "F"},
		{"a > 5.0", []string{"a", " 7.5 "}, "T"}, // Java's double reading trims
		{"a > 5.0", []string{"a", "NaN"}, "T"},   // NaN is above everything
		{"a > 5.0", []string{"a", "-Infinity"}, "F"},
		{"a > 2147483648", []string{"a", "2147483649"}, "T"},
		{"a > -5", []string{"a", "-4"}, "T"},
		{"a > +5", []string{"a", "6"}, "T"},
		// Two properties are read as doubles.
		{"a > b", []string{"a", "1e3", "b", "999.5"}, "T"},
		{"a <= b", []string{"a", "x", "b", "1"}, "X"},
		// Null on the left is null without looking at the right.
		{"a > 5", []string{"b", "1"}, "N"},
		{"5 > a", nil, "N"},
		{"d > -(a > b)", []string{"a", "x", "b", "y"}, "N"},
		{"-(a > b) > d", []string{"a", "x", "b", "y"}, "X"},
		{"a > -(b > 1)", []string{"a", "1", "b", "2"}, "N"}, // -TRUE is null
		{"-a > 5", []string{"a", "7"}, "N"},                 // -'7' is null
		{"a between 2 and 10", nil, "N"},
		{"a between 2 and 10", []string{"a", "x"}, "X"},
		{"a between 2.5 and 3.0", []string{"a", "2.75"}, "T"},
		{"a between 2.5 and 3", []string{"a", "2.75"}, "X"}, // a <= 3 reads a as an int
		{"a between -3 and -2", []string{"a", "-2"}, "T"},
		{"a not between 10 and 2", []string{"a", "5"}, "T"}, // reversed bounds are allowed here
		{"a not between 2 and 10", nil, "N"},
		{"a between b and c", []string{"a", "2", "b", "1", "c", "3"}, "T"},
		{"a between b and c", []string{"a", "2", "c", "3"}, "N"},
		{"a between b and c", []string{"a", "2", "b", "3"}, "F"},
	})
}

func TestSQL92SetsNullsAndStrings(t *testing.T) {
	runEvalCases(t, []evalCase{
		{"a in ('x', 'y')", []string{"a", "y"}, "T"},
		{"a in ('x', 'y')", []string{"a", "Y"}, "F"},
		{"a in ('x', '')", []string{"a", ""}, "T"},
		{"a in ('1')", []string{"a", "01"}, "F"},
		{"a in ('x')", nil, "N"},
		{"a not in ('x')", nil, "N"},
		{"a not in ('x', 'y')", []string{"a", "z"}, "T"},
		{"a in ('it''s')", []string{"a", "it's"}, "T"},
		{"a is null", nil, "T"},
		{"a is null", []string{"a", ""}, "F"},
		{"a is not null", []string{"a", ""}, "T"},
		{"a is not null", nil, "F"},
		{"(a > 5) is null", nil, "T"},
		{"(a > 5) is null", []string{"a", "x"}, "X"},
		{"NULL is null", nil, "T"},
		{"a contains 'b'", []string{"a", "abc"}, "T"},
		{"a contains 'B'", []string{"a", "abc"}, "F"},
		{"a not contains 'b'", []string{"a", "abc"}, "F"},
		{"a not contains 'z'", []string{"a", "abc"}, "T"},
		{"a startswith 'ab'", []string{"a", "abc"}, "T"},
		{"a not startswith 'ab'", []string{"a", "abc"}, "F"},
		{"a endswith 'bc'", []string{"a", "abc"}, "T"},
		{"a not endswith 'x'", []string{"a", "abc"}, "T"},
		{"a contains 'x'", nil, "F"},
		{"a not startswith 'x'", nil, "F"},
		{"a not endswith 'x'", nil, "F"},
		{"NOT (a contains 'x')", nil, "T"},
		{"a endswith ''", []string{"a", "abc"}, "F"},
		{"a not startswith ''", []string{"a", "abc"}, "F"},
		{"(a > 5) contains ''", []string{"a", "x"}, "F"}, // the operand is not evaluated
		{"(a > 5) contains 'x'", []string{"a", "x"}, "X"},
		{"3 contains '3'", nil, "F"}, // not a string
	})
}

func TestSQL92Logic(t *testing.T) {
	// p = 1 is true, f = 1 false, u = 1 null, p > z fails.
	kv := []string{"p", "1", "f", "0", "z", "z"}
	for _, tc := range []struct{ expr, want string }{
		{"p = 1 AND p = 1", "T"}, {"p = 1 AND f = 1", "F"}, {"p = 1 AND u = 1", "N"},
		{"f = 1 AND u = 1", "F"}, {"u = 1 AND f = 1", "F"}, {"u = 1 AND u = 1", "N"},
		{"p = 1 OR f = 1", "T"}, {"f = 1 OR f = 1", "F"}, {"f = 1 OR u = 1", "N"},
		{"u = 1 OR p = 1", "T"}, {"p = 1 OR u = 1", "T"}, {"u = 1 OR u = 1", "N"},
		{"NOT (p = 1)", "F"}, {"NOT (f = 1)", "T"}, {"NOT (u = 1)", "N"}, {"NOT NOT (p = 1)", "T"},
		{"NOT p = 1", "F"}, // (NOT p) = 1: a boolean is ordered below a number
		// A failure ends the evaluation unless the left side decides first.
		{"p > z", "X"}, {"NOT (p > z)", "X"}, {"(p > z) IS NULL", "X"},
		{"f = 1 AND p > z", "F"}, {"p > z AND f = 1", "X"}, {"u = 1 AND p > z", "X"},
		{"p = 1 OR p > z", "T"}, {"p > z OR p = 1", "X"}, {"f = 1 OR p > z", "X"},
		// AND binds tighter than OR; parentheses first.
		{"p = 1 OR f = 1 AND f = 1", "T"}, {"(p = 1 OR f = 1) AND f = 1", "F"},
		// Bare properties and literals as conditions.
		{"p", "F"}, {"u", "N"}, {"NOT p", "T"}, {"NOT u", "N"}, {"(p)", "F"},
		{"TRUE", "T"}, {"FALSE", "F"}, {"NULL", "N"}, {"NOT NULL", "N"},
		{"TRUE AND NULL", "N"}, {"FALSE AND NULL", "F"}, {"TRUE OR NULL", "T"}, {"FALSE OR NULL", "N"},
	} {
		if got := eval3(t, tc.expr, kv...); got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.expr, got, tc.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		at   int    // character position the error names, from 1
		msg  string // part of the message
	}{
		// Lexical errors.
		{"a = 'x", 5, "no closing quote"},
		{"a = 'it''s", 9, "no closing quote"}, // 'it' then 's
		{`a = "x"`, 5, `quoted with '`},
		{"a != 1", 3, "no != operator"},
		{"a ! 1", 3, "unexpected character '!'"},
		{"a.b = 1", 2, "cannot contain '.'"},
		{"a = 1 /* open", 7, "not closed"},
		{"a = é", 5, "unexpected character 'é'"},
		{"é = 'é'", 1, "unexpected character 'é'"},
		// Missing operands and operators.
		{"", 1, "ends where a property, a literal or ( was expected"},
		{"  /* only a comment */ ", 24, "ends where"},
		{"a =", 4, "ends where"},
		{"a > ", 5, "ends where"},
		{"a = 1 AND", 10, "ends where"},
		{"a == 1", 4, `found "="`},
		{"(a = 1", 7, "expected ), found the end"},
		{"a = 1)", 6, `unexpected ")" after a complete expression: no ( to close`},
		{"a between 1", 12, "expected AND between the bounds"},
		{"a in 'x'", 6, "expected ( after IN"},
		{"a in ('x' 'y')", 11, "expected , or )"},
		{"a in ()", 7, "expected a string in the list of IN"},
		{"a in (1, 2)", 7, "expected a string in the list of IN, found number 1"},
		{"a contains x", 12, "expected a string after CONTAINS, found property x"},
		{"a IS 3", 6, "expected NULL or NOT NULL after IS"},
		{"a IS NOT 3", 10, "expected NULL or NOT NULL after IS"},
		{"a NOT 3", 3, "NOT here must be followed by"},
		{"a = 1 b = 2", 7, `unexpected property b after a complete expression (a missing AND or OR?)`},
		{"a = 1 -- c\n b", 13, "unexpected property b"},
		// Bad numbers.
		{"a > 9223372036854775808", 5, "integer 9223372036854775808 is out of range"},
		{"a > 1e309", 5, "number 1e309 is out of range"},
		{"a > 0.0", 5, "zero or too small"},
		{"a > .0", 5, "zero or too small"},
		{"a > 1e-400", 5, "zero or too small"},
		{"a = 007", 6, "unexpected number 0 after a complete expression"},
		{"a = 1.2.3", 8, "unexpected number .3"},
		{"a = 0L", 6, "unexpected property L"},
		// Expressions RocketMQ refuses as it builds them.
		{"3", 1, "this is a value, not a condition"},
		{"a = 1 AND 'x'", 11, "this is a value, not a condition"},
		{"NOT -a", 5, "this is a value, not a condition"},
		{"a = NULL", 3, "use IS NULL"},
		{"NULL <> a", 6, "use IS NULL"},
		{"TRUE = 'x'", 6, "a boolean cannot be compared with a non-boolean literal"},
		{"a > 'x'", 3, `">" compares numbers only`},
		{"a < TRUE", 3, `"<" compares numbers only`},
		{"a >= NULL", 3, "compares numbers only"},
		{"(a = 1) > 1", 9, "cannot order the result of a condition"},
		{"a between 'x' and 'z'", 3, "BETWEEN compares numbers only"},
		{"a between 10 and 2", 3, "lower bound of BETWEEN is above its upper bound"},
		{"a between 2.5 and 2", 3, "lower bound of BETWEEN is above"},
		{"a between NULL and 2", 3, "cannot be NULL"},
		{"NOT a IN ('x')", 7, "IN must follow a property name"},
		{"'x' in ('x')", 5, "IN must follow a property name"},
	} {
		f, err := Compile(TypeSQL92, tc.expr)
		if err == nil {
			t.Errorf("%q compiled to %v, want an error", tc.expr, f)
			continue
		}
		if !errors.Is(err, ErrBadExpression) {
			t.Errorf("%q: %v does not wrap ErrBadExpression", tc.expr, err)
		}
		want := "at character " + strconv.Itoa(tc.at) + ": "
		if msg := err.Error(); !strings.Contains(msg, want) || !strings.Contains(msg, tc.msg) {
			t.Errorf("%q: got %q, want %q and %q", tc.expr, msg, want, tc.msg)
		}
	}
}

func TestCompileLexing(t *testing.T) {
	runEvalCases(t, []evalCase{
		// The longest token wins, so a number may touch a keyword.
		{"a=1and b=2", []string{"a", "1", "b", "2"}, "T"},
		{"a=1.5or b=2", []string{"a", "0", "b", "2"}, "T"},
		{"a IN('x')AND(b='y')", []string{"a", "x", "b", "y"}, "T"},
		{"A = 1 aNd b = 2", []string{"A", "1", "b", "2"}, "T"}, // keywords in any case, names as written
		{"$x_1 = 'v'", []string{"$x_1", "v"}, "T"},
		// Comments; "--" needs a line break, or ends the text.
		{"a = 1 /* x */ AND /**/ b = 2", []string{"a", "1", "b", "2"}, "T"},
		{"a = 1 -- x\nAND b = 2\r", []string{"a", "1", "b", "2"}, "T"},
		{"a = 1 -- a trailing comment", []string{"a", "1"}, "T"},
		{"a = 1 -- it's", []string{"a", "1"}, "T"},
		{"a = --1", []string{"a", "1"}, "T"}, // no line break: two minus signs
		{"a = - -1", []string{"a", "1"}, "T"},
		// Strings: '' is a quote, anything else is kept as is.
		{"a = ''''", []string{"a", "'"}, "T"},
		{"a = 'x\ny -- /*'", []string{"a", "x\ny -- /*"}, "T"},
		{"a = 'é€'", []string{"a", "é€"}, "T"},
		// Numbers.
		{"a = 5.", []string{"a", "5"}, "T"},
		{"a = .5", []string{"a", "0.5"}, "T"},
		{"a = 5E1", []string{"a", "50"}, "T"},
		{"a = 5.e+1", []string{"a", "50"}, "T"},
		{"a = 4.9E-324", []string{"a", "4.9E-324"}, "T"},
		{"a = 0", []string{"a", "-0"}, "T"},
		{"a = 9223372036854775807L", []string{"a", "9223372036854775807"}, "T"},
	})
}

func TestCompileTypes(t *testing.T) {
	for _, typ := range []string{"", TypeTag} {
		if f, err := Compile(typ, "a"); err != nil || f == nil || !f.MatchProperties(props("x", "y")) {
			t.Errorf("type %q: %v, %v: want a TAG filter", typ, f, err)
		}
	}
	if f, err := Compile(TypeSQL92, "a = 'x'"); err != nil || f.MatchTagsCode(0) != true || !f.MatchProperties(props("a", "x")) {
		t.Errorf("SQL92: %v, %v", f, err)
	}
	for _, typ := range []string{"sql92", "tag", "XPATH", " SQL92"} {
		_, err := Compile(typ, "a = 'x'")
		if !errors.Is(err, ErrBadExpression) || !strings.Contains(err.Error(), "unknown expression type") {
			t.Errorf("type %q: %v, want an unknown-type error", typ, err)
		}
	}
}

func TestTagFilter(t *testing.T) {
	code := func(tag string) int64 { return message.TagsCode(tag) }
	for _, all := range []string{"", "*"} {
		if f, err := Compile(TypeTag, all); err != nil || f != nil {
			t.Errorf("%q: got %v, %v, want a nil Filter (everything)", all, f, err)
		}
	}
	f, err := Compile(TypeTag, "TagA || TagB||TagC\t")
	if err != nil || f == nil {
		t.Fatalf("compile: %v, %v", f, err)
	}
	for tag, want := range map[string]bool{"TagA": true, "TagB": true, "TagC": true, "TagD": false, "": false, "taga": false} {
		if got := f.MatchTagsCode(code(tag)); got != want {
			t.Errorf("tag %q: got %v, want %v", tag, got, want)
		}
	}
	// RocketMQ compares the low 32 bits of a consume-queue code.
	if !f.MatchTagsCode(code("TagA") + 1<<32) {
		t.Error("a code is compared on more than its 32-bit hash")
	}
	if !f.MatchProperties(props()) {
		t.Error("a TAG filter must leave properties to the client")
	}
	// Only "" and "*" exactly mean everything, as RocketMQ's broker reads them.
	star, _ := Compile(TypeTag, " * ")
	if star == nil || !star.MatchTagsCode(code("*")) || star.MatchTagsCode(code("TagA")) {
		t.Errorf(`" * " must match the tag "*" only, got %v`, star)
	}
	none, err := Compile(TypeTag, " || ")
	if err != nil || none == nil || none.MatchTagsCode(code("")) || none.MatchTagsCode(code(" ")) {
		t.Errorf(`" || " must match nothing, got %v, %v`, none, err)
	}
	for _, bad := range []string{"||", "||||"} {
		if _, err := Compile(TypeTag, bad); !errors.Is(err, ErrBadExpression) {
			t.Errorf("%q: got %v, want an error", bad, err)
		}
	}
	// Many tags.
	var tags []string
	for i := range 40 {
		tags = append(tags, "t"+strconv.Itoa(i))
	}
	many, _ := Compile(TypeTag, strings.Join(tags, "||"))
	for _, tag := range tags {
		if !many.MatchTagsCode(code(tag)) {
			t.Errorf("tag %s of 40 rejected", tag)
		}
	}
	if many.MatchTagsCode(code("t40")) {
		t.Error("an unsubscribed tag accepted")
	}
}

func TestNestingLimit(t *testing.T) {
	for _, tc := range []struct {
		open, close string
	}{{"(", ")"}, {"NOT ", ""}, {"- ", ""}} {
		ok := strings.Repeat(tc.open, maxDepth) + "a" + strings.Repeat(tc.close, maxDepth)
		if tc.open != "(" {
			ok = "(" + strings.Repeat(tc.open, maxDepth-1) + "a) IS NULL"
		}
		if _, err := Compile(TypeSQL92, ok); err != nil {
			t.Errorf("%d levels of %q: %v", maxDepth, tc.open, err)
		}
		deep := strings.Repeat(tc.open, 100000) + "a" + strings.Repeat(tc.close, 100000)
		if _, err := Compile(TypeSQL92, deep); !errors.Is(err, ErrBadExpression) || !strings.Contains(err.Error(), "more than 500 deep") {
			t.Errorf("100000 levels of %q: %v", tc.open, err)
		}
	}
}

// x BETWEEN a AND b is x >= a AND x <= b, but x is evaluated once: nested
// BETWEENs would otherwise cost time exponential in their depth.
func TestBetweenEvaluatesOnce(t *testing.T) {
	e := "a"
	for range 30 {
		e = "-(" + e + " BETWEEN 1 AND 2)"
	}
	f, err := Compile(TypeSQL92, "("+e+") IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	match := f.MatchProperties(func(name string) (string, bool) { calls++; return "1", true })
	if !match || calls != 1 {
		t.Errorf("match %v after %d property lookups, want true after 1", match, calls)
	}
}
