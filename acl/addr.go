package acl

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// AddrPattern is a compiled white-address pattern, as RocketMQ's
// RemoteAddressStrategyFactory reads them:
//
//   - "" (blank): matches nothing;
//   - "*", "*.*.*.*", "*:*:*:*:*:*:*:*": matches every address;
//   - "192.168.0.{1,2}": a set given in braces in the last segment (IPv6:
//     "fe80::{1,2}");
//   - "10.0.0.1,10.0.0.2": a comma list of addresses;
//   - "192.168.1.1-5", "192.168.*", "192.168.1-5.*", "10.*.*.*": a range
//     in the first segment after the first that is "*" or "a-b"; the
//     segments after it must be "*" (missing ones count as "*"). IPv6 the
//     same with ":" and hex groups, written without "::";
//   - anything else: one IPv4 or IPv6 address.
//
// Addresses compare as IP addresses: an IPv4-mapped IPv6 client matches
// IPv4 patterns, and IPv6 text forms are equal when the addresses are.
type AddrPattern struct {
	src  string
	kind patternKind
	set  map[netip.Addr]struct{}
	// A range: is6, the fixed leading segments, and the range [lo, hi]
	// of the segment after them.
	is6    bool
	prefix []uint16
	lo, hi uint16
}

type patternKind uint8

const (
	patNone patternKind = iota
	patAll
	patSet // also one address
	patRange
)

// CompileAddrPattern compiles a white-address pattern; an invalid one is
// an error, as it is when RocketMQ loads the file.
func CompileAddrPattern(s string) (AddrPattern, error) {
	s = strings.TrimSpace(s)
	p := AddrPattern{src: s}
	bad := func(format string, args ...any) (AddrPattern, error) {
		return AddrPattern{}, fmt.Errorf("acl: bad address pattern %q: %s", s, fmt.Sprintf(format, args...))
	}
	switch {
	case s == "":
		p.kind = patNone
	case s == "*" || s == "*.*.*.*" || s == "*:*:*:*:*:*:*:*":
		p.kind = patAll
	case strings.HasSuffix(s, "}"):
		i := strings.LastIndexByte(s, '{')
		if i < 0 || i == 0 || (s[i-1] != '.' && s[i-1] != ':') {
			return bad("braces must hold the whole last segment")
		}
		p.kind = patSet
		p.set = map[netip.Addr]struct{}{}
		for item := range strings.SplitSeq(s[i+1:len(s)-1], ",") {
			a, err := netip.ParseAddr(s[:i] + strings.TrimSpace(item))
			if err != nil {
				return bad("%q in braces: %v", item, err)
			}
			p.set[norm(a)] = struct{}{}
		}
	case strings.Contains(s, ","):
		p.kind = patSet
		p.set = map[netip.Addr]struct{}{}
		for item := range strings.SplitSeq(s, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(item))
			if err != nil {
				return bad("%v", err)
			}
			p.set[norm(a)] = struct{}{}
		}
	case strings.ContainsAny(s, "*-"):
		if err := p.compileRange(s); err != nil {
			return bad("%v", err)
		}
	default:
		a, err := netip.ParseAddr(s)
		if err != nil {
			return bad("%v", err)
		}
		p.kind = patSet
		p.set = map[netip.Addr]struct{}{norm(a): {}}
	}
	return p, nil
}

// compileRange reads a range pattern into p.
func (p *AddrPattern) compileRange(s string) error {
	p.kind = patRange
	sep, n, base, max := ".", 4, 10, uint64(255)
	if strings.Contains(s, ":") {
		if strings.Contains(s, "::") {
			return fmt.Errorf(`write every group of an IPv6 range, without "::"`)
		}
		p.is6 = true
		sep, n, base, max = ":", 8, 16, 0xffff
	}
	segs := strings.Split(s, sep)
	if len(segs) > n {
		return fmt.Errorf("%d segments, at most %d", len(segs), n)
	}
	num := func(v string) (uint16, error) {
		x, err := strconv.ParseUint(strings.TrimSpace(v), base, 16)
		if err != nil || x > max {
			return 0, fmt.Errorf("segment %q is not a number up to %d", v, max)
		}
		return uint16(x), nil
	}
	at := -1 // the range segment
	for i, v := range segs {
		v = strings.TrimSpace(v)
		switch {
		case at >= 0:
			if v != "*" {
				return fmt.Errorf("segment %q after the range must be *", v)
			}
		case v == "*":
			at = i
			p.lo, p.hi = 0, uint16(max)
		case strings.Contains(v, "-"):
			a, b, _ := strings.Cut(v, "-")
			lo, err := num(a)
			if err != nil {
				return err
			}
			hi, err := num(b)
			if err != nil {
				return err
			}
			if lo > hi {
				return fmt.Errorf("range %q is empty", v)
			}
			at = i
			p.lo, p.hi = lo, hi
		default:
			x, err := num(v)
			if err != nil {
				return err
			}
			p.prefix = append(p.prefix, x)
		}
	}
	if at <= 0 {
		// RocketMQ looks for the range from the second segment on.
		return fmt.Errorf("the first segment must be a number and a later one * or a range")
	}
	return nil
}

// String returns the pattern as written (trimmed).
func (p AddrPattern) String() string { return p.src }

// Match reports whether the client at addr ("host:port", "[v6]:port" or
// a bare host) matches. An address that is not an IP matches only "*".
func (p AddrPattern) Match(addr string) bool {
	switch p.kind {
	case patNone:
		return false
	case patAll:
		return true
	}
	a, ok := ParseRemoteAddr(addr)
	if !ok {
		return false
	}
	return p.matchAddr(a)
}

func (p AddrPattern) matchAddr(a netip.Addr) bool {
	switch p.kind {
	case patAll:
		return true
	case patSet:
		_, ok := p.set[a]
		return ok
	case patRange:
		var segs []uint16
		switch {
		case p.is6 && a.Is6():
			b := a.As16()
			for i := 0; i < 16; i += 2 {
				segs = append(segs, uint16(b[i])<<8|uint16(b[i+1]))
			}
		case !p.is6 && a.Is4():
			for _, x := range a.As4() {
				segs = append(segs, uint16(x))
			}
		default:
			return false
		}
		for i, x := range p.prefix {
			if segs[i] != x {
				return false
			}
		}
		x := segs[len(p.prefix)]
		return x >= p.lo && x <= p.hi
	}
	return false
}

// ParseRemoteAddr returns the IP address of a client address ("host:port",
// "[v6]:port" or a bare IP), IPv4-mapped IPv6 addresses unmapped.
func ParseRemoteAddr(addr string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return norm(ap.Addr()), true
	}
	if a, err := netip.ParseAddr(strings.Trim(addr, "[]")); err == nil {
		return norm(a), true
	}
	// RocketMQ drops what follows the last ':'.
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		if a, err := netip.ParseAddr(strings.Trim(addr[:i], "[]")); err == nil {
			return norm(a), true
		}
	}
	return netip.Addr{}, false
}

// norm unmaps IPv4-mapped IPv6 addresses and drops zones.
func norm(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }
