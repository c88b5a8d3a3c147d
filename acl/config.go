package acl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// RetryPrefix starts the name of a consumer group's retry topic
// (MixAll.RETRY_GROUP_TOPIC_PREFIX). A resource with it is the group.
const RetryPrefix = "%RETRY%"

// minKeyLen is the shortest access or secret key RocketMQ accepts
// (AclConstants: the length must be greater than 6).
const minKeyLen = 7

// Config is the ACL: what plain_acl.yml holds. It is plain data; NewPolicy
// compiles it for checks. Encode it with json.Marshal (the same shape as
// the YAML file, perms as strings) and decode it with ParseJSON.
type Config struct {
	// GlobalWhiteRemoteAddresses are address patterns whose clients skip
	// every check (no access key needed).
	GlobalWhiteRemoteAddresses []string `yaml:"globalWhiteRemoteAddresses" json:"globalWhiteRemoteAddresses"`
	// Accounts in file order; access keys are unique.
	Accounts []Account `yaml:"accounts" json:"accounts"`
}

// Account is one entry of accounts.
type Account struct {
	AccessKey string `yaml:"accessKey" json:"accessKey"`
	SecretKey string `yaml:"secretKey" json:"secretKey"`
	// WhiteRemoteAddress is an address pattern (AddrPattern) whose clients
	// using this access key skip the signature and permission checks;
	// blank for none.
	WhiteRemoteAddress string `yaml:"whiteRemoteAddress" json:"whiteRemoteAddress"`
	// Admin accounts may send the admin requests (NeedsAdmin); one without
	// topic and group perms may also use every topic and group.
	Admin bool `yaml:"admin" json:"admin"`
	// DefaultTopicPerm and DefaultGroupPerm apply to resources the lists
	// do not name; missing means DENY.
	DefaultTopicPerm Perm `yaml:"defaultTopicPerm" json:"defaultTopicPerm"`
	DefaultGroupPerm Perm `yaml:"defaultGroupPerm" json:"defaultGroupPerm"`
	// TopicPerms and GroupPerms ("name=PERM"; groups without %RETRY%).
	TopicPerms []ResourcePerm `yaml:"topicPerms" json:"topicPerms"`
	GroupPerms []ResourcePerm `yaml:"groupPerms" json:"groupPerms"`
}

// yamlFile is plain_acl.yml, with the dataVersion RocketMQ writes into it
// (read and dropped).
type yamlFile struct {
	GlobalWhiteRemoteAddresses []string      `yaml:"globalWhiteRemoteAddresses"`
	Accounts                   []Account     `yaml:"accounts"`
	DataVersion                []dataVersion `yaml:"dataVersion"`
}

type dataVersion struct {
	Counter   int64 `yaml:"counter"`
	Timestamp int64 `yaml:"timestamp"`
	// StateVersion appears in files written by RocketMQ 5.
	StateVersion int64 `yaml:"stateVersion"`
}

// LoadFile reads and parses a plain_acl.yml file (ParseYAML).
func LoadFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("acl: %w", err)
	}
	c, err := ParseYAML(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseYAML parses a file shaped like RocketMQ's plain_acl.yml, strictly:
// unknown keys, duplicate keys, bad perms, bad address patterns, keys
// shorter than 7 characters and duplicate access keys are errors, named
// with their line where possible. An empty file is an empty ACL.
func ParseYAML(b []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f yamlFile
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("acl: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("acl: line %d: one YAML document expected", extra.Line)
	}
	c := &Config{GlobalWhiteRemoteAddresses: f.GlobalWhiteRemoteAddresses, Accounts: f.Accounts}
	c.normalize()
	if err := c.Validate(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			var root yaml.Node
			if yaml.Unmarshal(b, &root) == nil {
				ve.Line = ve.locate(&root)
			}
		}
		return nil, err
	}
	return c, nil
}

// ParseJSON decodes a Config json.Marshal wrote, strictly (unknown fields
// are errors), and validates it.
func ParseJSON(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("acl: %w", err)
	}
	if dec.More() {
		return nil, errors.New("acl: trailing data after the JSON config")
	}
	c.normalize()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// YAML returns c as a plain_acl.yml file.
func (c *Config) YAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("acl: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("acl: %w", err)
	}
	return buf.Bytes(), nil
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	out := &Config{GlobalWhiteRemoteAddresses: slices.Clone(c.GlobalWhiteRemoteAddresses)}
	out.Accounts = make([]Account, len(c.Accounts))
	for i, a := range c.Accounts {
		a.TopicPerms = slices.Clone(a.TopicPerms)
		a.GroupPerms = slices.Clone(a.GroupPerms)
		out.Accounts[i] = a
	}
	return out
}

// Account returns the account with that access key.
func (c *Config) Account(accessKey string) (Account, bool) {
	if i := c.index(accessKey); i >= 0 {
		return c.Accounts[i], true
	}
	return Account{}, false
}

func (c *Config) index(accessKey string) int {
	return slices.IndexFunc(c.Accounts, func(a Account) bool { return a.AccessKey == accessKey })
}

// normalize gives missing default perms their value (DENY) and empty
// lists one form (nil), so that equal ACLs encode equally.
func (c *Config) normalize() {
	if len(c.GlobalWhiteRemoteAddresses) == 0 {
		c.GlobalWhiteRemoteAddresses = nil
	}
	if len(c.Accounts) == 0 {
		c.Accounts = nil
	}
	for i := range c.Accounts {
		a := &c.Accounts[i]
		a.WhiteRemoteAddress = strings.TrimSpace(a.WhiteRemoteAddress)
		if a.DefaultTopicPerm == 0 {
			a.DefaultTopicPerm = Deny
		}
		if a.DefaultGroupPerm == 0 {
			a.DefaultGroupPerm = Deny
		}
		if len(a.TopicPerms) == 0 {
			a.TopicPerms = nil
		}
		if len(a.GroupPerms) == 0 {
			a.GroupPerms = nil
		}
	}
}

// ValidationError is a Config that breaks a rule. Account is the index of
// the account concerned, or -1 for globalWhiteRemoteAddresses; Field its
// YAML key, Item the index in a list field (else -1). Line is the line of
// the offending value when the config came from YAML, else 0.
type ValidationError struct {
	Account int
	Field   string
	Item    int
	Line    int
	Err     error
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("acl: ")
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Account >= 0 {
		fmt.Fprintf(&b, "accounts[%d].", e.Account)
	}
	b.WriteString(e.Field)
	if e.Item >= 0 {
		fmt.Fprintf(&b, "[%d]", e.Item)
	}
	b.WriteString(": ")
	b.WriteString(strings.TrimPrefix(e.Err.Error(), "acl: "))
	return b.String()
}

func (e *ValidationError) Unwrap() error { return e.Err }

// locate finds the line of the offending value in the YAML document root.
func (e *ValidationError) locate(root *yaml.Node) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	get := func(m *yaml.Node, key string) *yaml.Node {
		if m == nil || m.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		return nil
	}
	item := func(s *yaml.Node, i int) *yaml.Node {
		if s == nil || s.Kind != yaml.SequenceNode || i < 0 || i >= len(s.Content) {
			return nil
		}
		return s.Content[i]
	}
	for _, step := range []func(*yaml.Node) *yaml.Node{
		func(n *yaml.Node) *yaml.Node {
			if e.Account < 0 {
				return n
			}
			return item(get(n, "accounts"), e.Account)
		},
		func(n *yaml.Node) *yaml.Node { return get(n, e.Field) },
		func(n *yaml.Node) *yaml.Node {
			if e.Item < 0 {
				return n
			}
			return item(n, e.Item)
		},
	} {
		if n = step(n); n == nil {
			break
		}
		line = n.Line
	}
	return line
}

// Validate checks the rules RocketMQ enforces when it loads the file, and
// raftmq's stricter ones: access and secret keys of at least 7
// characters, unique access keys, valid perms, address patterns that
// compile (no blank global ones), unique resource names per list.
func (c *Config) Validate() error {
	for i, s := range c.GlobalWhiteRemoteAddresses {
		if strings.TrimSpace(s) == "" {
			return &ValidationError{Account: -1, Field: "globalWhiteRemoteAddresses", Item: i, Err: errors.New("blank address pattern")}
		}
		if _, err := CompileAddrPattern(s); err != nil {
			return &ValidationError{Account: -1, Field: "globalWhiteRemoteAddresses", Item: i, Err: err}
		}
	}
	seen := map[string]int{}
	for i, a := range c.Accounts {
		verr := func(field string, item int, err error) error {
			return &ValidationError{Account: i, Field: field, Item: item, Err: err}
		}
		if len(a.AccessKey) < minKeyLen {
			return verr("accessKey", -1, fmt.Errorf("access key %q is shorter than %d characters", a.AccessKey, minKeyLen))
		}
		if j, ok := seen[a.AccessKey]; ok {
			return verr("accessKey", -1, fmt.Errorf("access key %q is also accounts[%d]", a.AccessKey, j))
		}
		seen[a.AccessKey] = i
		if len(a.SecretKey) < minKeyLen {
			return verr("secretKey", -1, fmt.Errorf("secret key of %q is shorter than %d characters", a.AccessKey, minKeyLen))
		}
		if _, err := CompileAddrPattern(a.WhiteRemoteAddress); err != nil {
			return verr("whiteRemoteAddress", -1, err)
		}
		if !a.DefaultTopicPerm.valid() {
			return verr("defaultTopicPerm", -1, fmt.Errorf("bad permission %v", a.DefaultTopicPerm))
		}
		if !a.DefaultGroupPerm.valid() {
			return verr("defaultGroupPerm", -1, fmt.Errorf("bad permission %v", a.DefaultGroupPerm))
		}
		for _, l := range []struct {
			field string
			perms []ResourcePerm
		}{{"topicPerms", a.TopicPerms}, {"groupPerms", a.GroupPerms}} {
			names := map[string]bool{}
			for j, rp := range l.perms {
				if _, err := ParseResourcePerm(rp.Name + "=" + rp.Perm.String()); err != nil || strings.TrimSpace(rp.Name) != rp.Name {
					if err == nil {
						err = fmt.Errorf("resource name %q has surrounding spaces", rp.Name)
					}
					return verr(l.field, j, err)
				}
				if names[rp.Name] {
					return verr(l.field, j, fmt.Errorf("%q is listed twice", rp.Name))
				}
				names[rp.Name] = true
			}
		}
	}
	return nil
}
