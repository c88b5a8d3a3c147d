package message

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Errors returned by Size and Append for a message that cannot be stored.
// They are wrapped with context; test them with errors.Is.
var (
	// ErrMessageTooLarge is returned when the body exceeds MaxBodySize.
	ErrMessageTooLarge = errors.New("message: body too large")
	// ErrBadTopic is returned for a topic that is empty, longer than
	// MaxTopicLength bytes, or not made of [%|a-zA-Z0-9_-].
	ErrBadTopic = errors.New("message: bad topic")
	// ErrPropertiesTooLarge is returned when the encoded properties exceed
	// MaxPropertiesSize bytes.
	ErrPropertiesTooLarge = errors.New("message: properties too large")
	// ErrBadProperty is returned for a property with an empty name or a
	// name or value containing \x01 or \x02, and by DecodeProperties for a
	// malformed properties string.
	ErrBadProperty = errors.New("message: bad property")
	// ErrBadHost is returned when BornHost or StoreHost is not a valid
	// address (the zero netip.AddrPort).
	ErrBadHost = errors.New("message: bad host address")
)

// Message is one CommitLog record, decoded. Field order follows the record.
type Message struct {
	QueueID        int32
	Flag           int32
	QueueOffset    int64 // consume-queue offset, a count of messages
	PhysicalOffset int64 // CommitLog byte offset of the record
	// SysFlag holds SysFlag* bits. Append sets SysFlagBornHostV6 and
	// SysFlagStoreHostV6 from the hosts and ignores them here.
	SysFlag       int32
	BornTimestamp int64 // producer clock, ms since the epoch
	// BornHost and StoreHost: IPv4 addresses, and IPv4-mapped IPv6
	// addresses, are stored in 4 bytes (Java does the same); other IPv6
	// addresses in 16. Zones are not stored.
	BornHost                  netip.AddrPort
	StoreTimestamp            int64 // broker clock, ms since the epoch
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	// Body is stored as is; it is compressed if SysFlag has
	// SysFlagCompressed. A decoded Body aliases the decoded buffer.
	Body  []byte
	Topic string
	// Properties may be nil. A decoded message without properties has nil.
	Properties map[string]string
	// RawProperties, if not empty, are the properties already encoded
	// (CheckRawProperties form: name \x01 value \x02, for every pair) and
	// are stored as they are, in their order; Properties is then ignored.
	// A broker uses it to store what a client sent without a map.
	RawProperties string
}

// Tags returns the TAGS property, or "".
func (m *Message) Tags() string { return m.Properties[PropertyTags] }

// UniqKey returns the UNIQ_KEY property (the client's message ID), or "".
func (m *Message) UniqKey() string { return m.Properties[PropertyUniqKey] }

// Keys returns the business keys of the KEYS property, split on spaces,
// with empty keys dropped as the broker's index does. It is nil if there
// are none.
func (m *Message) Keys() []string { return SplitKeys(m.Properties[PropertyKeys]) }

// SplitKeys splits a KEYS property value into its business keys, as
// Message.Keys does; nil if there are none.
func SplitKeys(v string) []string {
	var keys []string
	for k := range strings.SplitSeq(v, KeySeparator) {
		if k != "" {
			if keys == nil {
				keys = make([]string, 0, strings.Count(v, KeySeparator)+1)
			}
			keys = append(keys, k)
		}
	}
	return keys
}

// Size returns the size of m's record, or the error Append would return.
func Size(m *Message) (int, error) {
	if len(m.Body) > MaxBodySize {
		return 0, fmt.Errorf("message: body of %d bytes, limit %d: %w", len(m.Body), MaxBodySize, ErrMessageTooLarge)
	}
	if err := CheckTopic(m.Topic); err != nil {
		return 0, err
	}
	born, err := hostSize("born", m.BornHost)
	if err != nil {
		return 0, err
	}
	store, err := hostSize("store", m.StoreHost)
	if err != nil {
		return 0, err
	}
	props := len(m.RawProperties)
	if props == 0 {
		var err error
		if props, err = propertiesSize(m.Properties); err != nil {
			return 0, err
		}
	} else if props > MaxPropertiesSize {
		return 0, fmt.Errorf("message: properties encode to %d bytes, limit %d: %w", props, MaxPropertiesSize, ErrPropertiesTooLarge)
	}
	return FixedSizeV4 - 2*HostSizeV4 + born + store + len(m.Body) + len(m.Topic) + props, nil
}

// Append appends m's record to dst and returns the extended slice. It
// computes TOTALSIZE and BODYCRC, sets the IPv6 bits of SYSFLAG from the
// hosts, writes MagicV1 and sorts the properties by name. On error dst is
// returned unchanged. m is not modified.
func Append(dst []byte, m *Message) ([]byte, error) {
	size, err := Size(m)
	if err != nil {
		return dst, err
	}
	sysFlag := m.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	if !isV4(m.BornHost.Addr()) {
		sysFlag |= SysFlagBornHostV6
	}
	if !isV4(m.StoreHost.Addr()) {
		sysFlag |= SysFlagStoreHostV6
	}
	dst = slices.Grow(dst, size)
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(size))            // TOTALSIZE
	dst = be.AppendUint32(dst, MagicV1)                 // MAGICCODE
	dst = be.AppendUint32(dst, uint32(BodyCRC(m.Body))) // BODYCRC
	dst = be.AppendUint32(dst, uint32(m.QueueID))
	dst = be.AppendUint32(dst, uint32(m.Flag))
	dst = be.AppendUint64(dst, uint64(m.QueueOffset))
	dst = be.AppendUint64(dst, uint64(m.PhysicalOffset))
	dst = be.AppendUint32(dst, uint32(sysFlag))
	dst = be.AppendUint64(dst, uint64(m.BornTimestamp))
	dst = appendHost(dst, m.BornHost)
	dst = be.AppendUint64(dst, uint64(m.StoreTimestamp))
	dst = appendHost(dst, m.StoreHost)
	dst = be.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = be.AppendUint64(dst, uint64(m.PreparedTransactionOffset))
	dst = be.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	dst = append(dst, byte(len(m.Topic))) // V1: one byte
	dst = append(dst, m.Topic...)
	propLenAt := len(dst)
	dst = be.AppendUint16(dst, 0) // PROPERTIESLEN, patched below
	if m.RawProperties != "" {
		dst = append(dst, m.RawProperties...)
	} else {
		dst = appendProperties(dst, m.Properties)
	}
	be.PutUint16(dst[propLenAt:], uint16(len(dst)-propLenAt-2))
	return dst, nil
}

// CheckTopic returns an error wrapping ErrBadTopic unless topic can be
// stored: 1 to MaxTopicLength bytes of [%|a-zA-Z0-9_-].
func CheckTopic(topic string) error {
	if topic == "" || len(topic) > MaxTopicLength {
		return fmt.Errorf("message: topic of %d bytes, want 1 to %d: %w", len(topic), MaxTopicLength, ErrBadTopic)
	}
	if !validTopic(topic) {
		return fmt.Errorf("message: topic %q has characters outside [%%|a-zA-Z0-9_-]: %w", topic, ErrBadTopic)
	}
	return nil
}

// validTopic reports whether topic is made of [%|a-zA-Z0-9_-] only.
func validTopic[S ~string | ~[]byte](topic S) bool {
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '%' || c == '|' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// isV4 reports whether a is stored in 4 bytes.
func isV4(a netip.Addr) bool { return a.Is4() || a.Is4In6() }

func hostSize(which string, h netip.AddrPort) (int, error) {
	switch {
	case !h.Addr().IsValid():
		return 0, fmt.Errorf("message: %s host %v: %w", which, h, ErrBadHost)
	case isV4(h.Addr()):
		return HostSizeV4, nil
	default:
		return HostSizeV6, nil
	}
}

// appendHost appends the address (4 or 16 bytes) and the port as an int32.
func appendHost(dst []byte, h netip.AddrPort) []byte {
	a := h.Addr().Unmap()
	if a.Is4() {
		ip := a.As4()
		dst = append(dst, ip[:]...)
	} else {
		ip := a.As16()
		dst = append(dst, ip[:]...)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(h.Port()))
}
