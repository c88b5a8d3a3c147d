package acl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// UpdateOp names a change to the ACL.
type UpdateOp string

// The changes the ACL admin requests make.
const (
	// OpPutAccount creates or changes an account
	// (UPDATE_AND_CREATE_ACL_CONFIG).
	OpPutAccount UpdateOp = "putAccount"
	// OpDeleteAccount deletes an account (DELETE_ACL_CONFIG).
	OpDeleteAccount UpdateOp = "deleteAccount"
	// OpSetGlobalWhite replaces globalWhiteRemoteAddresses
	// (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG).
	OpSetGlobalWhite UpdateOp = "setGlobalWhiteRemoteAddresses"
	// OpReplace replaces the whole ACL with Update.Config: how a group
	// takes its first ACL from a plain_acl.yml file through the log, so
	// that every node holds the same one.
	OpReplace UpdateOp = "replace"
)

// Update is one change to a Config, a value that encodes to JSON (for a
// raft log entry) and applies deterministically (Config.Apply).
//
// For OpPutAccount, a nil field keeps an existing account's value and
// gives a new account the default (no white address, not admin, DENY, no
// lists); a new account needs SecretKey. This is how RocketMQ merges an
// update into the account in the file (createAclAccessConfigMap).
type Update struct {
	Op        UpdateOp `json:"op"`
	AccessKey string   `json:"accessKey,omitempty"`

	SecretKey          *string         `json:"secretKey,omitempty"`
	WhiteRemoteAddress *string         `json:"whiteRemoteAddress,omitempty"`
	Admin              *bool           `json:"admin,omitempty"`
	DefaultTopicPerm   *Perm           `json:"defaultTopicPerm,omitempty"`
	DefaultGroupPerm   *Perm           `json:"defaultGroupPerm,omitempty"`
	TopicPerms         *[]ResourcePerm `json:"topicPerms,omitempty"`
	GroupPerms         *[]ResourcePerm `json:"groupPerms,omitempty"`

	// GlobalWhiteRemoteAddresses is the new list, for OpSetGlobalWhite.
	GlobalWhiteRemoteAddresses []string `json:"globalWhiteRemoteAddresses,omitempty"`
	// Config is the new ACL, for OpReplace.
	Config *Config `json:"config,omitempty"`
}

// ErrNoAccount is the error of deleting an access key the ACL does not have.
var ErrNoAccount = errors.New("acl: no such access key")

// Apply returns a new Config: c with u applied, validated. c is not
// modified. The result depends on c and u only.
func (c *Config) Apply(u Update) (*Config, error) {
	out := c.Clone()
	switch u.Op {
	case OpPutAccount:
		i := out.index(u.AccessKey)
		if i < 0 {
			if u.SecretKey == nil {
				return nil, fmt.Errorf("acl: new account %q needs a secret key", u.AccessKey)
			}
			out.Accounts = append(out.Accounts, Account{AccessKey: u.AccessKey})
			i = len(out.Accounts) - 1
		}
		a := &out.Accounts[i]
		if u.SecretKey != nil {
			a.SecretKey = *u.SecretKey
		}
		if u.WhiteRemoteAddress != nil {
			a.WhiteRemoteAddress = *u.WhiteRemoteAddress
		}
		if u.Admin != nil {
			a.Admin = *u.Admin
		}
		if u.DefaultTopicPerm != nil {
			a.DefaultTopicPerm = *u.DefaultTopicPerm
		}
		if u.DefaultGroupPerm != nil {
			a.DefaultGroupPerm = *u.DefaultGroupPerm
		}
		if u.TopicPerms != nil {
			a.TopicPerms = slices.Clone(*u.TopicPerms)
		}
		if u.GroupPerms != nil {
			a.GroupPerms = slices.Clone(*u.GroupPerms)
		}
	case OpDeleteAccount:
		i := out.index(u.AccessKey)
		if i < 0 {
			return nil, fmt.Errorf("%w: %q", ErrNoAccount, u.AccessKey)
		}
		out.Accounts = slices.Delete(out.Accounts, i, i+1)
	case OpSetGlobalWhite:
		out.GlobalWhiteRemoteAddresses = slices.Clone(u.GlobalWhiteRemoteAddresses)
	case OpReplace:
		if u.Config == nil {
			return nil, errors.New("acl: replace without a config")
		}
		out = u.Config.Clone()
	default:
		return nil, fmt.Errorf("acl: unknown update op %q", u.Op)
	}
	out.normalize()
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateFromRequest turns an ACL admin request's ext fields into an
// Update, reading them as RocketMQ's AdminBrokerProcessor does:
//
//   - UPDATE_AND_CREATE_ACL_CONFIG (50): accessKey (required); secretKey,
//     defaultTopicPerm, defaultGroupPerm if not empty; whiteRemoteAddress,
//     topicPerms, groupPerms (comma lists of name=PERM) if present; admin
//     always (missing is false, as Java's primitive field);
//   - DELETE_ACL_CONFIG (51): accessKey (required);
//   - UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): globalWhiteAddrs (required,
//     a comma list; empty clears it); aclFileFullPath is ignored (raftmq
//     has one ACL).
//
// Perms are parsed strictly.
func UpdateFromRequest(code int32, ext map[string]string) (Update, error) {
	get := func(k string) (string, bool) {
		v, ok := ext[k]
		return v, ok
	}
	required := func(k string) (string, error) {
		v, ok := get(k)
		if !ok || v == "" {
			return "", fmt.Errorf("acl: request code %d: the custom field <%s> is null", code, k)
		}
		return v, nil
	}
	switch code {
	case UpdateAndCreateACLConfig:
		ak, err := required("accessKey")
		if err != nil {
			return Update{}, err
		}
		u := Update{Op: OpPutAccount, AccessKey: ak}
		if v, _ := get("secretKey"); v != "" {
			u.SecretKey = &v
		}
		if v, ok := get("whiteRemoteAddress"); ok {
			u.WhiteRemoteAddress = &v
		}
		admin := strings.EqualFold(ext["admin"], "true")
		u.Admin = &admin
		for _, f := range []struct {
			key string
			dst **Perm
		}{{"defaultTopicPerm", &u.DefaultTopicPerm}, {"defaultGroupPerm", &u.DefaultGroupPerm}} {
			if v, _ := get(f.key); v != "" {
				p, err := ParsePerm(v)
				if err != nil {
					return Update{}, fmt.Errorf("acl: %s: %w", f.key, err)
				}
				*f.dst = &p
			}
		}
		for _, f := range []struct {
			key string
			dst **[]ResourcePerm
		}{{"topicPerms", &u.TopicPerms}, {"groupPerms", &u.GroupPerms}} {
			v, ok := get(f.key)
			if !ok {
				continue
			}
			list := []ResourcePerm{}
			for item := range strings.SplitSeq(v, ",") {
				if strings.TrimSpace(item) == "" {
					continue
				}
				rp, err := ParseResourcePerm(item)
				if err != nil {
					return Update{}, fmt.Errorf("acl: %s: %w", f.key, err)
				}
				list = append(list, rp)
			}
			*f.dst = &list
		}
		return u, nil
	case DeleteACLConfig:
		ak, err := required("accessKey")
		if err != nil {
			return Update{}, err
		}
		return Update{Op: OpDeleteAccount, AccessKey: ak}, nil
	case UpdateGlobalWhiteAddrsConfig:
		// Empty is allowed: it clears the list.
		v, ok := get("globalWhiteAddrs")
		if !ok {
			return Update{}, fmt.Errorf("acl: request code %d: the custom field <globalWhiteAddrs> is null", code)
		}
		var addrs []string
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				addrs = append(addrs, item)
			}
		}
		return Update{Op: OpSetGlobalWhite, GlobalWhiteRemoteAddresses: addrs}, nil
	}
	return Update{}, fmt.Errorf("acl: request code %d is not an ACL update", code)
}
