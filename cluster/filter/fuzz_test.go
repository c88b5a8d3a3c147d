package filter

import (
	"errors"
	"regexp"
	"strconv"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds cover every rule of the grammar and every lexical form.
var fuzzSeeds = []string{
	"a = 3 AND b <> 'x' OR NOT (c > 1.5)",
	"a >= -5 and b <= +2147483648 or c < 9223372036854775807L",
	"a BETWEEN 2 AND 10 AND b NOT BETWEEN .5 AND 5.E3",
	"a IN ('x', 'it''s') OR b NOT IN ('')",
	"a IS NULL OR b IS NOT NULL",
	"a CONTAINS 'x' AND b NOT STARTSWITH 'y' OR c ENDSWITH 'z' OR d NOT CONTAINS ''",
	"TRUE = a OR FALSE <> b OR NULL IS NULL",
	"(a = 1) = TRUE",
	"a > b",
	"a",
	"NOT a",
	"- -a = +3",
	"TAGS = 'TagA' /* c */ -- d\n AND $k_1 = 'v'",
	"a = 1 -- trailing",
	"a=1and b=2",
	"a = 'é€'",
	"a > 1e309",
	"a > 0.0",
	"a = 1 b",
	"a = 'x",
	"a between 10 and 2",
	"a = NULL",
	"",
}

var errPosition = regexp.MustCompile(`at character (\d+): `)

func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "3", "x")
	}
	f.Fuzz(func(t *testing.T, expr, a, b string) {
		if _, err := Compile(TypeTag, expr); err != nil && !errors.Is(err, ErrBadExpression) {
			t.Fatalf("TAG %q: %v does not wrap ErrBadExpression", expr, err)
		}
		flt, err := Compile(TypeSQL92, expr)
		if err != nil {
			if !errors.Is(err, ErrBadExpression) {
				t.Fatalf("%q: %v does not wrap ErrBadExpression", expr, err)
			}
			m := errPosition.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("%q: %v names no position", expr, err)
			}
			if pos, _ := strconv.Atoi(m[1]); pos < 1 || pos > utf8.RuneCountInString(expr)+1 {
				t.Fatalf("%q: %v names a position outside the expression", expr, err)
			}
			return
		}
		// What Compile accepts, RocketMQ accepts and evaluates the same.
		lenient, err := parseSQL(expr, false)
		if err != nil {
			t.Fatalf("%q compiles but not leniently: %v", expr, err)
		}
		strict := flt.(*sqlFilter).root
		for _, get := range []func(string) (string, bool){
			props(), props("a", a), props("a", a, "b", b), props("a", b, "b", a, "c", a+b),
		} {
			if s, l := strict.test(get), lenient.test(get); s != l {
				t.Fatalf("%q: strict %c, lenient %c", expr, letter(s), letter(l))
			}
			flt.MatchProperties(get)
		}
	})
}
