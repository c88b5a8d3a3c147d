package filter

import (
	"strconv"
	"strings"
)

// tokKind is a token's class.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tString
	tInt   // text as written, without an L suffix
	tFloat // text as written

	// Keywords (any case).
	tNot
	tAnd
	tOr
	tBetween
	tIn
	tTrue
	tFalse
	tNull
	tIs
	tContains
	tStartsWith
	tEndsWith

	// Punctuation.
	tEq     // =
	tNe     // <>
	tGt     // >
	tGe     // >=
	tLt     // <
	tLe     // <=
	tLParen // (
	tRParen // )
	tComma  // ,
	tPlus   // +
	tMinus  // -
)

// token is one lexeme of an expression.
type token struct {
	kind tokKind
	pos  int    // byte offset of its first character
	text string // an identifier's name, a string's unquoted value, a number as written
	// openComment marks a '-' that begins "--" with no line break after
	// it: not a comment (a comment needs its line break) but the last
	// thing on the line.
	openComment bool
}

// lexer splits an expression into tokens on demand, as the parser asks
// for them. At every position it takes the longest lexeme that forms a
// token (or a comment), so "1and" is 1 followed by AND, and "--" without
// a line break after it is two minus signs.
type lexer struct {
	src string
	pos int
}

// next returns the next token, tEOF at the end.
func (l *lexer) next() (token, error) {
	if err := l.skipSpace(); err != nil {
		return token{}, err
	}
	s, start := l.src, l.pos
	if start >= len(s) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := s[start]
	switch {
	case isIdentStart(c):
		end := start + 1
		for end < len(s) && isIdentPart(s[end]) {
			end++
		}
		l.pos = end
		word := s[start:end]
		if k, ok := keyword(word); ok {
			return token{kind: k, pos: start, text: word}, nil
		}
		return token{kind: tIdent, pos: start, text: word}, nil
	case c == '\'':
		return l.stringLit()
	case isDigit(c) || c == '.' && start+1 < len(s) && isDigit(s[start+1]):
		return l.number(), nil
	}
	kind, n := punct(s[start:])
	if n == 0 {
		return token{}, l.errBadChar(start)
	}
	l.pos = start + n
	t := token{kind: kind, pos: start}
	if kind == tMinus && strings.HasPrefix(s[start:], "--") {
		t.openComment = true // skipSpace saw no line break after it
	}
	return t, nil
}

// skipSpace skips white space and comments: "--" up to and including a
// line break, and "/* ... */".
func (l *lexer) skipSpace() error {
	s := l.src
	for l.pos < len(s) {
		rest := s[l.pos:]
		switch {
		case isSpace(rest[0]):
			l.pos++
		case strings.HasPrefix(rest, "--"):
			nl := strings.IndexAny(rest, "\n\r")
			if nl < 0 {
				return nil // no line break: a minus sign (see next)
			}
			l.pos += nl + 1
		case strings.HasPrefix(rest, "/*"):
			end := strings.Index(rest[2:], "*/")
			if end < 0 {
				return errAt(s, l.pos, "a /* comment is not closed with */")
			}
			l.pos += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}

// stringLit reads a string literal: single quotes, two quotes in a row
// standing for one. Like any token it is the longest that fits: when no
// quote closes a literal after a doubled quote, the literal ends at the
// first quote of the pair, and the next token, from the second quote, is
// an unclosed literal.
func (l *lexer) stringLit() (token, error) {
	s, start := l.src, l.pos
	end := -1
	for i := start + 1; i < len(s); i++ {
		if s[i] != '\'' {
			continue
		}
		end = i + 1
		if i+1 >= len(s) || s[i+1] != '\'' {
			break
		}
		i++ // a doubled quote, unless nothing closes the literal after it
	}
	if end < 0 {
		return token{}, errAt(s, start, "the string starting here has no closing quote (write a quote inside a string as '')")
	}
	l.pos = end
	return token{kind: tString, pos: start, text: strings.ReplaceAll(s[start+1:end-1], "''", "'")}, nil
}

// number reads the longest integer or float literal at l.pos:
//
//	integer: 0 | [1-9][0-9]*[lL]?
//	float:   [0-9]+ . [0-9]* exp? | . [0-9]+ exp? | [0-9]+ exp
//	exp:     [eE] [+-]? [0-9]+
func (l *lexer) number() token {
	s, start := l.src, l.pos
	i := digitsEnd(s, start)
	isFloat := false
	if i < len(s) && s[i] == '.' {
		isFloat = true
		i = digitsEnd(s, i+1)
	}
	if e := exponentEnd(s, i); e > i {
		isFloat, i = true, e
	}
	if isFloat {
		l.pos = i
		return token{kind: tFloat, pos: start, text: s[start:i]}
	}
	if s[start] == '0' {
		i = start + 1 // "0" takes no more digits and no L
	}
	text := s[start:i]
	if s[start] != '0' && i < len(s) && (s[i] == 'l' || s[i] == 'L') {
		i++
	}
	l.pos = i
	return token{kind: tInt, pos: start, text: text}
}

func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// exponentEnd returns the end of an exponent starting at i, or i if there
// is none.
func exponentEnd(s string, i int) int {
	if i >= len(s) || s[i]|0x20 != 'e' {
		return i
	}
	j := i + 1
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	if e := digitsEnd(s, j); e > j {
		return e
	}
	return i
}

// punct returns the punctuation token at the start of s and its length,
// or length 0.
func punct(s string) (tokKind, int) {
	if len(s) >= 2 {
		switch s[:2] {
		case "<>":
			return tNe, 2
		case ">=":
			return tGe, 2
		case "<=":
			return tLe, 2
		}
	}
	switch s[0] {
	case '=':
		return tEq, 1
	case '>':
		return tGt, 1
	case '<':
		return tLt, 1
	case '(':
		return tLParen, 1
	case ')':
		return tRParen, 1
	case ',':
		return tComma, 1
	case '+':
		return tPlus, 1
	case '-':
		return tMinus, 1
	}
	return 0, 0
}

func (l *lexer) errBadChar(pos int) error {
	s := l.src
	switch {
	case s[pos] == '"':
		return errAt(s, pos, `strings are quoted with ', not "`)
	case strings.HasPrefix(s[pos:], "!="):
		return errAt(s, pos, "there is no != operator: write <>")
	case s[pos] == '.' && pos+1 < len(s) && isIdentStart(s[pos+1]):
		return errAt(s, pos, "property names cannot contain '.'")
	}
	r := []rune(s[pos:min(len(s), pos+4)])[0]
	return errAt(s, pos, "unexpected character %s", strconv.QuoteRune(r))
}

// keyword returns the keyword token kind of an identifier, ignoring case.
func keyword(word string) (tokKind, bool) {
	if len(word) < 2 || len(word) > len("STARTSWITH") {
		return 0, false
	}
	var buf [10]byte
	up := buf[:len(word)]
	for i := 0; i < len(word); i++ {
		c := word[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up[i] = c
	}
	switch string(up) {
	case "NOT":
		return tNot, true
	case "AND":
		return tAnd, true
	case "OR":
		return tOr, true
	case "BETWEEN":
		return tBetween, true
	case "IN":
		return tIn, true
	case "TRUE":
		return tTrue, true
	case "FALSE":
		return tFalse, true
	case "NULL":
		return tNull, true
	case "IS":
		return tIs, true
	case "CONTAINS":
		return tContains, true
	case "STARTSWITH":
		return tStartsWith, true
	case "ENDSWITH":
		return tEndsWith, true
	}
	return 0, false
}

// describe names a token for an error message.
func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "the end of the expression"
	case tIdent:
		return "property " + t.text
	case tString:
		return "string '" + strings.ReplaceAll(t.text, "'", "''") + "'"
	case tInt, tFloat:
		return "number " + t.text
	}
	if t.text != "" {
		return strings.ToUpper(t.text)
	}
	return strconv.Quote(punctString(t.kind))
}

// punctString is the text of a punctuation token kind.
func punctString(k tokKind) string {
	switch k {
	case tEq:
		return "="
	case tNe:
		return "<>"
	case tGt:
		return ">"
	case tGe:
		return ">="
	case tLt:
		return "<"
	case tLe:
		return "<="
	case tLParen:
		return "("
	case tRParen:
		return ")"
	case tComma:
		return ","
	case tPlus:
		return "+"
	case tMinus:
		return "-"
	}
	return "?"
}

func isSpace(c byte) bool      { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == '$' || 'a' <= c|0x20 && c|0x20 <= 'z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }
