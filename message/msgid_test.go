package message

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOffsetMsgIDVectors(t *testing.T) {
	tests := []struct {
		host string
		off  int64
		want string
	}{
		{"127.0.0.1:10911", 0x1234, "7F00000100002A9F0000000000001234"},
		// The example in the research notes (MessageDecoder.createMessageId).
		{"10.0.0.1:10911", 6699, "0A00000100002A9F0000000000001A2B"},
		{"255.255.255.255:65535", -1, "FFFFFFFF0000FFFFFFFFFFFFFFFFFFFF"},
		{"[2001:db8::1]:10911", 1, "20010DB800000000000000000000000100002A9F0000000000000001"},
	}
	for _, tt := range tests {
		host := netip.MustParseAddrPort(tt.host)
		id := OffsetMsgID(host, tt.off)
		require.Equal(t, tt.want, id)
		gotHost, gotOff, err := ParseOffsetMsgID(id)
		require.NoError(t, err)
		require.Equal(t, host, gotHost)
		require.Equal(t, tt.off, gotOff)

		gotHost, gotOff, err = ParseOffsetMsgID(strings.ToLower(id))
		require.NoError(t, err, "lowercase hex is accepted")
		require.Equal(t, host, gotHost)
		require.Equal(t, tt.off, gotOff)
	}
	require.Len(t, OffsetMsgID(netip.MustParseAddrPort("1.2.3.4:5"), 0), MsgIDLenV4)
	require.Len(t, OffsetMsgID(netip.MustParseAddrPort("[::1]:5"), 0), MsgIDLenV6)
}

func TestOffsetMsgIDUnusualHosts(t *testing.T) {
	// IPv4-mapped addresses are written as IPv4, as in a record.
	require.Equal(t, "7F00000100002A9F0000000000001234",
		OffsetMsgID(netip.MustParseAddrPort("[::ffff:127.0.0.1]:10911"), 0x1234))
	require.Equal(t, "0000000000000000000000000000002A", OffsetMsgID(netip.AddrPort{}, 42))
	require.Equal(t, OffsetMsgID(netip.MustParseAddrPort("[fe80::1]:1"), 9),
		OffsetMsgID(netip.MustParseAddrPort("[fe80::1%eth0]:1"), 9), "zones are dropped")
}

func TestOffsetMsgIDMatchesRecord(t *testing.T) {
	// An offsetMsgId is the record's STOREHOST bytes and PHYSICALOFFSET.
	for _, m := range []Message{sampleV4(), sampleV6()} {
		id := OffsetMsgID(m.StoreHost, m.PhysicalOffset)
		host, off, err := ParseOffsetMsgID(id)
		require.NoError(t, err)
		require.Equal(t, m.StoreHost, host)
		require.Equal(t, m.PhysicalOffset, off)
	}
}

func TestParseOffsetMsgIDErrors(t *testing.T) {
	for _, bad := range []string{
		"",
		"7F00000100002A9F000000000000123",   // 31
		"7F00000100002A9F00000000000012345", // 33
		"7F00000100002A9F000000000000123G",
		"7F000001 0002A9F0000000000001234",
		"7F00000100012A9F0000000000001234", // port 0x12A9F
		"7F000001FFFFFFFF0000000000001234", // port -1
		strings.Repeat("0", 40),
		strings.Repeat("Z", MsgIDLenV6),
	} {
		_, _, err := ParseOffsetMsgID(bad)
		require.ErrorIs(t, err, ErrBadMsgID, "%q", bad)
	}
}

func FuzzParseOffsetMsgID(f *testing.F) {
	f.Add("7F00000100002A9F0000000000001234")
	f.Add("20010DB800000000000000000000000100002A9F0000000000000001")
	f.Add("00000000000000000000FFFF7F00000100002A9F0000000000001234")
	f.Add("")
	f.Add("xyz")
	f.Fuzz(func(t *testing.T, s string) {
		host, off, err := ParseOffsetMsgID(s)
		if err != nil {
			require.ErrorIs(t, err, ErrBadMsgID)
			return
		}
		id := OffsetMsgID(host, off)
		if host.Addr().Is4In6() {
			require.Len(t, id, MsgIDLenV4)
		} else {
			require.Equal(t, strings.ToUpper(s), id)
		}
		host2, off2, err := ParseOffsetMsgID(id)
		require.NoError(t, err)
		require.Equal(t, netip.AddrPortFrom(host.Addr().Unmap(), host.Port()), host2)
		require.Equal(t, off, off2)
	})
}
