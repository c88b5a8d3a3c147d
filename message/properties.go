package message

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Separators of the properties string: name NameValueSeparator value
// PropertySeparator, for every pair including the last.
const (
	NameValueSeparator = '\x01'
	PropertySeparator  = '\x02'
)

// KeySeparator separates the business keys in the KEYS property.
const KeySeparator = " "

// Property names (RocketMQ's MessageConst, plus names the 5.x broker and
// clients use). They are part of the wire and on-disk format.
const (
	PropertyKeys                     = "KEYS"
	PropertyTags                     = "TAGS"
	PropertyWaitStoreMsgOK           = "WAIT"
	PropertyDelayTimeLevel           = "DELAY"
	PropertyRetryTopic               = "RETRY_TOPIC"
	PropertyRealTopic                = "REAL_TOPIC"
	PropertyRealQueueID              = "REAL_QID"
	PropertyTransactionPrepared      = "TRAN_MSG"
	PropertyProducerGroup            = "PGROUP"
	PropertyMinOffset                = "MIN_OFFSET"
	PropertyMaxOffset                = "MAX_OFFSET"
	PropertyBuyerID                  = "BUYER_ID"
	PropertyOriginMessageID          = "ORIGIN_MESSAGE_ID"
	PropertyTransferFlag             = "TRANSFER_FLAG"
	PropertyCorrectionFlag           = "CORRECTION_FLAG"
	PropertyMQ2Flag                  = "MQ2_FLAG"
	PropertyReconsumeTime            = "RECONSUME_TIME"
	PropertyMsgRegion                = "MSG_REGION"
	PropertyTraceSwitch              = "TRACE_ON"
	PropertyUniqKey                  = "UNIQ_KEY"
	PropertyExtendUniqInfo           = "EXTEND_UNIQ_INFO"
	PropertyMaxReconsumeTimes        = "MAX_RECONSUME_TIMES"
	PropertyConsumeStartTime         = "CONSUME_START_TIME"
	PropertyInnerNum                 = "INNER_NUM"
	PropertyInnerBase                = "INNER_BASE"
	PropertyCheckImmunityTimeSeconds = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropertyTranPreparedQueueOffset  = "TRAN_PREPARED_QUEUE_OFFSET"
	PropertyTransactionID            = "__transactionId__"
	PropertyTransactionCheckTimes    = "TRANSACTION_CHECK_TIMES"
	PropertyInstanceID               = "INSTANCE_ID"
	PropertyCorrelationID            = "CORRELATION_ID"
	PropertyReplyToClient            = "REPLY_TO_CLIENT"
	PropertyTTL                      = "TTL"
	PropertyArriveTime               = "ARRIVE_TIME"
	PropertyCluster                  = "CLUSTER"
	PropertyMessageType              = "MSG_TYPE"
	PropertyPopCK                    = "POP_CK"
	PropertyFirstPopTime             = "1ST_POP_TIME"
	PropertyShardingKey              = "__SHARDINGKEY"
	PropertyTimerDeliverMS           = "TIMER_DELIVER_MS"
	PropertyTimerDelaySec            = "TIMER_DELAY_SEC"
	PropertyTimerDelayMS             = "TIMER_DELAY_MS"
	PropertyTimerOutMS               = "TIMER_OUT_MS"
	PropertyCRC32                    = "__CRC32#"
	PropertyDLQOriginTopic           = "DLQ_ORIGIN_TOPIC"
	PropertyDLQOriginMessageID       = "DLQ_ORIGIN_MESSAGE_ID"
)

// propertiesSize returns the encoded size of props, checking every pair.
func propertiesSize(props map[string]string) (int, error) {
	n := 0
	for k, v := range props {
		if err := checkProperty(k, v); err != nil {
			return 0, err
		}
		n += len(k) + 1 + len(v) + 1
	}
	if n > MaxPropertiesSize {
		return 0, fmt.Errorf("message: properties encode to %d bytes, limit %d: %w",
			n, MaxPropertiesSize, ErrPropertiesTooLarge)
	}
	return n, nil
}

func checkProperty(k, v string) error {
	switch {
	case k == "":
		return fmt.Errorf("message: property with empty name: %w", ErrBadProperty)
	case strings.ContainsAny(k, "\x01\x02"):
		return fmt.Errorf("message: property name %q contains a separator: %w", k, ErrBadProperty)
	case strings.ContainsAny(v, "\x01\x02"):
		return fmt.Errorf("message: value of property %q contains a separator: %w", k, ErrBadProperty)
	}
	return nil
}

// appendProperties appends the encoding of props with keys sorted. The
// pairs must have been checked.
func appendProperties(dst []byte, props map[string]string) []byte {
	if len(props) == 0 {
		return dst
	}
	var stack [16]string // typical messages have a handful of properties
	keys := stack[:0]
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = append(dst, k...)
		dst = append(dst, NameValueSeparator)
		dst = append(dst, props[k]...)
		dst = append(dst, PropertySeparator)
	}
	return dst
}

// EncodeProperties returns the properties string of props as RocketMQ's
// messageProperties2String writes it, every pair followed by \x02, with keys
// sorted so that the result is deterministic. It does not check the pairs;
// Append and Size do.
func EncodeProperties(props map[string]string) string {
	n := 0
	for k, v := range props {
		n += len(k) + len(v) + 2
	}
	return string(appendProperties(make([]byte, 0, n), props))
}

// CheckRawProperties validates a properties string by the rules of
// DecodeProperties, without building a map, and returns it in stored form:
// every pair followed by \x02 (added after the last pair if missing). It
// also reports whether it has a non-empty UNIQ_KEY. Records built from it
// (Message.RawProperties) keep the client's order of pairs.
func CheckRawProperties(s string) (raw string, hasUniq bool, err error) {
	return checkRawProperties(s, true)
}

// LenientRawProperties is CheckRawProperties with the leniency of
// RocketMQ's broker, which skips what it cannot read as a pair: an empty
// pair, a pair without a name/value separator or with an empty name is
// dropped, and of a repeated name the last value is kept. dropped counts
// the pairs that were left out. A value containing the name/value
// separator is still refused: it cannot be stored without changing it. The
// common case (a clean string) costs what CheckRawProperties costs.
func LenientRawProperties(s string) (raw string, hasUniq bool, dropped int, err error) {
	raw, hasUniq, err = checkRawProperties(s, true)
	if err == nil || !errors.Is(err, ErrBadProperty) {
		return raw, hasUniq, 0, err
	}
	type pair struct{ k, v string }
	var pairs []pair
	items := strings.Split(strings.TrimSuffix(s, string(PropertySeparator)), string(PropertySeparator))
	for _, item := range items {
		k, v, ok := strings.Cut(item, string(NameValueSeparator))
		if !ok || k == "" {
			dropped++
			continue
		}
		if i := slices.IndexFunc(pairs, func(p pair) bool { return p.k == k }); i >= 0 {
			pairs = slices.Delete(pairs, i, i+1)
			dropped++
		}
		pairs = append(pairs, pair{k, v})
	}
	var b strings.Builder
	for _, p := range pairs {
		b.WriteString(p.k)
		b.WriteByte(NameValueSeparator)
		b.WriteString(p.v)
		b.WriteByte(PropertySeparator)
	}
	raw, hasUniq, err = checkRawProperties(b.String(), true)
	return raw, hasUniq, dropped, err
}

// checkRawProperties is CheckRawProperties; limit enforces
// MaxPropertiesSize.
func checkRawProperties(s string, limit bool) (raw string, hasUniq bool, err error) {
	if s == "" || s == string(PropertySeparator) {
		return "", false, nil
	}
	if limit && len(s) > MaxPropertiesSize {
		return "", false, fmt.Errorf("message: properties of %d bytes, limit %d: %w", len(s), MaxPropertiesSize, ErrPropertiesTooLarge)
	}
	body := strings.TrimSuffix(s, string(PropertySeparator))
	n := strings.Count(body, string(PropertySeparator)) + 1
	var seen map[string]bool // only for many pairs; a handful is compared pairwise
	if n > 16 {
		seen = make(map[string]bool, n)
	}
	for i, rest := 0, body; rest != ""; i++ {
		done := body[:len(body)-len(rest)] // the pairs before this one, each with its \x02
		item, r, more := strings.Cut(rest, string(PropertySeparator))
		if more && r == "" {
			return "", false, fmt.Errorf("message: property %d: empty pair: %w", i+1, ErrBadProperty)
		}
		rest = r
		k, v, ok := strings.Cut(item, string(NameValueSeparator))
		switch {
		case !ok:
			return "", false, fmt.Errorf("message: property %d: no name/value separator: %w", i, ErrBadProperty)
		case k == "":
			return "", false, fmt.Errorf("message: property %d: empty name: %w", i, ErrBadProperty)
		case strings.IndexByte(v, NameValueSeparator) >= 0:
			return "", false, fmt.Errorf("message: property %q: value contains a separator: %w", k, ErrBadProperty)
		}
		dup := false
		if seen != nil {
			dup = seen[k]
			seen[k] = true
		} else {
			_, dup = RawPropertyValue(done, k)
		}
		if dup {
			return "", false, fmt.Errorf("message: property %q: repeated: %w", k, ErrBadProperty)
		}
		if k == PropertyUniqKey && v != "" {
			hasUniq = true
		}
	}
	if len(body) == len(s) {
		if limit && len(s)+1 > MaxPropertiesSize {
			return "", false, fmt.Errorf("message: properties of %d bytes, limit %d: %w", len(s)+1, MaxPropertiesSize, ErrPropertiesTooLarge)
		}
		s += string(PropertySeparator)
	}
	return s, hasUniq, nil
}

// SetRawProperty returns raw (CheckRawProperties form) with the pair of
// name, if any, removed and name=value appended. name and value must be
// valid (checkProperty).
func SetRawProperty(raw, name, value string) string {
	out := make([]byte, 0, len(raw)+len(name)+len(value)+2)
	for rest := raw; rest != ""; {
		item, r, _ := strings.Cut(rest, string(PropertySeparator))
		rest = r
		if k, _, _ := strings.Cut(item, string(NameValueSeparator)); k != name {
			out = append(out, item...)
			out = append(out, PropertySeparator)
		}
	}
	out = append(out, name...)
	out = append(out, NameValueSeparator)
	out = append(out, value...)
	out = append(out, PropertySeparator)
	return string(out)
}

// DeleteRawProperty returns raw (CheckRawProperties form) without the
// pair of name, if any.
func DeleteRawProperty(raw, name string) string {
	if _, ok := RawPropertyValue(raw, name); !ok {
		return raw
	}
	out := make([]byte, 0, len(raw))
	for rest := raw; rest != ""; {
		item, r, _ := strings.Cut(rest, string(PropertySeparator))
		rest = r
		if k, _, _ := strings.Cut(item, string(NameValueSeparator)); k != name {
			out = append(out, item...)
			out = append(out, PropertySeparator)
		}
	}
	return string(out)
}

// RawPropertyValue is PropertyBytes for an encoded properties string such
// as Message.RawProperties: the value is a substring of raw, not a copy. (It
// is written twice, for string and []byte, because a generic version that
// takes the IndexByte to use measured ~50 % slower on apply's hot path.)
func RawPropertyValue(raw, key string) (string, bool) {
	for len(raw) > 0 {
		item := raw
		if i := strings.IndexByte(raw, PropertySeparator); i >= 0 {
			item, raw = raw[:i], raw[i+1:]
		} else {
			raw = ""
		}
		i := strings.IndexByte(item, NameValueSeparator)
		if i >= 0 && item[:i] == key {
			return item[i+1:], true
		}
	}
	return "", false
}

// DecodeProperties parses a properties string. Empty input gives a nil map;
// the separator after the last pair is optional. Unlike Java's parser, which
// skips what it cannot read, it returns an error wrapping ErrBadProperty for
// an empty pair, a pair without \x01, a value containing \x01, an empty name
// or a repeated name. Values may be empty (Java clients drop such pairs).
func DecodeProperties(s string) (map[string]string, error) {
	raw, _, err := checkRawProperties(s, false)
	if err != nil || raw == "" {
		return nil, err
	}
	props := make(map[string]string, strings.Count(raw, string(PropertySeparator)))
	for raw != "" {
		item, rest, _ := strings.Cut(raw, string(PropertySeparator))
		raw = rest
		k, v, _ := strings.Cut(item, string(NameValueSeparator))
		props[k] = v
	}
	return props, nil
}

// PropertyBytes finds the value of property key in raw, an encoded
// properties string such as View.Properties, without building a map. The
// value aliases raw. It returns the first match and skips malformed pairs.
func PropertyBytes(raw []byte, key string) ([]byte, bool) {
	for len(raw) > 0 {
		item := raw
		if i := bytes.IndexByte(raw, PropertySeparator); i >= 0 {
			item, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		i := bytes.IndexByte(item, NameValueSeparator)
		if i >= 0 && string(item[:i]) == key {
			return item[i+1:], true
		}
	}
	return nil, false
}

// PropertyValue is PropertyBytes returning a copy of the value as a string.
func PropertyValue(raw []byte, key string) (string, bool) {
	v, ok := PropertyBytes(raw, key)
	if !ok {
		return "", false
	}
	return string(v), true
}
