//go:build linux

package netfault

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// Offsets of the addresses in the IPv4 header, for nft payload matches.
const (
	ipv4SrcOffset = 12
	ipv4DstOffset = 16
	ipv4AddrLen   = 4
)

// nftFirewall keeps the partition rules in the table TableName: one filter
// chain on the input hook holding one "ip saddr X ip daddr Y drop" rule per
// cut pair.
//
// The chain hooks input, not output: a packet dropped on output fails the
// sender's system call with EPERM, while a packet dropped on input vanishes
// silently, as on a real partition. Loopback packets cross both hooks.
type nftFirewall struct {
	table *nftables.Table
	chain *nftables.Chain
}

// newFirewall creates (or empties) the table and chain in the current network
// namespace.
func newFirewall() (firewall, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("netfault: nftables: %w", err)
	}
	accept := nftables.ChainPolicyAccept
	f := &nftFirewall{table: &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}}
	f.table = c.AddTable(f.table)
	f.chain = c.AddChain(&nftables.Chain{
		Name:     chainName,
		Table:    f.table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookInput,
		Priority: nftables.ChainPriorityFilter,
		Policy:   &accept,
	})
	c.FlushChain(f.chain)
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("netfault: create nft table %s: %w", TableName, err)
	}
	return f, nil
}

// setCut replaces the rules with one drop rule per pair, atomically.
func (f *nftFirewall) setCut(pairs [][2]netip.Addr) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("netfault: nftables: %w", err)
	}
	c.FlushChain(f.chain)
	for _, p := range pairs {
		src, dst := p[0].As4(), p[1].As4()
		c.AddRule(&nftables.Rule{
			Table: f.table,
			Chain: f.chain,
			Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: ipv4SrcOffset, Len: ipv4AddrLen},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: src[:]},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: ipv4DstOffset, Len: ipv4AddrLen},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: dst[:]},
				&expr.Verdict{Kind: expr.VerdictDrop},
			},
		})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("netfault: set %d nft drop rules: %w", len(pairs), err)
	}
	return nil
}

// rules returns the number of rules in the chain.
func (f *nftFirewall) rules() (int, error) {
	c, err := nftables.New()
	if err != nil {
		return 0, fmt.Errorf("netfault: nftables: %w", err)
	}
	rs, err := c.GetRules(f.table, f.chain)
	if err != nil {
		return 0, fmt.Errorf("netfault: list nft rules: %w", err)
	}
	return len(rs), nil
}

// close deletes the table with its chain and rules.
func (f *nftFirewall) close() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("netfault: nftables: %w", err)
	}
	c.DelTable(f.table)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("netfault: delete nft table %s: %w", TableName, err)
	}
	return nil
}
