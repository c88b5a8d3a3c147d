package message

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
)

// ErrBadMsgID is returned by ParseOffsetMsgID for a string that is not an
// offsetMsgId.
var ErrBadMsgID = errors.New("message: bad offsetMsgId")

// Lengths of an offsetMsgId in hex characters.
const (
	MsgIDLenV4 = 2 * (4 + 4 + 8)  // 32
	MsgIDLenV6 = 2 * (16 + 4 + 8) // 56
)

const upperHex = "0123456789ABCDEF"

// OffsetMsgID returns RocketMQ's offsetMsgId of the message at phyOffset
// stored by storeHost: uppercase hex of the IP (4 bytes, or 16 for IPv6),
// the port as an int32 and phyOffset as an int64, all big-endian. IPv4 and
// IPv4-mapped addresses give MsgIDLenV4 characters, other IPv6 addresses
// MsgIDLenV6, as Java does. An invalid address is written as 0.0.0.0.
func OffsetMsgID(storeHost netip.AddrPort, phyOffset int64) string {
	var raw [16 + 4 + 8]byte
	a := storeHost.Addr().Unmap()
	n := 0
	switch {
	case a.Is4():
		ip := a.As4()
		n = copy(raw[:], ip[:])
	case a.Is6():
		ip := a.As16()
		n = copy(raw[:], ip[:])
	default:
		n = 4
	}
	binary.BigEndian.PutUint32(raw[n:], uint32(storeHost.Port()))
	binary.BigEndian.PutUint64(raw[n+4:], uint64(phyOffset))
	n += 4 + 8
	var out [2 * len(raw)]byte
	for i, c := range raw[:n] {
		out[2*i] = upperHex[c>>4]
		out[2*i+1] = upperHex[c&0x0F]
	}
	return string(out[:2*n])
}

// ParseOffsetMsgID decodes an offsetMsgId: MsgIDLenV4 hex characters for an
// IPv4 store host, MsgIDLenV6 for IPv6; either case of hex digits. Any other
// input gives an error wrapping ErrBadMsgID.
func ParseOffsetMsgID(s string) (netip.AddrPort, int64, error) {
	if len(s) != MsgIDLenV4 && len(s) != MsgIDLenV6 {
		return netip.AddrPort{}, 0, fmt.Errorf("message: offsetMsgId of %d characters, want %d or %d: %w",
			len(s), MsgIDLenV4, MsgIDLenV6, ErrBadMsgID)
	}
	var raw [16 + 4 + 8]byte
	n, err := hex.Decode(raw[:], []byte(s))
	if err != nil {
		return netip.AddrPort{}, 0, fmt.Errorf("message: offsetMsgId %q: %w: %w", s, ErrBadMsgID, err)
	}
	ipLen := n - 4 - 8
	var a netip.Addr
	if ipLen == 4 {
		a = netip.AddrFrom4([4]byte(raw[:4]))
	} else {
		a = netip.AddrFrom16([16]byte(raw[:16]))
	}
	port := int32(binary.BigEndian.Uint32(raw[ipLen:]))
	if port < 0 || port > 0xFFFF {
		return netip.AddrPort{}, 0, fmt.Errorf("message: offsetMsgId %q: port %d out of range: %w", s, port, ErrBadMsgID)
	}
	off := int64(binary.BigEndian.Uint64(raw[ipLen+4:]))
	return netip.AddrPortFrom(a, uint16(port)), off, nil
}
