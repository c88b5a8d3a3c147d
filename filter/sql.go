package filter

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// vkind is the type of a value: SQL92 values are null, booleans, int32,
// int64, float64 or strings (every property is a string).
type vkind uint8

const (
	vNull vkind = iota
	vBool
	vInt
	vLong
	vDouble
	vString
)

type value struct {
	k vkind
	b bool
	i int64
	f float64
	s string
}

var (
	nullV  = value{}
	trueV  = value{k: vBool, b: true}
	falseV = value{k: vBool}
)

func boolV(b bool) value {
	if b {
		return trueV
	}
	return falseV
}

func (v value) numeric() bool { return v.k == vInt || v.k == vLong || v.k == vDouble }

// errEval is an evaluation error: the message does not match.
var errEval = errors.New("filter: evaluation error")

type getter = func(string) (string, bool)

// node is a compiled expression.
type node interface {
	eval(get getter) (value, error)
}

type (
	constNode struct{ v value }
	propNode  struct{ name string }
	negNode   struct{ x node }
	notNode   struct{ x node }
	castNode  struct{ x node } // a property used as a condition
	andNode   struct{ l, r node }
	orNode    struct{ l, r node }
	cmpNode   struct {
		op   string // = <> > >= < <=
		l, r node
	}
	inNode struct {
		prop string
		set  []string
		not  bool
	}
	nullNode struct {
		x   node
		not bool
	}
	strOpNode struct {
		op  string // CONTAINS STARTSWITH ENDSWITH
		x   node
		s   string
		not bool
	}
)

// isBool reports whether n yields a condition (Java's BooleanExpression).
func isBool(n node) bool {
	switch n := n.(type) {
	case constNode:
		return n.v.k == vBool || n.v.k == vNull
	case notNode, castNode, andNode, orNode, cmpNode, inNode, nullNode, strOpNode:
		return true
	}
	return false
}

// sqlFilter is a compiled SQL92 expression.
type sqlFilter struct {
	root node
	text string
}

func (*sqlFilter) MatchTagsCode(int64) bool { return true }

func (f *sqlFilter) MatchProperties(get func(string) (string, bool)) bool {
	v, err := f.root.eval(get)
	return err == nil && v.k == vBool && v.b
}

func (f *sqlFilter) String() string { return f.text }

func compileSQL(expr string) (Filter, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, errAt(t.pos, "unexpected %q after the expression", t.text)
	}
	if n, err = asBool(n, 0); err != nil {
		return nil, err
	}
	return &sqlFilter{root: n, text: expr}, nil
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// is reports whether the next token is keyword or punctuation s.
func (p *parser) is(s string) bool {
	t := p.peek()
	return (t.kind == tKeyword || t.kind == tPunct) && t.text == s
}

// isSeq reports whether the next tokens are the keywords ss.
func (p *parser) isSeq(ss ...string) bool {
	for k, s := range ss {
		if p.i+k >= len(p.toks) {
			return false
		}
		t := p.toks[p.i+k]
		if (t.kind != tKeyword && t.kind != tPunct) || t.text != s {
			return false
		}
	}
	return true
}

func (p *parser) expect(s string) error {
	if !p.is(s) {
		t := p.peek()
		return errAt(t.pos, "expected %s, found %s", s, describe(t))
	}
	p.next()
	return nil
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "the end of the expression"
	case tString:
		return "'" + t.text + "'"
	}
	return strconv.Quote(t.text)
}

// asBool makes n a condition: a property is cast, other conditions stay,
// anything else is an error (Java's asBooleanExpression).
func asBool(n node, pos int) (node, error) {
	if isBool(n) {
		return n, nil
	}
	if _, ok := n.(propNode); ok {
		return castNode{n}, nil
	}
	return nil, errAt(pos, "the expression does not result in a boolean value")
}

func (p *parser) or() (node, error) {
	pos := p.peek().pos
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.is("OR") {
		rpos := p.next().pos
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		if l, err = asBool(l, pos); err != nil {
			return nil, err
		}
		if r, err = asBool(r, rpos); err != nil {
			return nil, err
		}
		l = orNode{l, r}
	}
	return l, nil
}

func (p *parser) and() (node, error) {
	pos := p.peek().pos
	l, err := p.equality()
	if err != nil {
		return nil, err
	}
	for p.is("AND") {
		rpos := p.next().pos
		r, err := p.equality()
		if err != nil {
			return nil, err
		}
		if l, err = asBool(l, pos); err != nil {
			return nil, err
		}
		if r, err = asBool(r, rpos); err != nil {
			return nil, err
		}
		l = andNode{l, r}
	}
	return l, nil
}

func (p *parser) equality() (node, error) {
	l, err := p.comparison()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.is("=") || p.is("<>"):
			op := p.next()
			r, err := p.comparison()
			if err != nil {
				return nil, err
			}
			if err := checkEqualOperands(l, r, op.pos); err != nil {
				return nil, err
			}
			l = cmpNode{op: op.text, l: l, r: r}
		case p.isSeq("IS", "NULL"):
			p.next()
			p.next()
			l = nullNode{x: l}
		case p.isSeq("IS", "NOT", "NULL"):
			p.next()
			p.next()
			p.next()
			l = nullNode{x: l, not: true}
		case p.is("IS"):
			t := p.next()
			return nil, errAt(t.pos, "IS must be followed by NULL or NOT NULL")
		default:
			return l, nil
		}
	}
}

func (p *parser) comparison() (node, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case p.is(">") || p.is(">=") || p.is("<") || p.is("<="):
			p.next()
			r, err := p.unary()
			if err != nil {
				return nil, err
			}
			if err := checkOrderOperand(l, t.pos); err != nil {
				return nil, err
			}
			if err := checkOrderOperand(r, t.pos); err != nil {
				return nil, err
			}
			l = cmpNode{op: t.text, l: l, r: r}
		default:
			not := p.is("NOT")
			if not {
				p.next()
			}
			kw := p.peek()
			if kw.kind != tKeyword {
				if not {
					return nil, errAt(kw.pos, "NOT must be followed by CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN here, found %s", describe(kw))
				}
				return l, nil
			}
			switch kw.text {
			case "CONTAINS", "STARTSWITH", "ENDSWITH":
				p.next()
				s := p.next()
				if s.kind != tString {
					return nil, errAt(s.pos, "%s needs a string literal, found %s", kw.text, describe(s))
				}
				l = strOpNode{op: kw.text, x: l, s: s.text, not: not}
			case "BETWEEN":
				p.next()
				lo, err := p.unary()
				if err != nil {
					return nil, err
				}
				if err := p.expect("AND"); err != nil {
					return nil, err
				}
				hi, err := p.unary()
				if err != nil {
					return nil, err
				}
				for _, n := range []node{l, lo, hi} {
					if err := checkOrderOperand(n, kw.pos); err != nil {
						return nil, err
					}
				}
				if a, ok := lo.(constNode); ok {
					if b, ok := hi.(constNode); ok {
						if c, err := compare(a.v, b.v); err == nil && c > 0 {
							return nil, errAt(kw.pos, "BETWEEN's lower bound is above its upper bound")
						}
					}
				}
				if not {
					l = orNode{cmpNode{op: "<", l: l, r: lo}, cmpNode{op: ">", l: l, r: hi}}
				} else {
					l = andNode{cmpNode{op: ">=", l: l, r: lo}, cmpNode{op: "<=", l: l, r: hi}}
				}
			case "IN":
				p.next()
				prop, ok := l.(propNode)
				if !ok {
					return nil, errAt(kw.pos, "IN needs a property on its left")
				}
				if err := p.expect("("); err != nil {
					return nil, err
				}
				var set []string
				for {
					s := p.next()
					if s.kind != tString {
						return nil, errAt(s.pos, "IN lists string literals only, found %s", describe(s))
					}
					set = append(set, s.text)
					if !p.is(",") {
						break
					}
					p.next()
				}
				if err := p.expect(")"); err != nil {
					return nil, err
				}
				l = inNode{prop: prop.name, set: set, not: not}
			default:
				if not {
					return nil, errAt(kw.pos, "NOT must be followed by CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN here, found %s", describe(kw))
				}
				return l, nil
			}
		}
	}
}

func (p *parser) unary() (node, error) {
	t := p.peek()
	switch {
	case p.is("+"):
		p.next()
		return p.unary()
	case p.is("-"):
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if c, ok := x.(constNode); ok && c.v.numeric() {
			return constNode{negate(c.v)}, nil
		}
		return negNode{x}, nil
	case p.is("NOT"):
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if x, err = asBool(x, t.pos); err != nil {
			return nil, err
		}
		return notNode{x}, nil
	}
	return p.primary()
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case tIdent:
		return propNode{t.text}, nil
	case tString:
		return constNode{value{k: vString, s: t.text}}, nil
	case tInt:
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, errAt(t.pos, "integer %s does not fit in 64 bits", t.text)
		}
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return constNode{value{k: vInt, i: n}}, nil
		}
		return constNode{value{k: vLong, i: n}}, nil
	case tFloat:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, errAt(t.pos, "bad number %s", t.text)
		}
		if f < math.SmallestNonzeroFloat64 {
			// As RocketMQ's parser, which refuses floats below
			// Double.MIN_VALUE (so zero).
			return nil, errAt(t.pos, "float literal %s is zero; write 0 instead", t.text)
		}
		return constNode{value{k: vDouble, f: f}}, nil
	case tKeyword:
		switch t.text {
		case "TRUE":
			return constNode{trueV}, nil
		case "FALSE":
			return constNode{falseV}, nil
		case "NULL":
			return constNode{nullV}, nil
		}
	case tPunct:
		if t.text == "(" {
			n, err := p.or()
			if err != nil {
				return nil, err
			}
			if err := p.expect(")"); err != nil {
				return nil, err
			}
			return n, nil
		}
	}
	return nil, errAt(t.pos, "expected a property, a literal or '(', found %s", describe(t))
}

// checkEqualOperands refuses = NULL and <> NULL, and a boolean constant
// compared with another kind of constant.
func checkEqualOperands(l, r node, pos int) error {
	for _, n := range []node{l, r} {
		if c, ok := n.(constNode); ok && c.v.k == vNull {
			return errAt(pos, "= and <> cannot compare with NULL; use IS NULL or IS NOT NULL")
		}
	}
	lc, lok := l.(constNode)
	rc, rok := r.(constNode)
	if lok && rok && (lc.v.k == vBool) != (rc.v.k == vBool) {
		return errAt(pos, "a boolean cannot be compared with a non-boolean constant")
	}
	return nil
}

// checkOrderOperand refuses a non-numeric constant or a condition as an
// operand of an ordering operator or BETWEEN.
func checkOrderOperand(n node, pos int) error {
	if c, ok := n.(constNode); ok {
		if c.v.numeric() {
			return nil
		}
		return errAt(pos, "only numbers can be ordered")
	}
	if isBool(n) {
		return errAt(pos, "a condition cannot be ordered")
	}
	return nil
}

func negate(v value) value {
	switch v.k {
	case vInt:
		if v.i == -math.MinInt32 { // -2147483648 written as a literal
			return value{k: vInt, i: math.MinInt32}
		}
		return value{k: vInt, i: -v.i}
	case vLong:
		return value{k: vLong, i: -v.i}
	case vDouble:
		return value{k: vDouble, f: -v.f}
	}
	return nullV
}

// Evaluation.

func (n constNode) eval(getter) (value, error) { return n.v, nil }

func (n propNode) eval(get getter) (value, error) {
	if s, ok := get(n.name); ok {
		return value{k: vString, s: s}, nil
	}
	return nullV, nil
}

func (n negNode) eval(get getter) (value, error) {
	v, err := n.x.eval(get)
	if err != nil || !v.numeric() {
		return nullV, err // a string (every property) negates to null
	}
	return negate(v), nil
}

func (n notNode) eval(get getter) (value, error) {
	v, err := n.x.eval(get)
	switch {
	case err != nil:
		return nullV, err
	case v.k == vNull:
		return nullV, nil
	case v.k != vBool:
		return nullV, errEval
	}
	return boolV(!v.b), nil
}

func (n castNode) eval(get getter) (value, error) {
	v, err := n.x.eval(get)
	if err != nil || v.k == vNull {
		return nullV, err
	}
	if v.k != vBool {
		return falseV, nil
	}
	return v, nil
}

func (n andNode) eval(get getter) (value, error) {
	l, err := n.l.eval(get)
	if err != nil {
		return nullV, err
	}
	if l.k == vBool && !l.b {
		return falseV, nil
	}
	r, err := n.r.eval(get)
	if err != nil {
		return nullV, err
	}
	if r.k == vBool && !r.b {
		return falseV, nil
	}
	if l.k == vNull || r.k == vNull {
		return nullV, nil
	}
	return trueV, nil
}

func (n orNode) eval(get getter) (value, error) {
	l, err := n.l.eval(get)
	if err != nil {
		return nullV, err
	}
	if l.k == vBool && l.b {
		return trueV, nil
	}
	r, err := n.r.eval(get)
	if err != nil {
		return nullV, err
	}
	if r.k == vBool && r.b {
		return trueV, nil
	}
	if l.k == vNull || r.k == vNull {
		return nullV, nil
	}
	return falseV, nil
}

func (n cmpNode) eval(get getter) (value, error) {
	l, err := n.l.eval(get)
	if err != nil {
		return nullV, err
	}
	r, err := n.r.eval(get)
	if err != nil {
		return nullV, err
	}
	if n.op == "=" || n.op == "<>" {
		eq, err := equal(l, r)
		if err != nil || eq.k == vNull || n.op == "=" {
			return eq, err
		}
		return boolV(!eq.b), nil
	}
	if l.k == vNull || r.k == vNull {
		return nullV, nil
	}
	if l.k == vString && r.k == vString {
		// Two properties: ordered as numbers.
		a, ok1 := javaDouble(l.s)
		b, ok2 := javaDouble(r.s)
		if !ok1 || !ok2 {
			return nullV, errEval
		}
		l, r = value{k: vDouble, f: a}, value{k: vDouble, f: b}
	}
	c, err := compare(l, r)
	if err != nil {
		return nullV, err
	}
	switch n.op {
	case ">":
		return boolV(c > 0), nil
	case ">=":
		return boolV(c >= 0), nil
	case "<":
		return boolV(c < 0), nil
	}
	return boolV(c <= 0), nil
}

// equal is the = operator.
func equal(l, r value) (value, error) {
	switch {
	case l.k == vNull && r.k == vNull:
		return trueV, nil
	case l.k == vNull:
		return nullV, nil
	case r.k == vNull:
		return falseV, nil
	case l == r:
		return trueV, nil
	case l.k == vString && r.k == vString:
		return falseV, nil
	}
	c, err := compare(l, r)
	if err != nil {
		return nullV, err
	}
	return boolV(c == 0), nil
}

// compare orders two non-null values, converting a string to the other
// side's type and widening numbers.
func compare(l, r value) (int, error) {
	if l.k != r.k {
		var err error
		switch {
		case l.k == vBool && r.k == vString:
			return 0, errEval // RocketMQ fails here (a cast error): no match
		case l.k == vString:
			if l, err = convert(l.s, r.k); err != nil {
				return 0, err
			}
		case r.k == vString:
			if r, err = convert(r.s, l.k); err != nil {
				return 0, err
			}
		case l.numeric() && r.numeric():
			if l.k == vDouble || r.k == vDouble {
				l, r = toDouble(l), toDouble(r)
			} else {
				l.k, r.k = vLong, vLong
			}
		default:
			return -1, nil
		}
	}
	switch l.k {
	case vBool:
		return boolCmp(l.b, r.b), nil
	case vInt, vLong:
		return cmpOrdered(l.i, r.i), nil
	case vDouble:
		return doubleCmp(l.f, r.f), nil
	case vString:
		return strings.Compare(l.s, r.s), nil
	}
	return -1, nil
}

// convert reads a property string as a value of kind k, as Java's
// Integer.valueOf, Long.valueOf, Double.valueOf and Boolean.valueOf do.
func convert(s string, k vkind) (value, error) {
	switch k {
	case vInt:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nullV, errEval
		}
		return value{k: vInt, i: n}, nil
	case vLong:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nullV, errEval
		}
		return value{k: vLong, i: n}, nil
	case vDouble:
		f, ok := javaDouble(s)
		if !ok {
			return nullV, errEval
		}
		return value{k: vDouble, f: f}, nil
	case vBool:
		return boolV(strings.EqualFold(s, "true")), nil
	}
	return value{k: vString, s: s}, nil
}

// javaDouble parses s as Java's Double.valueOf does: surrounding
// whitespace and a d/f suffix are allowed, NaN and Infinity spelled so.
func javaDouble(s string) (float64, bool) {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	if n := len(s); n > 0 && strings.IndexByte("dDfF", s[n-1]) >= 0 {
		s = s[:n-1]
	}
	switch strings.TrimLeft(s, "+-") {
	case "NaN", "Infinity":
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil
	}
	if s == "" || strings.ContainsAny(s, "_xXpPnNiI") {
		return 0, false // Go's extras: underscores, hex floats, inf/nan spellings
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, true
}

func toDouble(v value) value {
	if v.k == vDouble {
		return v
	}
	return value{k: vDouble, f: float64(v.i)}
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func cmpOrdered(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// doubleCmp is Java's Double.compare: NaN above everything and equal to
// itself, -0 below +0.
func doubleCmp(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmpOrdered(int64(math.Float64bits(a)), int64(math.Float64bits(b)))
}

func (n inNode) eval(get getter) (value, error) {
	s, ok := get(n.prop)
	if !ok {
		return nullV, nil
	}
	for _, x := range n.set {
		if x == s {
			return boolV(!n.not), nil
		}
	}
	return boolV(n.not), nil
}

func (n nullNode) eval(get getter) (value, error) {
	v, err := n.x.eval(get)
	if err != nil {
		return nullV, err
	}
	return boolV((v.k == vNull) != n.not), nil
}

func (n strOpNode) eval(get getter) (value, error) {
	v, err := n.x.eval(get)
	if err != nil {
		return nullV, err
	}
	if v.k != vString || n.s == "" {
		return falseV, nil
	}
	var hit bool
	switch n.op {
	case "CONTAINS":
		hit = strings.Contains(v.s, n.s)
	case "STARTSWITH":
		hit = strings.HasPrefix(v.s, n.s)
	default:
		hit = strings.HasSuffix(v.s, n.s)
	}
	return boolV(hit != n.not), nil
}
