package message

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func FuzzDecode(f *testing.F) {
	v4in6 := sampleV4()
	v4in6.Body, v4in6.Properties = nil, nil
	many := sampleV6()
	many.Properties = manyProps(50)
	for _, m := range []Message{sampleV4(), sampleV6(), v4in6, many} {
		b, err := Append(nil, &m)
		require.NoError(f, err)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	v2 := newRaw()
	v2.magic = MagicV2
	v2.topic = "a-V2-topic"
	f.Add(v2.bytes())
	mapped := newRaw()
	mapped.sysFlag = SysFlagBornHostV6 | SysFlagStoreHostV6
	mapped.bornHost = netip.MustParseAddr("::ffff:1.2.3.4").AsSlice()
	mapped.storeHost = netip.MustParseAddr("::1").AsSlice()
	mapped.props = "b\x01c\x02a\x01d" // unsorted, no last separator
	f.Add(mapped.bytes())
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := Decode(b)
		v, perr := Parse(b, true)
		if err != nil {
			requireCorrupt(t, err)
			return
		}
		require.NoError(t, perr, "Parse accepts what Decode accepts")
		require.Equal(t, v.Size, n)
		require.LessOrEqual(t, n, len(b))
		for k, val := range m.Properties {
			got, ok := PropertyValue(v.Properties, k)
			require.True(t, ok)
			require.Equal(t, val, got)
		}
		if len(m.Topic) > MaxTopicLength || len(m.Body) > MaxBodySize {
			return // a V2 record, or a body Append refuses
		}

		enc, err := Append(nil, &m)
		require.NoError(t, err, "a decoded message must re-encode")
		m2, n2, err := Decode(enc)
		require.NoError(t, err)
		require.Equal(t, len(enc), n2)
		require.Equal(t, normalize(m), m2)

		canonical := binary.BigEndian.Uint32(b[OffMagicCode:]) == MagicV1 &&
			string(v.Properties) == EncodeProperties(m.Properties) &&
			!m.BornHost.Addr().Is4In6() && !m.StoreHost.Addr().Is4In6()
		if canonical {
			require.Equal(t, b[:n], enc, "re-encoding a canonical record gives its bytes")
		}
	})
}
