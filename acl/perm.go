package acl

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Perm is a set of RocketMQ permission bits (acl Permission): DENY 1,
// ANY 2, PUB 4, SUB 8.
type Perm uint8

// Permission bits.
const (
	Deny Perm = 1
	Any  Perm = 2 // only ever needed, never granted (RocketMQ's Permission.ANY)
	Pub  Perm = 4
	Sub  Perm = 8
)

// ParsePerm parses a perm as plain_acl.yml writes it: DENY, PUB, SUB,
// PUB|SUB or SUB|PUB, surrounding spaces ignored. Unlike RocketMQ, which
// reads anything else (ANY included) as DENY, anything else is an error.
func ParsePerm(s string) (Perm, error) {
	switch strings.TrimSpace(s) {
	case "DENY":
		return Deny, nil
	case "PUB":
		return Pub, nil
	case "SUB":
		return Sub, nil
	case "PUB|SUB", "SUB|PUB":
		return Pub | Sub, nil
	}
	return 0, fmt.Errorf("acl: bad permission %q (want DENY, PUB, SUB or PUB|SUB)", s)
}

// String returns the perm as plain_acl.yml writes it.
func (p Perm) String() string {
	switch p {
	case Deny:
		return "DENY"
	case Any:
		return "ANY"
	case Pub:
		return "PUB"
	case Sub:
		return "SUB"
	case Pub | Sub:
		return "PUB|SUB"
	}
	return fmt.Sprintf("Perm(%d)", uint8(p))
}

// valid reports whether p is one a config may grant.
func (p Perm) valid() bool { return p == Deny || p == Pub || p == Sub || p == Pub|Sub }

// Allows reports whether owned grants needed (RocketMQ's
// Permission.checkPermission): never if owned has DENY; ANY needs PUB or
// SUB; otherwise any common bit.
func (p Perm) Allows(needed Perm) bool {
	owned := p
	if owned&Deny != 0 {
		return false
	}
	if needed&Any != 0 {
		return owned&(Pub|Sub) != 0
	}
	return needed&owned != 0
}

// MarshalText writes the perm's name; the zero Perm (a perm not given)
// is DENY.
func (p Perm) MarshalText() ([]byte, error) {
	if p == 0 {
		p = Deny
	}
	if !p.valid() {
		return nil, fmt.Errorf("acl: cannot encode %v", p)
	}
	return []byte(p.String()), nil
}

// UnmarshalText parses a perm strictly (ParsePerm).
func (p *Perm) UnmarshalText(b []byte) error {
	v, err := ParsePerm(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// UnmarshalYAML parses a perm strictly, naming the line of a bad one.
func (p *Perm) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: acl: permission must be a string", n.Line)
	}
	if err := p.UnmarshalText([]byte(n.Value)); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// ResourcePerm is one entry of topicPerms or groupPerms: "name=PERM".
type ResourcePerm struct {
	Name string
	Perm Perm
}

// ParseResourcePerm parses "name=PERM" (RocketMQ's Permission.parseResourcePerms:
// split at the first "=", both sides trimmed). The name must be non-empty
// and must not start with %RETRY% (groups are named without it).
func ParseResourcePerm(s string) (ResourcePerm, error) {
	name, perm, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return ResourcePerm{}, fmt.Errorf("acl: bad resource permission %q (want name=PERM)", s)
	}
	if strings.HasPrefix(name, RetryPrefix) {
		return ResourcePerm{}, fmt.Errorf("acl: resource %q: name a group without %s, in groupPerms", name, RetryPrefix)
	}
	p, err := ParsePerm(perm)
	if err != nil {
		return ResourcePerm{}, fmt.Errorf("acl: resource %q: %w", name, err)
	}
	return ResourcePerm{Name: name, Perm: p}, nil
}

// String returns "name=PERM".
func (r ResourcePerm) String() string { return r.Name + "=" + r.Perm.String() }

// MarshalText writes "name=PERM".
func (r ResourcePerm) MarshalText() ([]byte, error) {
	if _, err := r.Perm.MarshalText(); err != nil {
		return nil, err
	}
	return []byte(r.String()), nil
}

// UnmarshalText parses "name=PERM" strictly.
func (r *ResourcePerm) UnmarshalText(b []byte) error {
	v, err := ParseResourcePerm(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// UnmarshalYAML parses "name=PERM" strictly, naming the line of a bad one.
func (r *ResourcePerm) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: acl: resource permission must be a string", n.Line)
	}
	if err := r.UnmarshalText([]byte(n.Value)); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}
