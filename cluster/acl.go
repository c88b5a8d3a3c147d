package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// Access control (package acl, RocketMQ's plain ACL). The ACL is
// replicated state: the store keeps it as an opaque blob (the acl.Config
// as JSON) changed only by OpACL commands, each an acl.Update applied the
// same way on every node (applyACL). A group takes its first ACL from the
// leader's --acl-file, proposed as one OpReplace; until the log has one,
// a node started with --acl-file enforces its file. Without either, the
// ACL is off (the local demo's default).
//
// Secret keys are sealed (acl.Box) with the group's ACL key
// (Config.ACLKey, a file every node holds, as it holds its certificates)
// before they are proposed (proposeACL), so the log, the state in
// meta.db and snapshots hold them sealed; the node opens them when it
// builds its policy (loadPolicy). Plaintext secrets of an ACL stored
// before sealing still apply. Applying an update does not seal or open
// anything, so it stays deterministic.

// applyACL is the store's Config.ApplyACL: the new ACL from the current
// one and an update, deterministic.
func applyACL(cur, update []byte) ([]byte, error) {
	c := &acl.Config{}
	if len(cur) > 0 {
		var err error
		if c, err = acl.ParseJSON(cur); err != nil {
			return nil, fmt.Errorf("stored ACL: %w", err)
		}
	}
	var u acl.Update
	if err := json.Unmarshal(update, &u); err != nil {
		return nil, fmt.Errorf("ACL update: %w", err)
	}
	next, err := c.Apply(u)
	if err != nil {
		return nil, err
	}
	return json.Marshal(next)
}

// aclState caches the policy built from the store's ACL.
type aclState struct {
	file   *acl.Policy // from --acl-file, until the log holds an ACL
	box    *acl.Box    // the group's ACL key; nil without one
	cached atomic.Pointer[aclCache]
	mu     sync.Mutex // serialises rebuilding cached
}

type aclCache struct {
	version uint64
	policy  *acl.Policy // nil: the log holds no ACL
}

// policy returns the ACL to enforce, or nil when access control is off.
// Per request it costs two atomic loads while the ACL does not change.
func (b *Broker) policy() *acl.Policy {
	st := b.rep.Store()
	a := &b.acl
	c := a.cached.Load()
	if c == nil || c.version != st.ACLVersion() {
		a.mu.Lock()
		if c = a.cached.Load(); c == nil || c.version != st.ACLVersion() {
			c = b.loadPolicy()
			a.cached.Store(c)
		}
		a.mu.Unlock()
	}
	if c.policy != nil {
		return c.policy
	}
	return a.file
}

// ACLEnforced reports whether the node enforces an ACL (its --acl-file
// or the group's, from the log).
func (b *Broker) ACLEnforced() bool { return b.policy() != nil }

// loadPolicy builds the policy of the store's ACL.
func (b *Broker) loadPolicy() *aclCache {
	blob, v := b.rep.Store().ACL()
	c := &aclCache{version: v}
	if len(blob) == 0 {
		return c
	}
	cfg, err := acl.ParseJSON(blob)
	if err == nil {
		cfg, err = b.acl.box.OpenConfig(cfg)
	}
	if err == nil {
		c.policy, err = acl.NewPolicy(cfg)
	}
	if err != nil {
		// Replicated state that does not load is a bug, or secrets sealed
		// with an ACL key this node lacks; refuse everything rather than
		// serve without the ACL.
		b.log.Error("cluster: the replicated ACL does not load; refusing every request", "err", err)
		c.policy, _ = acl.NewPolicy(&acl.Config{})
	}
	return c
}

// signInternal signs req, a request this node makes of a member on its
// own behalf (the status questions of the admin API and of the disk-full
// hand-off), with the first admin account of the ACL in force: every node
// holds the replicated ACL, secrets included, so it can act as the
// group's operator would. Without an ACL, or an admin account in it, req
// goes unsigned.
func (b *Broker) signInternal(req *remoting.Command) *remoting.Command {
	p := b.policy()
	if p == nil {
		return req
	}
	for _, a := range p.Config().Accounts {
		if a.Admin && a.SecretKey != "" {
			req.ExtFields = acl.Credentials{AccessKey: a.AccessKey, SecretKey: a.SecretKey}.SignFields(req.ExtFields, req.Body)
			break
		}
	}
	return req
}

// checkACL answers a request the ACL refuses (NO_PERMISSION, logged once
// per client host and code), or returns nil.
func (b *Broker) checkACL(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	p := b.policy()
	if p == nil {
		return nil
	}
	r := acl.Request{Code: req.Code, ExtFields: req.ExtFields, Body: req.Body}
	if conn != nil {
		r.RemoteAddr = conn.RemoteAddr().String()
	}
	if _, ok := req.ExtFields[extForwarded]; ok {
		r.Unsigned = []string{extForwarded, extCluster, extClientAddr}
	}
	if _, err := p.Check(r); err != nil {
		var de *acl.DeniedError
		if errors.As(err, &de) {
			return b.refuse(conn, req, remoting.NoPermission, de.Remark())
		}
		return b.refuse(conn, req, remoting.NoPermission, err.Error())
	}
	return nil
}

// handleACLUpdate serves UPDATE_AND_CREATE_ACL_CONFIG (50),
// DELETE_ACL_CONFIG (51) and UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): the
// update goes through the log.
func (b *Broker) handleACLUpdate(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	failed := map[int32]int32{acl.UpdateAndCreateACLConfig: acl.UpdateAndCreateACLConfigFailed,
		acl.DeleteACLConfig: acl.DeleteACLConfigFailed, acl.UpdateGlobalWhiteAddrsConfig: acl.UpdateGlobalWhiteAddrsConfigFailed}[req.Code]
	u, err := acl.UpdateFromRequest(req.Code, req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, failed, err.Error())
	}
	return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command {
		if err := b.proposeACL(ctx, u); err != nil {
			if errors.Is(err, store.ErrBadCommand) {
				return remoting.NewResponse(req, failed, err.Error())
			}
			return b.errorResponse(req, err)
		}
		b.audit(conn, req, "access control changed", "op", u.Op, "account", req.ExtFields["accessKey"])
		return remoting.NewResponse(req, remoting.Success, "")
	})
}

// proposeACL replicates an ACL update, its secret keys sealed. Leader
// only.
func (b *Broker) proposeACL(ctx context.Context, u acl.Update) error {
	u, err := b.acl.box.SealUpdate(u)
	if err != nil {
		if errors.Is(err, acl.ErrNoKey) {
			return err
		}
		return fmt.Errorf("%w: %w", store.ErrBadCommand, err)
	}
	js, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return b.exec(ctx, &store.Command{Op: store.OpACL, ACL: js})
}

// seedACL runs while the node has an --acl-file: once it leads and the log
// holds no ACL, it proposes the file's as the group's (OpReplace).
func (b *Broker) seedACL() {
	b.whileLeader(200*time.Millisecond, func(ctx context.Context) bool {
		if blob, _ := b.rep.Store().ACL(); len(blob) > 0 {
			return false
		}
		if err := b.proposeACL(ctx, acl.Update{Op: acl.OpReplace, Config: b.acl.file.Config()}); err != nil {
			b.log.Warn("cluster: proposing the ACL file as the group's ACL failed; retrying", "err", err)
			return true
		}
		b.log.Info("cluster: the group's ACL is now the one from --acl-file", "file", b.cfg.ACLFile)
		return false
	})
}

// AdminACL is the answer to GET_BROKER_CLUSTER_ACL_INFO (52) with the
// JSON admin view: the ACL in force without its secret keys. RocketMQ
// answers the code with the ACL's version only; raftmq's tools (the
// console's accounts page, and its test of whether an account is admin,
// the code being admin-only) want the accounts.
type AdminACL struct {
	// Enabled: the group enforces an ACL.
	Enabled bool `json:"enabled"`
	// Version counts the ACL changes this node applied.
	Version                    uint64         `json:"version"`
	GlobalWhiteRemoteAddresses []string       `json:"globalWhiteRemoteAddresses"`
	Accounts                   []AdminAccount `json:"accounts"`
}

// AdminAccount is an ACL account as AdminACL shows it: acl.Account
// without the secret key.
type AdminAccount struct {
	AccessKey          string             `json:"accessKey"`
	WhiteRemoteAddress string             `json:"whiteRemoteAddress"`
	Admin              bool               `json:"admin"`
	DefaultTopicPerm   acl.Perm           `json:"defaultTopicPerm"`
	DefaultGroupPerm   acl.Perm           `json:"defaultGroupPerm"`
	TopicPerms         []acl.ResourcePerm `json:"topicPerms"`
	GroupPerms         []acl.ResourcePerm `json:"groupPerms"`
}

// handleACLInfo serves GET_BROKER_CLUSTER_ACL_INFO from this node's
// replicated ACL after a read barrier (so a change just made shows),
// secret keys blanked.
func (b *Broker) handleACLInfo(ctx context.Context, req *remoting.Command) *remoting.Command {
	if resp := b.barrierOrRefuse(ctx, req, "ACL"); resp != nil {
		return resp
	}
	v := AdminACL{Version: b.rep.Store().ACLVersion(), GlobalWhiteRemoteAddresses: []string{}, Accounts: []AdminAccount{}}
	if p := b.policy(); p != nil {
		cfg := p.Config()
		v.Enabled = true
		v.GlobalWhiteRemoteAddresses = append(v.GlobalWhiteRemoteAddresses, cfg.GlobalWhiteRemoteAddresses...)
		for _, a := range cfg.Accounts {
			v.Accounts = append(v.Accounts, AdminAccount{AccessKey: a.AccessKey, WhiteRemoteAddress: a.WhiteRemoteAddress, Admin: a.Admin,
				DefaultTopicPerm: a.DefaultTopicPerm, DefaultGroupPerm: a.DefaultGroupPerm, TopicPerms: a.TopicPerms, GroupPerms: a.GroupPerms})
		}
	}
	body, err := json.Marshal(v)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"brokerName": b.cfg.BrokerName, "clusterName": b.cfg.ClusterName,
		"version": strconv.FormatUint(v.Version, 10)}
	resp.Body = body
	return resp
}
