package filter

import (
	"fmt"
	"strings"
)

// tokKind is a token's class.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tKeyword // text upper-cased
	tString  // text unquoted
	tInt     // text as written, without an L suffix
	tFloat
	tPunct // = <> > >= < <= ( ) , + -
)

type token struct {
	kind tokKind
	text string
	pos  int // byte offset in the expression
}

var keywords = map[string]bool{
	"NOT": true, "AND": true, "OR": true, "BETWEEN": true, "IN": true, "TRUE": true, "FALSE": true,
	"NULL": true, "IS": true, "CONTAINS": true, "STARTSWITH": true, "ENDSWITH": true,
}

func errAt(pos int, format string, args ...any) error {
	return fmt.Errorf("%w: at position %d: %s", ErrBadExpression, pos+1, fmt.Sprintf(format, args...))
}

// lex splits an expression into tokens, ending with tEOF.
func lex(s string) ([]token, error) {
	var out []token
	i := 0
	for {
		// whitespace and comments
		for i < len(s) {
			c := s[i]
			switch {
			case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
				i++
				continue
			case strings.HasPrefix(s[i:], "--"):
				j := strings.IndexAny(s[i:], "\n\r")
				if j < 0 {
					return nil, errAt(i, "a -- comment must end with a line break")
				}
				i += j
				continue
			case strings.HasPrefix(s[i:], "/*"):
				j := strings.Index(s[i+2:], "*/")
				if j < 0 {
					return nil, errAt(i, "unterminated /* comment")
				}
				i += j + 4
				continue
			}
			break
		}
		if i >= len(s) {
			return append(out, token{kind: tEOF, pos: i}), nil
		}
		start, c := i, s[i]
		switch {
		case isIdentStart(c):
			for i < len(s) && isIdentPart(s[i]) {
				i++
			}
			w := s[start:i]
			if up := strings.ToUpper(w); keywords[up] {
				out = append(out, token{kind: tKeyword, text: up, pos: start})
			} else {
				out = append(out, token{kind: tIdent, text: w, pos: start})
			}
		case c == '\'':
			var b strings.Builder
			i++
			for {
				if i >= len(s) {
					return nil, errAt(start, "unterminated string literal")
				}
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						b.WriteByte('\'')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(s[i])
				i++
			}
			out = append(out, token{kind: tString, text: b.String(), pos: start})
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			t, n, err := lexNumber(s[i:], start)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
			i += n
		default:
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch {
			case two == "<>" || two == ">=" || two == "<=":
				out = append(out, token{kind: tPunct, text: two, pos: start})
				i += 2
			case strings.IndexByte("=<>(),+-", c) >= 0:
				out = append(out, token{kind: tPunct, text: string(c), pos: start})
				i++
			case c == '"':
				return nil, errAt(start, "strings are quoted with ' in SQL92, not \"")
			default:
				return nil, errAt(start, "unexpected character %q", c)
			}
		}
	}
}

// lexNumber reads an integer (0 or [1-9][0-9]*, optional L) or a float
// (digits.digits, digits., .digits, each with an optional exponent, or
// digits with an exponent) at the start of s.
func lexNumber(s string, pos int) (token, int, error) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intEnd := i
	float := false
	if i < len(s) && s[i] == '.' {
		float = true
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			float, i = true, j
		}
	}
	if float {
		if i < len(s) && isIdentPart(s[i]) {
			return token{}, 0, errAt(pos+i, "unexpected %q after a number", s[i])
		}
		return token{kind: tFloat, text: s[:i], pos: pos}, i, nil
	}
	text := s[:intEnd]
	if len(text) > 1 && text[0] == '0' {
		return token{}, 0, errAt(pos, "integer %s has a leading zero", text)
	}
	if i < len(s) && (s[i] == 'l' || s[i] == 'L') {
		i++
	}
	if i < len(s) && isIdentPart(s[i]) {
		return token{}, 0, errAt(pos+i, "unexpected %q after a number", s[i])
	}
	return token{kind: tInt, text: text, pos: pos}, i, nil
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == '$' || (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }
