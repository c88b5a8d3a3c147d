package filter

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// errAt returns an ErrBadExpression error about the character at byte
// offset pos of src, counting characters from 1.
func errAt(src string, pos int, format string, args ...any) error {
	return fmt.Errorf("%w: at character %d: %s", ErrBadExpression,
		utf8.RuneCountInString(src[:pos])+1, fmt.Sprintf(format, args...))
}

// parser is a recursive-descent parser of SQL92 expressions, one function
// per precedence level. It reads tokens as it needs them, at most two
// ahead.
type parser struct {
	lx    lexer
	buf   [2]token
	nbuf  int
	depth int // of nested parentheses and unary operators
}

// maxDepth bounds the nesting of parentheses and unary operators, and
// with it the parser's and the evaluation's recursion. RocketMQ's parser
// runs out of stack somewhat deeper, at a depth that depends on the JVM.
const maxDepth = 500

// nest enters a nesting level at the token t.
func (p *parser) nest(t token) error {
	if p.depth++; p.depth > maxDepth {
		return p.errAt(t.pos, "the expression nests parentheses and unary operators more than %d deep", maxDepth)
	}
	return nil
}

// parseSQL parses an SQL92 expression. RocketMQ's broker ignores what
// follows a complete expression; strict refuses it, except a "--" comment
// that ends the text without a line break.
func parseSQL(expr string, strict bool) (cond, error) {
	p := &parser{lx: lexer{src: expr}}
	pos, err := p.start()
	if err != nil {
		return nil, err
	}
	n, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	c, err := p.asCondition(n, pos)
	if err != nil {
		return nil, err
	}
	t, err := p.peek(0)
	if err != nil {
		return nil, err
	}
	switch {
	case !strict || t.kind == tEOF || t.openComment:
	case t.kind == tRParen:
		return nil, p.errAt(t.pos, "unexpected \")\" after a complete expression: no ( to close")
	default:
		return nil, p.errAt(t.pos, "unexpected %s after a complete expression (a missing AND or OR?)", describe(t))
	}
	return c, nil
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	return errAt(p.lx.src, pos, format, args...)
}

// peek returns the token k (0 or 1) places ahead.
func (p *parser) peek(k int) (token, error) {
	for p.nbuf <= k {
		t, err := p.lx.next()
		if err != nil {
			return token{}, err
		}
		p.buf[p.nbuf] = t
		p.nbuf++
	}
	return p.buf[k], nil
}

// take consumes the next token, which must have been peeked.
func (p *parser) take() token {
	t := p.buf[0]
	p.buf[0] = p.buf[1]
	p.nbuf--
	return t
}

// expect consumes the next token if it is of kind k.
func (p *parser) expect(k tokKind, what string) (token, error) {
	t, err := p.peek(0)
	if err != nil {
		return t, err
	}
	if t.kind != k {
		return t, p.errAt(t.pos, "expected %s, found %s", what, describe(t))
	}
	return p.take(), nil
}

// start returns the position of the next token.
func (p *parser) start() (int, error) {
	t, err := p.peek(0)
	return t.pos, err
}

// orExpr := andExpr (OR andExpr)*
func (p *parser) orExpr() (node, error) {
	return p.logical(tOr, p.andExpr, func(l, r cond) node { return &orNode{l, r} })
}

// andExpr := equality (AND equality)*
func (p *parser) andExpr() (node, error) {
	return p.logical(tAnd, p.equality, func(l, r cond) node { return &andNode{l, r} })
}

// logical parses operand (op operand)*, left-associative, joining each
// pair of conditions with join.
func (p *parser) logical(op tokKind, operand func() (node, error), join func(l, r cond) node) (node, error) {
	pos, err := p.start()
	if err != nil {
		return nil, err
	}
	l, err := operand()
	for err == nil {
		var t token
		if t, err = p.peek(0); err != nil || t.kind != op {
			break
		}
		p.take()
		var r node
		var rpos int
		if rpos, err = p.start(); err != nil {
			break
		}
		if r, err = operand(); err != nil {
			break
		}
		var lc, rc cond
		if lc, rc, err = p.asConditions(l, pos, r, rpos); err == nil {
			l = join(lc, rc)
		}
	}
	return l, err
}

func (p *parser) asConditions(l node, lpos int, r node, rpos int) (cond, cond, error) {
	lc, err := p.asCondition(l, lpos)
	if err != nil {
		return nil, nil, err
	}
	rc, err := p.asCondition(r, rpos)
	return lc, rc, err
}

// equality := comparison ( ('=' | '<>') comparison | IS NULL | IS NOT NULL )*
func (p *parser) equality() (node, error) {
	l, err := p.comparison()
	for err == nil {
		var t token
		if t, err = p.peek(0); err != nil {
			break
		}
		switch t.kind {
		case tEq, tNe:
			p.take()
			var r node
			if r, err = p.comparison(); err != nil {
				break
			}
			if err = p.checkEqual(l, r, t); err == nil {
				l = &eqNode{l: l, r: r, ne: t.kind == tNe}
			}
		case tIs:
			var t2 token
			if t2, err = p.peek(1); err != nil {
				break
			}
			p.take()
			not := t2.kind == tNot
			if not {
				p.take()
			}
			if _, err = p.expect(tNull, "NULL or NOT NULL after IS"); err == nil {
				l = &isNullNode{x: l, not: not}
			}
		default:
			return l, nil
		}
	}
	return nil, err
}

// comparison := unary ( ('>' | '>=' | '<' | '<=') unary
//
//	| [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
//	| [NOT] BETWEEN unary AND unary
//	| [NOT] IN '(' string (',' string)* ')' )*
func (p *parser) comparison() (node, error) {
	l, err := p.unary()
	for err == nil {
		var t token
		if t, err = p.peek(0); err != nil {
			break
		}
		not := false
		op := t
		if t.kind == tNot {
			if op, err = p.peek(1); err != nil {
				break
			}
			switch op.kind {
			case tContains, tStartsWith, tEndsWith, tBetween, tIn:
			default:
				return nil, p.errAt(t.pos, "NOT here must be followed by CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN, found %s (to negate a comparison, write NOT (...))", describe(op))
			}
			p.take()
			not = true
		}
		switch op.kind {
		case tGt, tGe, tLt, tLe:
			p.take()
			var r node
			if r, err = p.unary(); err != nil {
				break
			}
			if err = p.checkOrdered(l, op); err == nil {
				err = p.checkOrdered(r, op)
			}
			l = &ordNode{op: op.kind, l: l, r: r}
		case tContains, tStartsWith, tEndsWith:
			p.take()
			var s token
			if s, err = p.expect(tString, "a string after "+describe(op)); err == nil {
				l = &strNode{op: op.kind, x: l, search: s.text, not: not}
			}
		case tBetween:
			p.take()
			l, err = p.between(l, op, not)
		case tIn:
			p.take()
			l, err = p.in(l, op, not)
		default:
			return l, nil
		}
	}
	return nil, err
}

// between parses the bounds of [NOT] BETWEEN. x BETWEEN a AND b is
// x >= a AND x <= b; x NOT BETWEEN a AND b is x < a OR x > b.
func (p *parser) between(x node, op token, not bool) (node, error) {
	lo, err := p.unary()
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(tAnd, "AND between the bounds of BETWEEN"); err != nil {
		return nil, err
	}
	hi, err := p.unary()
	if err != nil {
		return nil, err
	}
	if not {
		return &betweenNode{x: x, lo: lo, hi: hi, not: true}, p.checkOrdered3(x, lo, hi, op)
	}
	a, ok1 := lo.(*constNode)
	b, ok2 := hi.(*constNode)
	if ok1 && ok2 {
		if a.v.k == kNull || b.v.k == kNull {
			return nil, p.errAt(op.pos, "the bounds of BETWEEN cannot be NULL")
		}
		if c, ok := compare(b.v, a.v); !ok || c < 0 {
			return nil, p.errAt(op.pos, "the lower bound of BETWEEN is above its upper bound")
		}
	}
	return &betweenNode{x: x, lo: lo, hi: hi}, p.checkOrdered3(x, lo, hi, op)
}

func (p *parser) checkOrdered3(x, lo, hi node, op token) error {
	for _, n := range []node{x, lo, hi} {
		if err := p.checkOrdered(n, op); err != nil {
			return err
		}
	}
	return nil
}

// in parses the list of [NOT] IN.
func (p *parser) in(x node, op token, not bool) (node, error) {
	prop, ok := x.(*propNode)
	if !ok {
		return nil, p.errAt(op.pos, "IN must follow a property name")
	}
	if _, err := p.expect(tLParen, "( after IN"); err != nil {
		return nil, err
	}
	var set []string
	for {
		s, err := p.expect(tString, "a string in the list of IN")
		if err != nil {
			return nil, err
		}
		set = append(set, s.text)
		t, err := p.peek(0)
		if err != nil {
			return nil, err
		}
		if t.kind != tComma {
			break
		}
		p.take()
	}
	if _, err := p.expect(tRParen, ", or ) in the list of IN"); err != nil {
		return nil, err
	}
	return &inNode{name: prop.name, set: set, not: not}, nil
}

// unary := '+' unary | '-' unary | NOT unary | primary
func (p *parser) unary() (node, error) {
	t, err := p.peek(0)
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case tPlus, tMinus, tNot:
		if err := p.nest(t); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
	}
	switch t.kind {
	case tPlus:
		p.take()
		return p.unary()
	case tMinus:
		p.take()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &negNode{x}, nil
	case tNot:
		p.take()
		pos, err := p.start()
		if err != nil {
			return nil, err
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		c, err := p.asCondition(x, pos)
		if err != nil {
			return nil, err
		}
		return &notNode{c}, nil
	}
	return p.primary()
}

// primary := literal | property | '(' orExpr ')'
func (p *parser) primary() (node, error) {
	t, err := p.peek(0)
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case tIdent:
		p.take()
		return &propNode{t.text}, nil
	case tString:
		p.take()
		return &constNode{value{k: kString, s: t.text}}, nil
	case tInt:
		p.take()
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, p.errAt(t.pos, "integer %s is out of range (at most %d)", t.text, int64(math.MaxInt64))
		}
		if n <= math.MaxInt32 {
			return &constNode{value{k: kInt, n: n}}, nil
		}
		return &constNode{value{k: kLong, n: n}}, nil
	case tFloat:
		p.take()
		f, err := strconv.ParseFloat(t.text, 64)
		switch {
		case err != nil && !isRangeErr(err), f > math.MaxFloat64:
			return nil, p.errAt(t.pos, "number %s is out of range", t.text)
		case f < math.SmallestNonzeroFloat64:
			// RocketMQ refuses floats that are (or round to) zero.
			return nil, p.errAt(t.pos, "number %s is zero or too small: write 0 for zero", t.text)
		}
		return &constNode{doubleValue(f)}, nil
	case tTrue, tFalse:
		p.take()
		return &constNode{boolValue(t.kind == tTrue)}, nil
	case tNull:
		p.take()
		return &constNode{}, nil
	case tLParen:
		if err := p.nest(t); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		p.take()
		n, err := p.orExpr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tRParen, ")"); err != nil {
			return nil, err
		}
		return n, nil
	}
	if t.kind == tEOF {
		return nil, p.errAt(t.pos, "the expression ends where a property, a literal or ( was expected")
	}
	return nil, p.errAt(t.pos, "expected a property, a literal or (, found %s", describe(t))
}

// isCondition reports whether n yields true, false or null: a
// comparison, a logical operator, TRUE, FALSE or NULL.
func isCondition(n node) bool {
	switch n := n.(type) {
	case *constNode:
		return n.v.k == kBool || n.v.k == kNull
	case *propNode, *negNode:
		return false
	}
	return true
}

// asCondition returns n as a condition: a property is cast (it yields
// false, or null when missing), other non-conditions are refused.
func (p *parser) asCondition(n node, pos int) (cond, error) {
	if c, ok := n.(cond); ok && isCondition(n) {
		return c, nil
	}
	if _, ok := n.(*propNode); ok {
		return &castNode{n}, nil
	}
	return nil, p.errAt(pos, "this is a value, not a condition: compare it with something")
}

// checkOrdered refuses as an operand of an ordering operator a literal
// that is not a number, and a condition.
func (p *parser) checkOrdered(n node, op token) error {
	if c, ok := n.(*constNode); ok {
		switch c.v.k {
		case kInt, kLong, kDouble:
			return nil
		}
		return p.errAt(op.pos, "%s compares numbers only; use = or <> for strings and booleans, IS NULL for NULL", describe(op))
	}
	if isCondition(n) {
		return p.errAt(op.pos, "%s cannot order the result of a condition", describe(op))
	}
	return nil
}

// checkEqual refuses = NULL and <> NULL (a NULL literal, not a negated
// one), and TRUE or FALSE compared with a string or number literal on its
// right.
func (p *parser) checkEqual(l, r node, op token) error {
	lc, lok := l.(*constNode)
	rc, rok := r.(*constNode)
	if lok && lc.v.k == kNull || rok && rc.v.k == kNull {
		return p.errAt(op.pos, "%s cannot compare with NULL: use IS NULL or IS NOT NULL", describe(op))
	}
	if lok && rok && lc.v.k == kBool && rc.v.k != kBool {
		return p.errAt(op.pos, "a boolean cannot be compared with a non-boolean literal")
	}
	return nil
}
