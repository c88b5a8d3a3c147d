// Package filter decides, on the broker, which messages of a queue a
// subscription wants, the way Apache RocketMQ's broker does: by TAG
// expressions and by SQL92 expressions on message properties.
//
// Compile turns an expression type and text into a Filter; Cache keeps
// compiled filters so that a broker compiles each subscription once, not
// once per pull. A Filter is immutable and safe for concurrent use, and
// evaluating one does not allocate in the common case.
//
// # TAG expressions
//
// "" and "*" match every message; Compile returns a nil Filter for them
// (no filtering). Otherwise the text is split at "||" into tags, each
// trimmed of spaces and control characters; a message matches when its
// TAGS property is one of them. The broker compares tags by their hash
// codes (Java's String.hashCode, the code every consume-queue unit
// holds, low 32 bits), so it rejects a message without reading it; two
// tags sharing a code both pass and the client compares the tag strings
// again, as RocketMQ's clients do. As in RocketMQ, only "" and "*"
// exactly mean everything: " * " means the tag "*", " || " names no tag
// and matches nothing, and "||" is refused.
//
// # What an SQL92 expression sees
//
// An SQL92 expression is evaluated on the message's properties, as
// stored with the message: the user's and the system's alike, under
// their stored, case-sensitive names. So TAGS (the tag), KEYS (keys
// separated by spaces), UNIQ_KEY, DELAY, WAIT, and on retried messages
// RETRY_TOPIC, ORIGIN_MESSAGE_ID and so on are visible; tags = 'x' does
// not see TAGS. Fields of the message header (topic, queue, timestamps,
// reconsume count) are not properties and are not visible. An SQL92
// filter does not use tags codes: filter by tag with TAGS = 'x' or
// TAGS IN ('x', 'y').
//
// # SQL92 syntax
//
// White space is space, tab, line feed, carriage return and form feed.
// Comments run from -- to the end of the line (a -- comment at the very
// end of the text needs no line break), or from /* to */.
//
// Keywords are NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS
// STARTSWITH ENDSWITH, in any case. A property name is an ASCII letter, _
// or $ followed by letters, digits, _ and $, and cannot be a keyword; it
// is looked up exactly as written. Literals:
//
//   - strings in single quotes, where two quotes in a row stand for one
//     quote; there are no other escapes; strings may span lines;
//   - integers 0 or [1-9][0-9]*, with an optional L; those that fit in 32
//     bits are int32s, larger ones int64s; beyond int64 is an error;
//     there are no negative literals: -5 is unary minus applied to 5;
//   - floats 5.5, 5., .5, 5E10, 5.5e-3 (float64s); a float that is zero
//     or rounds to zero (0.0, 1e-400) is an error, as in RocketMQ; write
//     0;
//   - TRUE, FALSE and NULL.
//
// Operators are = <> > >= < <= ( ) , + - and the keywords; there is no !=,
// LIKE or arithmetic beyond unary plus and minus. As everywhere in the
// expression, each token is the longest that fits: 1and is 1 AND.
//
// The grammar, lowest precedence first:
//
//	or         := and ( OR and )*
//	and        := equality ( AND equality )*
//	equality   := comparison ( = comparison | <> comparison | IS NULL | IS NOT NULL )*
//	comparison := unary ( (> | >= | < | <=) unary
//	                    | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
//	                    | [NOT] BETWEEN unary AND unary
//	                    | [NOT] IN ( string (, string)* ) )*
//	unary      := + unary | - unary | NOT unary | primary
//	primary    := literal | property | ( or )
//
// So a = 1 OR b = 2 AND c = 3 is a = 1 OR (b = 2 AND c = 3), and NOT
// binds tighter than a comparison: NOT a = 'x' is (NOT a) = 'x', which
// never matches; write NOT (a = 'x') or a <> 'x'.
//
// Compile refuses, with an error naming the character where the problem
// is: lexical errors; a value where a condition is needed (the whole
// expression, the operands of AND, OR and NOT; a bare property is
// allowed there); = NULL and <> NULL (use IS [NOT] NULL); TRUE or FALSE =
// or <> a string or number literal on its right; a string, boolean or
// NULL literal, or a condition, as an operand of > >= < <= or BETWEEN;
// BETWEEN with two literal bounds, the lower above the upper (NOT BETWEEN
// allows it); IN after anything but a property, or with anything but
// strings in its list; parentheses and unary operators nested more than
// 500 deep; and anything after a complete expression. RocketMQ itself
// ignores what follows a complete expression (a = 1 b is a = 1 there);
// Compile refuses it as a likely mistake, except a trailing -- comment.
// Whatever Compile accepts, RocketMQ accepts too and evaluates the same
// way.
//
// # SQL92 evaluation
//
// Every node of the expression yields true, false or null (unknown), or
// fails; a message matches only when the whole expression yields true. A
// failure anywhere fails the whole expression at once (the message does
// not match) unless an AND or OR has already decided on its left side.
//
//   - A missing property is null; a present one is a string, possibly
//     empty.
//   - x = y is true when both are null, null when only x is, false when
//     only y is. Otherwise equal values of one type are equal; values of
//     different types are compared after conversion (below). x <> y is
//     NOT (x = y), so a <> 'v' is null, not true, for a message without a.
//   - > >= < <= are null when either side is null (the right side is not
//     evaluated when the left one is null). Two strings (two properties)
//     are both read as float64s; otherwise values are compared after
//     conversion.
//   - Conversion: a string compared with a literal of another type is
//     read as that type, as Java reads one: an int32 or int64 (optional
//     sign, decimal digits of any script, nothing else: " 5" and "5.0"
//     fail against 5), a float64 (surrounding spaces, a d or f suffix,
//     NaN, Infinity and hexadecimal forms allowed), a boolean (true when
//     "true" in any case, else false). A string that does not read as the
//     number fails. Numbers widen int32 to int64 to float64. TRUE or
//     FALSE on the left of a string fails (RocketMQ does). A boolean and
//     a number are unequal, the left ordered first. Float64s order as
//     Java's Double.compare: NaN above all, -0 below 0.
//   - x BETWEEN a AND b is x >= a AND x <= b; x NOT BETWEEN a AND b is
//     x < a OR x > b.
//   - IN compares strings exactly: null for a missing property; NOT IN
//     flips true and false, not null.
//   - IS NULL and IS NOT NULL test presence.
//   - CONTAINS, STARTSWITH and ENDSWITH compare strings exactly; they and
//     their NOT forms are false (not null) for a missing property or a
//     non-string, and false for an empty search string.
//   - AND is false if either side is false, else null if either is null,
//     else true; OR is true if either is true, else null if either is
//     null, else false. Both decide on the left side alone when they can.
//   - NOT flips true and false; null stays null.
//   - A bare property used as a condition is null when missing and false
//     otherwise: properties are strings, never booleans.
//   - Unary minus negates a number (int32 wrapping as Java's int); minus
//     a string (a property) is null.
//
// Strings are compared byte for byte; RocketMQ compares them after
// decoding UTF-8, which makes a difference for invalid UTF-8 only.
//
// The package's tests hold a golden file of generated expressions and
// what RocketMQ's own filter code made of them on a set of messages;
// this package agrees with every one.
package filter
