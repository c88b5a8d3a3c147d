package message

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	v4in6 := sampleV4()
	v4in6.BornHost = netip.MustParseAddrPort("[::ffff:192.168.1.10]:51234")
	mixed := sampleV6()
	mixed.BornHost = netip.MustParseAddrPort("1.2.3.4:5")
	zoned := sampleV6()
	zoned.StoreHost = netip.MustParseAddrPort("[fe80::1%eth0]:10911")
	emptyBody := sampleV4()
	emptyBody.Body = nil
	emptyBody2 := sampleV4()
	emptyBody2.Body = []byte{}
	noProps := sampleV4()
	noProps.Properties = nil
	emptyProps := sampleV4()
	emptyProps.Properties = map[string]string{}
	emptyValue := sampleV4()
	emptyValue.Properties = map[string]string{"EMPTY": ""}
	many := sampleV6()
	many.Properties = manyProps(1000)
	atLimit := sampleV4()
	atLimit.Properties = map[string]string{"K": strings.Repeat("v", MaxPropertiesSize-3)}
	bigBody := sampleV4()
	bigBody.Body = bytes.Repeat([]byte{0xA5}, MaxBodySize)
	longTopic := sampleV4()
	longTopic.Topic = strings.Repeat("t", MaxTopicLength)
	wrongBits := sampleV4()
	wrongBits.SysFlag |= SysFlagBornHostV6 | SysFlagStoreHostV6 // Append must clear them
	extremes := Message{
		QueueID: -1, Flag: -1 << 31, QueueOffset: -1, PhysicalOffset: 1<<63 - 1, SysFlag: -1,
		BornTimestamp: -1 << 63, BornHost: netip.MustParseAddrPort("[::]:0"),
		StoreTimestamp: 1<<63 - 1, StoreHost: netip.MustParseAddrPort("255.255.255.255:65535"),
		ReconsumeTimes: 1<<31 - 1, PreparedTransactionOffset: -1, Body: []byte{0}, Topic: "%|_-aZ09",
	}

	for name, m := range map[string]Message{
		"ipv4": sampleV4(), "ipv6": sampleV6(), "ipv4-mapped": v4in6, "mixed": mixed, "zone": zoned,
		"nil body": emptyBody, "empty body": emptyBody2, "nil properties": noProps,
		"empty properties": emptyProps, "empty value": emptyValue, "many properties": many,
		"properties at limit": atLimit, "body at limit": bigBody, "topic at limit": longTopic,
		"wrong v6 bits": wrongBits, "extremes": extremes,
	} {
		t.Run(name, func(t *testing.T) {
			orig := m
			size, err := Size(&m)
			require.NoError(t, err)
			prefix := []byte("prefix")
			b, err := Append(prefix, &m)
			require.NoError(t, err)
			require.Equal(t, "prefix", string(b[:len(prefix)]), "Append must keep dst")
			rec := b[len(prefix):]
			require.Len(t, rec, size)
			require.Equal(t, orig, m, "Append must not modify the message")

			got, n, err := Decode(append(rec, "trailing"...))
			require.NoError(t, err)
			require.Equal(t, size, n)
			require.Equal(t, normalize(m), got)

			v, err := Parse(rec, true)
			require.NoError(t, err)
			require.Equal(t, size, v.Size)
			require.Equal(t, m.Topic, string(v.Topic))
			require.Equal(t, EncodeProperties(m.Properties), string(v.Properties))
			require.Equal(t, got.SysFlag, v.SysFlag)

			// Re-encoding the decoded message gives the same bytes.
			again, err := Append(nil, &got)
			require.NoError(t, err)
			require.Equal(t, rec, again)
		})
	}
}

func TestAppendSetsIPv6Bits(t *testing.T) {
	m := sampleV6()
	m.SysFlag = SysFlagCompressed
	b := encode(t, m)
	sys := int32(binary.BigEndian.Uint32(b[OffSysFlag:]))
	require.Equal(t, int32(SysFlagCompressed|SysFlagBornHostV6|SysFlagStoreHostV6), sys)
	require.Len(t, b, FixedSizeV4+2*(HostSizeV6-HostSizeV4)+len(m.Body)+len(m.Topic)+len(EncodeProperties(m.Properties)))

	m.BornHost = netip.MustParseAddrPort("1.1.1.1:1")
	b = encode(t, m)
	sys = int32(binary.BigEndian.Uint32(b[OffSysFlag:]))
	require.Equal(t, int32(SysFlagCompressed|SysFlagStoreHostV6), sys)
}

func TestAppendFixedOffsets(t *testing.T) {
	m := sampleV4()
	b := encode(t, m)
	be := binary.BigEndian
	require.Equal(t, uint32(len(b)), be.Uint32(b[OffTotalSize:]))
	require.Equal(t, MagicV1, be.Uint32(b[OffMagicCode:]))
	require.Equal(t, uint32(BodyCRC(m.Body)), be.Uint32(b[OffBodyCRC:]))
	require.Equal(t, uint32(m.QueueID), be.Uint32(b[OffQueueID:]))
	require.Equal(t, uint32(m.Flag), be.Uint32(b[OffFlag:]))
	require.Equal(t, uint64(m.QueueOffset), be.Uint64(b[OffQueueOffset:]))
	require.Equal(t, uint64(m.PhysicalOffset), be.Uint64(b[OffPhysicalOffset:]))
	require.Equal(t, uint32(m.SysFlag), be.Uint32(b[OffSysFlag:]))
	require.Equal(t, uint64(m.BornTimestamp), be.Uint64(b[OffBornTimestamp:]))
	require.Equal(t, []byte{192, 168, 1, 10, 0, 0, 0xC8, 0x22}, b[OffBornHost:OffBornHost+HostSizeV4])
	// RocketMQ's MessageDecoder.MESSAGE_STORE_TIMESTAMP_POSITION for IPv4.
	require.Equal(t, uint64(m.StoreTimestamp), be.Uint64(b[56:]))
	require.Equal(t, 91, FixedSizeV4)
}

func TestBodyCRCIsMasked(t *testing.T) {
	// crc32.ChecksumIEEE("a") is 0xE8B7BE43; RocketMQ clears the top bit.
	require.Equal(t, int32(0x68B7BE43), BodyCRC([]byte("a")))
	require.Equal(t, int32(0), BodyCRC(nil))
}

func TestAppendErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Message)
		want   error
	}{
		{"body too large", func(m *Message) { m.Body = make([]byte, MaxBodySize+1) }, ErrMessageTooLarge},
		{"empty topic", func(m *Message) { m.Topic = "" }, ErrBadTopic},
		{"long topic", func(m *Message) { m.Topic = strings.Repeat("t", MaxTopicLength+1) }, ErrBadTopic},
		{"topic with space", func(m *Message) { m.Topic = "a b" }, ErrBadTopic},
		{"topic with dot", func(m *Message) { m.Topic = "a.b" }, ErrBadTopic},
		{"topic non-ASCII", func(m *Message) { m.Topic = "tópico" }, ErrBadTopic},
		{"properties too large", func(m *Message) {
			m.Properties = map[string]string{"K": strings.Repeat("v", MaxPropertiesSize-2)}
		}, ErrPropertiesTooLarge},
		{"many properties too large", func(m *Message) { m.Properties = manyProps(2000) }, ErrPropertiesTooLarge},
		{"empty key", func(m *Message) { m.Properties = map[string]string{"": "v"} }, ErrBadProperty},
		{"key with \\x01", func(m *Message) { m.Properties = map[string]string{"a\x01": "v"} }, ErrBadProperty},
		{"key with \\x02", func(m *Message) { m.Properties = map[string]string{"a\x02": "v"} }, ErrBadProperty},
		{"value with \\x01", func(m *Message) { m.Properties = map[string]string{"k": "\x01"} }, ErrBadProperty},
		{"value with \\x02", func(m *Message) { m.Properties = map[string]string{"k": "v\x02w"} }, ErrBadProperty},
		{"no born host", func(m *Message) { m.BornHost = netip.AddrPort{} }, ErrBadHost},
		{"no store host", func(m *Message) { m.StoreHost = netip.AddrPort{} }, ErrBadHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleV4()
			tt.modify(&m)
			_, err := Size(&m)
			require.ErrorIs(t, err, tt.want)
			dst := []byte("keep")
			out, err := Append(dst, &m)
			require.ErrorIs(t, err, tt.want)
			require.Contains(t, err.Error(), "message: ")
			require.Equal(t, "keep", string(out))
		})
	}
}

func TestCheckTopic(t *testing.T) {
	for _, ok := range []string{"T", "TopicTest", "%RETRY%group", "%DLQ%group", "ns%topic", "a|b", "A-Z_0-9"} {
		require.NoError(t, CheckTopic(ok), ok)
	}
	for _, bad := range []string{"", "a/b", "a:b", "a\x00", "日本", strings.Repeat("x", 128)} {
		require.ErrorIs(t, CheckTopic(bad), ErrBadTopic, bad)
	}
}

func TestHelpers(t *testing.T) {
	m := sampleV4()
	require.Equal(t, "TagA", m.Tags())
	require.Equal(t, "C0A8010A1F9018B4AAC2", m.UniqKey())
	require.Equal(t, []string{"order-1", "order-2"}, m.Keys())

	m.Properties[PropertyKeys] = "  a  b "
	require.Equal(t, []string{"a", "b"}, m.Keys())

	var empty Message
	require.Empty(t, empty.Tags())
	require.Empty(t, empty.UniqKey())
	require.Nil(t, empty.Keys())
}

func TestPatchOffsets(t *testing.T) {
	m := sampleV4()
	m.QueueOffset, m.PhysicalOffset = 0, 0
	b := encode(t, m)
	PatchQueueOffset(b, 77)
	PatchPhysicalOffset(b, 1<<40+5)
	got, _, err := Decode(b)
	require.NoError(t, err, "patching must keep the record valid")
	require.Equal(t, int64(77), got.QueueOffset)
	require.Equal(t, int64(1<<40+5), got.PhysicalOffset)
	m.QueueOffset, m.PhysicalOffset = 77, 1<<40+5
	require.Equal(t, encode(t, m), b)
}

func TestAppendNoAlloc(t *testing.T) {
	m := sampleV4()
	buf := encode(t, m)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = Append(buf[:0], &m); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs, "Append into a large enough buffer must not allocate")
}

// TestAppendRawProperties: a record built from RawProperties stores them
// byte for byte, in the client's order, and reads back like one built from
// the same pairs as a map; too large raw properties are refused.
func TestAppendRawProperties(t *testing.T) {
	m := sampleV4()
	m.Properties = map[string]string{"IGNORED": "x"}
	raw, hasUniq, err := CheckRawProperties("UNIQ_KEY\x01u1\x02KEYS\x01k1 k2\x02TAGS\x01t")
	require.NoError(t, err)
	require.True(t, hasUniq)
	require.Equal(t, "UNIQ_KEY\x01u1\x02KEYS\x01k1 k2\x02TAGS\x01t\x02", raw)
	m.RawProperties = raw
	rec, err := Append(nil, &m)
	require.NoError(t, err)
	size, err := Size(&m)
	require.NoError(t, err)
	require.Len(t, rec, size)
	require.True(t, bytes.HasSuffix(rec, []byte(raw)), "properties stored as sent")
	got, _, err := Decode(rec)
	require.NoError(t, err)
	require.Equal(t, map[string]string{PropertyUniqKey: "u1", PropertyKeys: "k1 k2", PropertyTags: "t"}, got.Properties)

	require.Equal(t, "A\x01\x02B\x01b\x02UNIQ_KEY\x01new\x02", SetRawProperty("A\x01\x02UNIQ_KEY\x01\x02B\x01b\x02", PropertyUniqKey, "new"))
	require.Equal(t, "UNIQ_KEY\x01new\x02", SetRawProperty("", PropertyUniqKey, "new"))

	m.RawProperties = "K\x01" + strings.Repeat("v", MaxPropertiesSize) + "\x02"
	_, err = Append(nil, &m)
	require.ErrorIs(t, err, ErrPropertiesTooLarge)
	_, _, err = CheckRawProperties(m.RawProperties)
	require.ErrorIs(t, err, ErrPropertiesTooLarge)
}
