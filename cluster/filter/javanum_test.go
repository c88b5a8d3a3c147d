package filter

import (
	"math"
	"testing"
)

// Cases checked against Java's Integer.valueOf, Long.valueOf and
// Double.valueOf.
func TestJavaInt(t *testing.T) {
	for _, tc := range []struct {
		s    string
		bits int
		want int64
		ok   bool
	}{
		{"0", 32, 0, true}, {"-0", 32, 0, true}, {"+7", 32, 7, true}, {"007", 32, 7, true},
		{"2147483647", 32, math.MaxInt32, true}, {"-2147483648", 32, math.MinInt32, true},
		{"2147483648", 32, 0, false}, {"-2147483649", 32, 0, false},
		{"2147483648", 64, 2147483648, true},
		{"9223372036854775807", 64, math.MaxInt64, true}, {"-9223372036854775808", 64, math.MinInt64, true},
		{"9223372036854775808", 64, 0, false}, {"99999999999999999999", 64, 0, false},
		{"٣٤", 32, 34, true}, {"３", 32, 3, true}, {"-४२", 32, -42, true}, // Arabic-Indic, fullwidth, Devanagari
		{"𝟑", 32, 0, false}, // outside the BMP: two UTF-16 surrogates in Java
		{"", 32, 0, false}, {"+", 32, 0, false}, {"-", 32, 0, false}, {"+-1", 32, 0, false},
		{" 1", 32, 0, false}, {"1 ", 32, 0, false}, {"1_000", 32, 0, false}, {"1.0", 32, 0, false},
		{"0x10", 32, 0, false}, {"1e3", 32, 0, false}, {"\xff", 32, 0, false},
	} {
		got, ok := javaInt(tc.s, tc.bits)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("javaInt(%q, %d) = %d, %v; want %d, %v", tc.s, tc.bits, got, ok, tc.want, tc.ok)
		}
	}
}

func TestJavaDouble(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want float64
		ok   bool
	}{
		{"1.5", 1.5, true}, {"-1.5", -1.5, true}, {"+.5", 0.5, true}, {"5.", 5, true}, {"1e3", 1000, true},
		{"1E-3", 0.001, true}, {"1.5f", 1.5, true}, {"1.5D", 1.5, true}, {" \t1.5\x01 ", 1.5, true},
		{"0x1.8p1", 3, true}, {"-0X.8P-1d", -0.25, true}, {"1e999", math.Inf(1), true}, {"1e-999", 0, true},
		{"Infinity", math.Inf(1), true}, {"-Infinity", math.Inf(-1), true},
		{"", 0, false}, {" ", 0, false}, {".", 0, false}, {"e3", 0, false}, {"1e", 0, false}, {"1e+", 0, false},
		{"1.5ff", 0, false}, {"1.5 f", 0, false}, {"1..5", 0, false}, {"1_0", 0, false}, {"inf", 0, false},
		{"infinity", 0, false}, {"nan", 0, false}, {"NaNd", 0, false}, {"Infinityf", 0, false},
		{"0x1", 0, false}, {"0x1.8", 0, false}, {"0x_1p1", 0, false}, {"0xp1", 0, false}, {"٣", 0, false},
		{"1,5", 0, false},
	} {
		got, ok := javaDouble(tc.s)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("javaDouble(%q) = %v, %v; want %v, %v", tc.s, got, ok, tc.want, tc.ok)
		}
	}
	for _, s := range []string{"NaN", "+NaN", "-NaN", " NaN "} {
		if f, ok := javaDouble(s); !ok || !math.IsNaN(f) {
			t.Errorf("javaDouble(%q) = %v, %v; want NaN", s, f, ok)
		}
	}
}

func TestJavaBoolAndCompare(t *testing.T) {
	for s, want := range map[string]bool{"true": true, "TRUE": true, "tRuE": true, "true ": false, "yes": false, "1": false, "": false} {
		if got := javaBool(s); got != want {
			t.Errorf("javaBool(%q) = %v", s, got)
		}
	}
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		a, b float64
		want int
	}{
		{1, 2, -1}, {2, 1, 1}, {1, 1, 0}, {nan, nan, 0}, {nan, inf, 1}, {inf, nan, -1},
		{math.Copysign(0, -1), 0, -1}, {0, math.Copysign(0, -1), 1},
	} {
		if got := compareDouble(tc.a, tc.b); got != tc.want {
			t.Errorf("compareDouble(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
