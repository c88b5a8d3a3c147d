// Package filter decides, on the broker, which messages of a queue a
// subscription wants: RocketMQ's TAG expressions and its SQL92 property
// expressions.
//
// # TAG
//
// "*" or "" matches everything; "a || b || c" matches messages whose TAGS
// property is one of the tags. The broker compares the tags' hash codes
// (Java's String.hashCode, kept in every consume-queue unit), so it never
// reads a message to reject it; two tags with one hash code both pass, and
// the client compares the tag strings again, as RocketMQ's clients do.
//
// # SQL92
//
// An SQL92 expression is evaluated on a message's properties, all of them
// strings, user and system alike (TAGS, KEYS, UNIQ_KEY, RETRY_TOPIC ...),
// looked up by their exact, case-sensitive names. The grammar, lowest
// precedence first:
//
//	or         := and (OR and)*
//	and        := equality (AND equality)*
//	equality   := comparison ( '=' comparison | '<>' comparison | IS [NOT] NULL )*
//	comparison := unary ( ('>'|'>='|'<'|'<=') unary
//	                    | [NOT] (CONTAINS|STARTSWITH|ENDSWITH) 'string'
//	                    | [NOT] BETWEEN unary AND unary
//	                    | [NOT] IN ( 'string' (, 'string')* ) )*
//	unary      := '+' unary | '-' unary | NOT unary | primary
//	primary    := literal | identifier | '(' or ')'
//
// Keywords are case-insensitive; identifiers are [A-Za-z_$][A-Za-z0-9_$]*
// and no keyword can be one. Literals: 'strings' (” is a quote), integers
// (an optional L suffix; int32 when they fit, else int64), floats (5.5, 5.,
// .5, 5E10; zero is refused, as by RocketMQ), TRUE, FALSE, NULL. Comments
// are -- to the end of a line and /* ... */. NOT binds tighter than the
// comparisons: write NOT (a = 'x'), not NOT a = 'x'.
//
// Evaluation follows RocketMQ's three-valued logic: a node yields true,
// false or null (unknown), and a message matches only when the whole
// expression yields true.
//
//   - A missing property is null. a = b is null when only the left side is
//     null, false when only the right is, true when both are; a <> b is the
//     negation (so null stays null, and a <> 'x' does not match a message
//     without a). The ordering operators are null when either side is.
//   - A property compared with a literal of another type is converted to
//     the literal's type (int32, int64, float64, or a boolean: true when it
//     reads "true" in any case); a string that does not convert is an
//     error. Two properties compare as strings for = and <>, and as
//     numbers for the ordering operators. Numbers of different widths
//     widen.
//   - BETWEEN x AND y is >= x AND <= y; IN compares strings exactly.
//   - CONTAINS, STARTSWITH, ENDSWITH and their NOT forms are false for a
//     missing property or an empty search string.
//   - AND is false if either side is false, else null if either is null;
//     OR is true if either is true, else null if either is null.
//   - A bare property used as a condition is never true: properties are
//     strings, not booleans.
//   - Any error while evaluating (a number that does not parse, a boolean
//     compared with a string) means no match, as RocketMQ's broker skips
//     the message.
//
// Compile refuses, with ErrBadExpression and the position, what RocketMQ's
// parser refuses: lexical errors, trailing input, a top level that is not
// a condition, = NULL or <> NULL, a string or boolean operand of an
// ordering operator or BETWEEN, BETWEEN with constant bounds in the wrong
// order, IN with anything but a property on its left or strings in its
// list, an integer beyond int64, and a zero float literal.
//
// A compiled Filter is immutable and safe for concurrent use; Cache keeps
// the filters of recent subscriptions so that each expression is compiled
// once, not once per pull.
package filter
