package filter

import (
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// RocketMQ's broker reads property strings with Java's Integer.valueOf,
// Long.valueOf, Double.valueOf and Boolean.valueOf; these functions accept
// exactly what those accept, so that a filter matches the same messages.

// javaInt reads s as a signed decimal integer of the given bit size (32 or
// 64): an optional + or -, then one or more decimal digits of any script
// in the Basic Multilingual Plane ("٣" is 3, as Java's Character.digit
// says), nothing else (no spaces, no underscores).
func javaInt(s string, bits int) (int64, bool) {
	if s == "" {
		return 0, false
	}
	neg := false
	i := 0
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		i = 1
		if len(s) == 1 {
			return 0, false
		}
	}
	// Accumulate negatively, as -MinInt does not fit.
	limit := -int64(math.MaxInt64)
	if bits == 32 {
		limit = -math.MaxInt32
	}
	if neg {
		limit-- // MinInt
	}
	multmin := limit / 10
	var n int64
	for i < len(s) {
		var d int
		if c := s[i]; isDigit(c) {
			d, i = int(c-'0'), i+1
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			if d = javaDigit(r); d < 0 {
				return 0, false
			}
			i += size
		}
		if n < multmin {
			return 0, false
		}
		n *= 10
		if n < limit+int64(d) {
			return 0, false
		}
		n -= int64(d)
	}
	if neg {
		return n, true
	}
	return -n, true
}

// javaDigit returns the value of a decimal digit of any script, or -1.
// Java reads strings as UTF-16, so a digit outside the Basic Multilingual
// Plane is two surrogates, neither a digit.
func javaDigit(r rune) int {
	if r > 0xFFFF || !unicode.Is(unicode.Nd, r) {
		return -1
	}
	// Each script's digits 0..9 are ten consecutive code points; find
	// the run's zero.
	zero := r
	for zero > 0 && r-zero < 9 && unicode.Is(unicode.Nd, zero-1) {
		zero--
	}
	return int(r - zero)
}

// javaBool is Java's Boolean.valueOf: "true" in any case is true,
// anything else false.
func javaBool(s string) bool {
	if len(s) != 4 {
		return false
	}
	return s[0]|0x20 == 't' && s[1]|0x20 == 'r' && s[2]|0x20 == 'u' && s[3]|0x20 == 'e'
}

// javaDouble reads s as Java's Double.valueOf does: surrounding control
// characters and spaces are ignored; then an optional sign and "NaN",
// "Infinity", a decimal number (5, 5., .5, 5.5e-3) or a hexadecimal one
// (0x1.8p3), optionally followed by one of f, F, d, D.
func javaDouble(s string) (float64, bool) {
	s = javaTrim(s)
	body := s
	neg := false
	if body != "" && (body[0] == '+' || body[0] == '-') {
		neg = body[0] == '-'
		body = body[1:]
	}
	switch body {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	var end int
	if len(body) > 1 && body[0] == '0' && body[1]|0x20 == 'x' {
		end = hexFloatEnd(body)
	} else {
		end = decFloatEnd(body)
	}
	if end <= 0 {
		return 0, false
	}
	switch len(body) - end {
	case 0:
	case 1:
		if c := body[end] | 0x20; c != 'f' && c != 'd' {
			return 0, false
		}
	default:
		return 0, false
	}
	// The syntax is now Java's, which strconv reads the same way (out of
	// range values saturate to infinity or zero, as in Java).
	f, err := strconv.ParseFloat(s[:len(s)-(len(body)-end)], 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// decFloatEnd returns the length of the decimal number at the start of s
// (digits with at most one point, at least one digit, then an optional
// exponent with digits), or 0.
func decFloatEnd(s string) int {
	i, digits := 0, 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 {
		return 0
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		e := digitsEnd(s, j)
		if e == j {
			return 0
		}
		i = e
	}
	return i
}

// hexFloatEnd returns the length of the hexadecimal number at the start
// of s (0x, hex digits with at most one point and at least one digit, p,
// an optional sign, decimal digits), or 0.
func hexFloatEnd(s string) int {
	i, digits := 2, 0
	for ; i < len(s) && isHexDigit(s[i]); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isHexDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 || i >= len(s) || s[i]|0x20 != 'p' {
		return 0
	}
	j := i + 1
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	e := digitsEnd(s, j)
	if e == j {
		return 0
	}
	return e
}

func isHexDigit(c byte) bool { return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f' }

// javaTrim is Java's String.trim: it removes leading and trailing
// characters up to and including the space.
func javaTrim(s string) string {
	for len(s) > 0 && s[0] <= ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] <= ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// compareDouble is Java's Double.compare: NaN is above everything and
// equal to itself, -0 is below +0.
func compareDouble(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	x, y := doubleBits(a), doubleBits(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// doubleBits is Java's Double.doubleToLongBits: the bits of a float64,
// every NaN folded into one.
func doubleBits(f float64) int64 {
	if f != f {
		return 0x7ff8000000000000
	}
	return int64(math.Float64bits(f))
}
