//go:build !linux

package netfault

import "errors"

// newFirewall fails: nf_tables exists only on Linux.
func newFirewall() (firewall, error) {
	return nil, errors.New("netfault: nftables needs Linux")
}
