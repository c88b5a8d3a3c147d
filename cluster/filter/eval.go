package filter

import (
	"cmp"
	"math"
	"strings"
)

// kind is the type of an SQL92 value. Every property is a string;
// literals are booleans, int32s, int64s, float64s or strings.
type kind uint8

const (
	kNull   kind = iota // unknown: a missing property, NULL
	kBool               // n: 0 or 1
	kInt                // n, within int32 (Java's Integer)
	kLong               // n (Java's Long)
	kDouble             // n: the float64's bits
	kString             // s
	kErr                // evaluation failed: the message does not match
)

// value is an SQL92 value, small enough to pass in registers.
type value struct {
	s string
	n int64
	k kind
}

func (v value) bool() bool      { return v.n != 0 }
func (v value) double() float64 { return math.Float64frombits(uint64(v.n)) }

func boolValue(b bool) value {
	if b {
		return value{k: kBool, n: 1}
	}
	return value{k: kBool}
}

func doubleValue(f float64) value { return value{k: kDouble, n: int64(math.Float64bits(f))} }

// tri is what a condition yields: true, false, null (unknown), or a
// failure.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triNull
	triErr
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

// value returns t as a value.
func (t tri) value() value {
	switch t {
	case triTrue, triFalse:
		return boolValue(t == triTrue)
	case triNull:
		return value{}
	}
	return value{k: kErr}
}

// getter returns a message property's value and whether the message has
// it.
type getter = func(name string) (string, bool)

// node is a compiled SQL92 expression. Evaluation never panics; a failure
// (a string that does not convert, ...) yields kErr or triErr, which every
// node passes up at once, so that the whole expression fails.
type node interface {
	eval(get getter) value
}

// cond is a node that yields a condition, evaluated by test without
// building a value.
type cond interface {
	node
	test(get getter) tri
}

type (
	// constNode is a literal.
	constNode struct{ v value }
	// propNode is a property: its string value, or null when missing.
	propNode struct{ name string }
	// negNode is unary minus: a number negated, anything else null.
	negNode struct{ x node }
	// notNode is NOT of a condition.
	notNode struct{ x cond }
	// castNode is a property used as a condition.
	castNode struct{ x node }
	andNode  struct{ l, r cond }
	orNode   struct{ l, r cond }
	// eqNode is = (or <> when ne).
	eqNode struct {
		l, r node
		ne   bool
	}
	// ordNode is >, >=, < or <=.
	ordNode struct {
		op   tokKind // tGt, tGe, tLt or tLe
		l, r node
	}
	// betweenNode is [NOT] BETWEEN.
	betweenNode struct {
		x, lo, hi node
		not       bool
	}
	// isNullNode is IS NULL (or IS NOT NULL when not).
	isNullNode struct {
		x   node
		not bool
	}
	// inNode is [NOT] IN on a property.
	inNode struct {
		name string
		set  []string
		not  bool
	}
	// strNode is [NOT] CONTAINS, STARTSWITH or ENDSWITH.
	strNode struct {
		op     tokKind // tContains, tStartsWith or tEndsWith
		x      node
		search string
		not    bool
	}
)

func (n *constNode) eval(getter) value { return n.v }

// test is the literal as a condition (the parser lets TRUE, FALSE and NULL
// be conditions only).
func (n *constNode) test(getter) tri {
	switch n.v.k {
	case kBool:
		return triOf(n.v.bool())
	case kNull:
		return triNull
	}
	return triErr
}

func (n *propNode) eval(get getter) value {
	if s, ok := get(n.name); ok {
		return value{k: kString, s: s}
	}
	return value{}
}

func (n *negNode) eval(get getter) value {
	v := n.x.eval(get)
	switch v.k {
	case kInt:
		return value{k: kInt, n: int64(-int32(v.n))} // wraps as Java's int does
	case kLong:
		return value{k: kLong, n: -v.n}
	case kDouble:
		return doubleValue(-v.double())
	case kErr:
		return v
	}
	return value{}
}

func (n *notNode) eval(get getter) value { return n.test(get).value() }

func (n *notNode) test(get getter) tri {
	switch t := n.x.test(get); t {
	case triTrue:
		return triFalse
	case triFalse:
		return triTrue
	default:
		return t
	}
}

func (n *castNode) eval(get getter) value { return n.test(get).value() }

// test is a property's value as a condition: null when missing, else
// false (only a boolean, never a string, is true).
func (n *castNode) test(get getter) tri {
	switch v := n.x.eval(get); v.k {
	case kNull:
		return triNull
	case kErr:
		return triErr
	case kBool:
		return triOf(v.bool())
	}
	return triFalse
}

func (n *andNode) eval(get getter) value { return n.test(get).value() }

func (n *andNode) test(get getter) tri {
	l := n.l.test(get)
	if l == triFalse || l == triErr {
		return l
	}
	r := n.r.test(get)
	if r == triFalse || r == triErr {
		return r
	}
	if l == triNull || r == triNull {
		return triNull
	}
	return triTrue
}

func (n *orNode) eval(get getter) value { return n.test(get).value() }

func (n *orNode) test(get getter) tri {
	l := n.l.test(get)
	if l == triTrue || l == triErr {
		return l
	}
	r := n.r.test(get)
	if r == triTrue || r == triErr {
		return r
	}
	if l == triNull || r == triNull {
		return triNull
	}
	return triFalse
}

func (n *eqNode) eval(get getter) value { return n.test(get).value() }

func (n *eqNode) test(get getter) tri {
	l := n.l.eval(get)
	if l.k == kErr {
		return triErr
	}
	r := n.r.eval(get)
	if r.k == kErr {
		return triErr
	}
	t := equal(l, r)
	if n.ne && t <= triTrue {
		t ^= 1 // true <-> false
	}
	return t
}

// equal is =: true when both sides are null, null when only the left one
// is, false when only the right one is; otherwise equal values, or values
// that compare equal after conversion (compare), are equal.
func equal(l, r value) tri {
	switch {
	case l.k == kNull && r.k == kNull:
		return triTrue
	case l.k == kNull:
		return triNull
	case r.k == kNull:
		return triFalse
	case same(l, r):
		return triTrue
	}
	c, ok := compare(l, r)
	if !ok {
		return triErr
	}
	return triOf(c == 0)
}

// same reports whether l and r have one kind and one value (Java's
// equals: doubles by their bits, all NaNs alike).
func same(l, r value) bool {
	if l.k != r.k {
		return false
	}
	switch l.k {
	case kBool, kInt, kLong:
		return l.n == r.n
	case kDouble:
		return doubleBits(l.double()) == doubleBits(r.double())
	case kString:
		return l.s == r.s
	}
	return false
}

func (n *ordNode) eval(get getter) value { return n.test(get).value() }

func (n *ordNode) test(get getter) tri { return order(n.l.eval(get), n.r, get, n.op) }

// order applies op (tGt, tGe, tLt or tLe) to l and the value of r, which
// it evaluates only when l is not null.
func order(l value, r node, get getter, op tokKind) tri {
	switch l.k {
	case kErr:
		return triErr
	case kNull:
		return triNull
	}
	rv := r.eval(get)
	switch rv.k {
	case kErr:
		return triErr
	case kNull:
		return triNull
	}
	var c int
	if l.k == kString && rv.k == kString {
		// Two strings (two properties) are ordered as numbers.
		a, ok1 := javaDouble(l.s)
		b, ok2 := javaDouble(rv.s)
		if !ok1 || !ok2 {
			return triErr
		}
		c = compareDouble(a, b)
	} else {
		var ok bool
		if c, ok = compare(l, rv); !ok {
			return triErr
		}
	}
	switch op {
	case tGt:
		return triOf(c > 0)
	case tGe:
		return triOf(c >= 0)
	case tLt:
		return triOf(c < 0)
	}
	return triOf(c <= 0)
}

func (n *betweenNode) eval(get getter) value { return n.test(get).value() }

// test is x >= lo AND x <= hi, or x < lo OR x > hi for NOT BETWEEN, with
// x evaluated once (evaluating it per comparison would take time
// exponential in the nesting of BETWEENs).
func (n *betweenNode) test(get getter) tri {
	x := n.x.eval(get)
	if !n.not {
		l := order(x, n.lo, get, tGe)
		if l == triFalse || l == triErr {
			return l
		}
		r := order(x, n.hi, get, tLe)
		if r == triFalse || r == triErr {
			return r
		}
		if l == triNull || r == triNull {
			return triNull
		}
		return triTrue
	}
	l := order(x, n.lo, get, tLt)
	if l == triTrue || l == triErr {
		return l
	}
	r := order(x, n.hi, get, tGt)
	if r == triTrue || r == triErr {
		return r
	}
	if l == triNull || r == triNull {
		return triNull
	}
	return triFalse
}

// compare orders two non-null values. Values of different kinds are
// first brought to one: a string is read as the other side's kind (a
// number as Java reads one, a boolean true iff it is "true" in any case),
// and numbers widen (int32 to int64 to float64). ok is false when a
// string does not read as a number, and when a boolean on the left meets
// a string on the right (RocketMQ fails there). Other mixes order the left
// side first.
func compare(l, r value) (c int, ok bool) {
	if l.k != r.k {
		switch l.k {
		case kBool:
			if r.k == kString {
				return 0, false
			}
			return -1, true
		case kInt:
			switch r.k {
			case kLong:
				l.k = kLong
			case kDouble:
				l = toDouble(l)
			case kString:
				if r, ok = parseAs(r.s, kInt); !ok {
					return 0, false
				}
			default:
				return -1, true
			}
		case kLong:
			switch r.k {
			case kInt:
				r.k = kLong
			case kDouble:
				l = toDouble(l)
			case kString:
				if r, ok = parseAs(r.s, kLong); !ok {
					return 0, false
				}
			default:
				return -1, true
			}
		case kDouble:
			switch r.k {
			case kInt, kLong:
				r = toDouble(r)
			case kString:
				if r, ok = parseAs(r.s, kDouble); !ok {
					return 0, false
				}
			default:
				return -1, true
			}
		case kString:
			switch r.k {
			case kBool, kInt, kLong, kDouble:
				if l, ok = parseAs(l.s, r.k); !ok {
					return 0, false
				}
			default:
				return -1, true
			}
		default:
			return -1, true
		}
	}
	switch l.k {
	case kBool, kInt, kLong: // false < true
		return cmp.Compare(l.n, r.n), true
	case kDouble:
		return compareDouble(l.double(), r.double()), true
	case kString:
		return strings.Compare(l.s, r.s), true
	}
	return -1, true
}

// parseAs reads a string as a value of kind k.
func parseAs(s string, k kind) (value, bool) {
	switch k {
	case kBool:
		return boolValue(javaBool(s)), true
	case kInt:
		n, ok := javaInt(s, 32)
		return value{k: kInt, n: n}, ok
	case kLong:
		n, ok := javaInt(s, 64)
		return value{k: kLong, n: n}, ok
	case kDouble:
		f, ok := javaDouble(s)
		return doubleValue(f), ok
	}
	return value{k: kString, s: s}, true
}

func toDouble(v value) value {
	if v.k == kDouble {
		return v
	}
	return doubleValue(float64(v.n))
}

func (n *isNullNode) eval(get getter) value { return n.test(get).value() }

func (n *isNullNode) test(get getter) tri {
	v := n.x.eval(get)
	if v.k == kErr {
		return triErr
	}
	return triOf((v.k == kNull) != n.not)
}

func (n *inNode) eval(get getter) value { return n.test(get).value() }

func (n *inNode) test(get getter) tri {
	s, ok := get(n.name)
	if !ok {
		return triNull
	}
	for _, x := range n.set {
		if x == s {
			return triOf(!n.not)
		}
	}
	return triOf(n.not)
}

func (n *strNode) eval(get getter) value { return n.test(get).value() }

func (n *strNode) test(get getter) tri {
	if n.search == "" {
		return triFalse // the operand is not evaluated
	}
	v := n.x.eval(get)
	switch v.k {
	case kErr:
		return triErr
	case kString:
	default:
		return triFalse // null too, for NOT forms as well
	}
	var hit bool
	switch n.op {
	case tContains:
		hit = strings.Contains(v.s, n.search)
	case tStartsWith:
		hit = strings.HasPrefix(v.s, n.search)
	default:
		hit = strings.HasSuffix(v.s, n.search)
	}
	return triOf(hit != n.not)
}
