package message

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeHandBuiltV2(t *testing.T) {
	r := newRaw()
	r.magic = MagicV2
	r.topic = strings.Repeat("V2-topic_", 20) // 180 bytes: V2 only
	r.sysFlag = SysFlagBornHostV6
	r.bornHost = netip.MustParseAddr("2001:db8::7").AsSlice()
	r.props = "KEYS\x01k1 k2\x02TAGS\x01tg\x02"
	b := r.bytes()

	m, n, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, len(b), n)
	require.Equal(t, Message{
		QueueID: 1, Flag: 2, QueueOffset: 3, PhysicalOffset: 4, SysFlag: SysFlagBornHostV6,
		BornTimestamp: 5, BornHost: netip.MustParseAddrPort("[2001:db8::7]:1234"),
		StoreTimestamp: 6, StoreHost: netip.MustParseAddrPort("10.0.0.1:10911"),
		ReconsumeTimes: 7, PreparedTransactionOffset: 8, Body: []byte("body"), Topic: r.topic,
		Properties: map[string]string{"KEYS": "k1 k2", "TAGS": "tg"},
	}, m)
	require.Equal(t, []string{"k1", "k2"}, m.Keys())

	// Append cannot write that topic.
	_, err = Append(nil, &m)
	require.ErrorIs(t, err, ErrBadTopic)

	// A short topic in a V2 record re-encodes as V1 and decodes the same.
	r.topic = "short"
	m, _, err = Decode(r.bytes())
	require.NoError(t, err)
	m2, _, err := Decode(encode(t, m))
	require.NoError(t, err)
	require.Equal(t, m, m2)
}

func TestDecodeMatchesAppend(t *testing.T) {
	// The independent test builder and Append agree byte for byte.
	r := newRaw()
	r.props = "a\x01b\x02c\x01\x02"
	m, _, err := Decode(r.bytes())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "b", "c": ""}, m.Properties)
	require.Equal(t, r.bytes(), encode(t, m))
}

func TestDecodeTruncated(t *testing.T) {
	for name, m := range map[string]Message{"ipv4": sampleV4(), "ipv6": sampleV6()} {
		full := encode(t, m)
		for i := range len(full) {
			// An exact-capacity copy, so that reading past len panics.
			b := bytes.Clone(full[:i])
			_, _, err := Decode(b)
			requireCorrupt(t, err, "%s truncated at %d", name, i)
			_, err = Parse(b, false)
			requireCorrupt(t, err, "%s truncated at %d", name, i)
		}
	}
}

func TestDecodeBodyBitFlip(t *testing.T) {
	m := sampleV4()
	b := encode(t, m)
	offBody := len(b) - len(m.Body) - 1 - len(m.Topic) - 2 - len(EncodeProperties(m.Properties))
	require.Equal(t, m.Body, b[offBody:offBody+len(m.Body)])
	for bit := range 8 * len(m.Body) {
		c := bytes.Clone(b)
		c[offBody+bit/8] ^= 1 << (bit % 8)
		_, _, err := Decode(c)
		ce := requireCorrupt(t, err, "bit %d", bit)
		require.Equal(t, OffBodyCRC, ce.Offset)
		_, err = Parse(c, true)
		requireCorrupt(t, err)
		_, err = Parse(c, false)
		require.NoError(t, err, "Parse without CRC check ignores the body")
	}
	// A flipped CRC bit too.
	c := bytes.Clone(b)
	c[OffBodyCRC+3] ^= 1
	_, _, err := Decode(c)
	requireCorrupt(t, err)
}

func TestDecodeWrongTotalSize(t *testing.T) {
	b := encode(t, sampleV4())
	for _, delta := range []int{-1, 1, 100, -(len(b) - FixedSizeV4), -len(b), -len(b) - 1} {
		c := append(bytes.Clone(b), make([]byte, 200)...)
		binary.BigEndian.PutUint32(c[OffTotalSize:], uint32(len(b)+delta))
		_, _, err := Decode(c)
		ce := requireCorrupt(t, err, "delta %d", delta)
		require.NotEmpty(t, ce.Reason)
		require.Contains(t, ce.Error(), "message: corrupt record at offset")
	}
	c := bytes.Clone(b)
	binary.BigEndian.PutUint32(c[OffTotalSize:], 1<<31) // negative as int32
	_, _, err := Decode(c)
	requireCorrupt(t, err)
}

func TestDecodeCorrupt(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*raw)
		offset int
	}{
		{"bad magic", func(r *raw) { r.magic = 0xDAA320A8 }, OffMagicCode},
		{"blank magic", func(r *raw) { r.magic = MagicBlank }, OffMagicCode},
		{"bad CRC", func(r *raw) { r.bodyCRC = i32(12345) }, OffBodyCRC},
		{"unmasked CRC", func(r *raw) { r.bodyCRC = i32(BodyCRC(r.body) | -1<<31) }, OffBodyCRC},
		{"negative body length", func(r *raw) { r.bodyLen = i32(-1) }, 84},
		{"body length overrun", func(r *raw) { r.bodyLen = i32(1000) }, 84},
		{"body length one too long", func(r *raw) { r.bodyLen = i32(int32(len(r.body)) + 1) }, 93},
		{"empty topic", func(r *raw) { r.topic = "" }, 92},
		{"topic length overrun", func(r *raw) { r.topicLen = 100 }, 92},
		{"V1 topic length over 127", func(r *raw) { r.topic = strings.Repeat("t", 128) }, 92},
		{"V2 topic length over 32767", func(r *raw) { r.magic = MagicV2; r.topicLen = 40000 }, 92},
		{"bad topic characters", func(r *raw) { r.topic = "a b" }, 93},
		{"properties length short", func(r *raw) { r.propLen = len(r.props) - 1 }, 94},
		{"properties length long", func(r *raw) { r.propLen = len(r.props) + 1 }, 94},
		{"properties length over 32767", func(r *raw) { r.propLen = 40000 }, 94},
		{"properties without separator", func(r *raw) { r.props = "ab\x02" }, 96},
		{"properties with empty name", func(r *raw) { r.props = "\x01b\x02" }, 96},
		{"properties repeated name", func(r *raw) { r.props = "a\x01b\x02a\x01c\x02" }, 96},
		{"born port negative", func(r *raw) { r.bornPort = -1 }, 52},
		{"store port too big", func(r *raw) { r.storePort = 65536 }, 68},
		{"IPv6 flag without the bytes", func(r *raw) { r.sysFlag = SysFlagBornHostV6 | SysFlagStoreHostV6 }, OffTotalSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRaw()
			tt.modify(&r)
			_, _, err := Decode(r.bytes())
			ce := requireCorrupt(t, err)
			require.Equal(t, tt.offset, ce.Offset, ce.Reason)
		})
	}
}

func TestDecodeRandomBitFlips(t *testing.T) {
	// Any single bit flip must fail cleanly or decode to something that
	// re-encodes; the seed is fixed so failures replay.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, m := range []Message{sampleV4(), sampleV6()} {
		b := encode(t, m)
		for range 2000 {
			c := bytes.Clone(b)
			bit := rng.IntN(8 * len(c))
			c[bit/8] ^= 1 << (bit % 8)
			got, n, err := Decode(c)
			if err != nil {
				requireCorrupt(t, err)
				continue
			}
			require.Equal(t, len(c), n)
			_, err = Append(nil, &got)
			require.NoError(t, err, "bit %d", bit)
		}
	}
}

func TestDecodeConsecutiveRecords(t *testing.T) {
	var log []byte
	msgs := []Message{sampleV4(), sampleV6(), sampleV4()}
	for _, m := range msgs {
		var err error
		log, err = Append(log, &m)
		require.NoError(t, err)
	}
	for i := 0; len(log) > 0; i++ {
		m, n, err := Decode(log)
		require.NoError(t, err)
		require.Equal(t, normalize(msgs[i]), m)
		log = log[n:]
	}
}

func TestParse(t *testing.T) {
	m := sampleV6()
	b := encode(t, m)
	v, err := Parse(b, true)
	require.NoError(t, err)
	require.Equal(t, View{
		Size: len(b), QueueID: m.QueueID, Flag: m.Flag, QueueOffset: m.QueueOffset,
		PhysicalOffset: m.PhysicalOffset, SysFlag: m.SysFlag | SysFlagBornHostV6 | SysFlagStoreHostV6,
		BornTimestamp: m.BornTimestamp, BornHost: m.BornHost, StoreTimestamp: m.StoreTimestamp,
		StoreHost: m.StoreHost, ReconsumeTimes: m.ReconsumeTimes,
		PreparedTransactionOffset: m.PreparedTransactionOffset, Body: m.Body, Topic: []byte(m.Topic),
		Properties: []byte(EncodeProperties(m.Properties)),
	}, v)
	require.Equal(t, len(v.Body), cap(v.Body), "Body capacity is cut")
	require.Equal(t, len(v.Topic), cap(v.Topic))

	pg, ok := PropertyValue(v.Properties, PropertyProducerGroup)
	require.True(t, ok)
	require.Equal(t, "pg", pg)

	allocs := testing.AllocsPerRun(100, func() {
		v, err := Parse(b, true)
		if err != nil || v.Size != len(b) {
			panic("parse failed")
		}
		if _, ok := PropertyBytes(v.Properties, PropertyRetryTopic); !ok {
			panic("property not found")
		}
	})
	require.Zero(t, allocs, "Parse and PropertyBytes must not allocate")
}

func TestDecodeAliasesBody(t *testing.T) {
	b := encode(t, sampleV4())
	m, _, err := Decode(b)
	require.NoError(t, err)
	m.Body[0] = 'J'
	v, err := Parse(b, false)
	require.NoError(t, err)
	require.Equal(t, byte('J'), v.Body[0])
}

func TestCountRecords(t *testing.T) {
	var b []byte
	for i := 0; i < 5; i++ {
		m := sampleV4()
		m.QueueOffset = int64(i)
		var err error
		b, err = Append(b, &m)
		require.NoError(t, err)
	}
	require.Equal(t, 5, CountRecords(b))
	require.Equal(t, 0, CountRecords(nil))
	require.GreaterOrEqual(t, CountRecords(b[:len(b)-3]), 5, "a truncated record still gets a result")
	require.Equal(t, 6, CountRecords(append(b, 0, 0)))
}
