package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// Broker settings as RocketMQ's GET_BROKER_CONFIG (26) and
// UPDATE_BROKER_CONFIG (25) see them: Java properties text, RocketMQ's key
// names. Three kinds of settings:
//
//   - group-wide, changed at runtime through the log (OpBrokerConfig):
//     brokerPermission and autoCreateTopicEnable. Every node applies the
//     change at the same index, and a restarted or new node gets it from
//     the log or a snapshot; it then overrides the node's flag.
//   - per node, changed at runtime on the node asked: logLevel. It is not
//     replicated and lasts until the node restarts.
//   - everything else is the node's configuration (its flags or --config
//     file) and needs a restart; UPDATE_BROKER_CONFIG refuses it.
//
// WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327), which
// mqadmin sends to name servers, are served by the nodes too: they set the
// group's brokerPermission.

// RocketMQ's request codes for broker settings and maintenance.
const (
	CodeUpdateBrokerConfig       int32 = 25
	CodeGetBrokerConfig          int32 = 26
	CodeWipeWritePermOfBroker    int32 = 205
	CodeCleanExpiredConsumeQueue int32 = 306
	CodeAddWritePermOfBroker     int32 = 327
	CodeDeleteExpiredCommitLog   int32 = 329
)

// Setting scopes (AdminSetting.Scope).
const (
	ScopeGroup   = "group"   // runtime, replicated through the log
	ScopeNode    = "node"    // runtime, this node only, until it restarts
	ScopeRestart = "restart" // the node's configuration: restart to change
)

// Names of the runtime settings.
const (
	SettingBrokerPermission = "brokerPermission"
	SettingAutoCreateTopic  = "autoCreateTopicEnable"
	SettingLogLevel         = "logLevel"
)

// groupSettingCheck validates a group-wide setting's value and returns it
// in canonical form.
var groupSettingCheck = map[string]func(string) (string, error){
	SettingBrokerPermission: func(v string) (string, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || (n != remoting.PermRead && n != remoting.PermWrite && n != remoting.PermRead|remoting.PermWrite) {
			return "", fmt.Errorf("brokerPermission %q: want 2 (write only), 4 (read only) or 6 (read and write)", v)
		}
		return strconv.Itoa(n), nil
	},
	SettingAutoCreateTopic: func(v string) (string, error) {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return "", fmt.Errorf("autoCreateTopicEnable %q: want true or false", v)
		}
		return strconv.FormatBool(b), nil
	},
}

// groupSettings is the group-wide settings in effect, as of the store's
// settings version.
type groupSettings struct {
	version    uint64
	perm       int // brokerPermission
	autoCreate bool
}

// groupSettingsCache caches groupSettings between changes (they are read
// on every send and pull).
type groupSettingsCache struct{ p atomic.Pointer[groupSettings] }

// settings returns the group-wide settings in effect: the log's, else the
// node's configuration.
func (b *Broker) settings() *groupSettings {
	st := b.rep.Store()
	v := st.BrokerConfigVersion()
	if cur := b.gset.p.Load(); cur != nil && cur.version == v {
		return cur
	}
	m, v := st.BrokerConfig()
	gs := &groupSettings{version: v, perm: remoting.PermRead | remoting.PermWrite, autoCreate: b.cfg.AutoCreateTopics}
	if s, ok := m[SettingBrokerPermission]; ok {
		if n, err := strconv.Atoi(s); err == nil {
			gs.perm = n
		}
	}
	if s, ok := m[SettingAutoCreateTopic]; ok {
		if t, err := strconv.ParseBool(s); err == nil {
			gs.autoCreate = t
		}
	}
	b.gset.p.Store(gs)
	return gs
}

// autoCreate reports whether an unknown topic is created on first send.
func (b *Broker) autoCreate() bool { return b.settings().autoCreate }

// brokerPerm is the group's brokerPermission (PermRead|PermWrite unless
// changed).
func (b *Broker) brokerPerm() int { return b.settings().perm }

// AdminSetting is one line of the JSON view of GET_BROKER_CONFIG.
type AdminSetting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Scope string `json:"scope"`
}

// BrokerSettings returns the node's settings under RocketMQ's names (and
// raftmq's own where RocketMQ has none), sorted by key.
func (b *Broker) BrokerSettings() []AdminSetting {
	gs := b.settings()
	r := b.rep.Store().Retention()
	flush := "SYNC_FLUSH"
	if b.cfg.Flush == commitlog.FlushAsync {
		flush = "ASYNC_FLUSH"
	}
	hours := make([]string, len(r.DeleteWhen))
	for i, h := range r.DeleteWhen {
		hours[i] = fmt.Sprintf("%02d", h)
	}
	level := "info"
	if b.cfg.LogLevel != nil {
		level = strings.ToLower(b.cfg.LogLevel.Level().String())
	}
	idle := b.cfg.ClientIdleTimeout
	switch {
	case idle == 0:
		idle = remoting.DefaultIdleTimeout
	case idle < 0:
		idle = 0 // never
	}
	restart := map[string]string{
		"brokerName":                      b.cfg.BrokerName,
		"brokerClusterName":               b.cfg.ClusterName,
		"brokerId":                        strconv.FormatUint(b.cfg.ID, 10),
		"listenPort":                      portOf(b.ClientAddr()),
		"storePathRootDir":                b.cfg.Dir,
		"flushDiskType":                   flush,
		"mappedFileSizeCommitLog":         strconv.FormatInt(b.cfg.SegmentSize, 10),
		"fileReservedTime":                strconv.FormatInt(int64(r.FileReservedTime.Hours()), 10),
		"deleteWhen":                      strings.Join(hours, ";"),
		"diskMaxUsedSpaceRatio":           strconv.Itoa(int(r.CleanRatio*100 + 0.5)),
		"namesrvAddr":                     strings.Join(b.cfg.NameServers, ";"),
		"aclEnable":                       strconv.FormatBool(b.cfg.ACLFile != "" || b.policy() != nil),
		"transactionTimeOut":              strconv.FormatInt(b.cfg.TxnTimeout.Milliseconds(), 10),
		"transactionCheckInterval":        strconv.FormatInt(b.cfg.TxnCheckInterval.Milliseconds(), 10),
		"transactionCheckMax":             strconv.Itoa(b.cfg.TxnCheckMax),
		"clientChannelMaxIdleTimeSeconds": strconv.FormatInt(int64(idle.Seconds()), 10),
	}
	out := []AdminSetting{
		{Key: SettingBrokerPermission, Value: strconv.Itoa(gs.perm), Scope: ScopeGroup},
		{Key: SettingAutoCreateTopic, Value: strconv.FormatBool(gs.autoCreate), Scope: ScopeGroup},
		{Key: SettingLogLevel, Value: level, Scope: ScopeNode},
	}
	for k, v := range restart {
		out = append(out, AdminSetting{Key: k, Value: v, Scope: ScopeRestart})
	}
	slices.SortFunc(out, func(a, b AdminSetting) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// ParseProperties reads Java properties text as mqadmin sends it
// (key=value lines; # and ! comments; blank lines skipped). A line without
// '=' or ':' is an error.
func ParseProperties(text string) (map[string]string, error) {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("line %d %q: want key=value", n, line)
		}
		m[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return m, sc.Err()
}

// handleGetBrokerConfig answers GET_BROKER_CONFIG with this node's
// settings: Java properties text as RocketMQ's broker answers (with its
// version header), or the AdminSetting list for the JSON view.
func (b *Broker) handleGetBrokerConfig(req *remoting.Command) *remoting.Command {
	set := b.BrokerSettings()
	if jsonView(req) {
		return b.adminAnswer(req, set, nil)
	}
	var sb strings.Builder
	for _, s := range set {
		fmt.Fprintf(&sb, "%s=%s\n", s.Key, s.Value)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"version": strconv.FormatUint(b.rep.Store().BrokerConfigVersion(), 10)}
	resp.Body = []byte(sb.String())
	return resp
}

// handleUpdateBrokerConfig serves UPDATE_BROKER_CONFIG: a body of
// key=value lines, all group-wide (replicated through the leader) or all
// of this node (applied here). A restart-only or unknown key refuses the
// whole request: nothing is changed.
func (b *Broker) handleUpdateBrokerConfig(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	kv, err := ParseProperties(string(req.Body))
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, "update broker config: "+err.Error())
	}
	if len(kv) == 0 {
		return b.refuse(conn, req, remoting.InvalidParameter, "update broker config: no key=value in the body")
	}
	group, node := map[string]string{}, map[string]string{}
	known := map[string]string{}
	for _, s := range b.BrokerSettings() {
		known[s.Key] = s.Scope
	}
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		v := kv[k]
		switch known[k] {
		case ScopeGroup:
			cv, err := groupSettingCheck[k](v)
			if err != nil {
				return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
			}
			group[k] = cv
		case ScopeNode:
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(v)); err != nil {
				return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("logLevel %q: want debug, info, warn or error", v))
			}
			if b.cfg.LogLevel == nil {
				return b.refuse(conn, req, remoting.InvalidParameter, "logLevel: this node's log level is fixed (embedded broker)")
			}
			node[k] = v
		case ScopeRestart:
			return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("%s is the node's configuration: change its flag or config file and restart the node (runtime settings: %s, %s; %s per node)",
				k, SettingBrokerPermission, SettingAutoCreateTopic, SettingLogLevel))
		default:
			return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("unknown broker setting %q (getBrokerConfig lists them)", k))
		}
	}
	if len(group) > 0 && len(node) > 0 {
		return b.refuse(conn, req, remoting.InvalidParameter, "update group-wide settings and a node's own settings in separate requests")
	}
	if len(node) > 0 {
		var lvl slog.Level
		_ = lvl.UnmarshalText([]byte(node[SettingLogLevel]))
		b.cfg.LogLevel.Set(lvl)
		b.audit(conn, req, "broker setting changed on this node", "settings", node)
		return remoting.NewResponse(req, remoting.Success, "")
	}
	return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command {
		if resp := b.proposeSettings(ctx, conn, req, group); resp != nil {
			return resp
		}
		return remoting.NewResponse(req, remoting.Success, "")
	})
}

// proposeSettings replicates group-wide settings and logs the change; it
// returns nil once they are applied here, else the error answer. Leader
// only.
func (b *Broker) proposeSettings(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command, set map[string]string) *remoting.Command {
	if err := b.exec(ctx, &store.Command{Op: store.OpBrokerConfig, Settings: set}); err != nil {
		if errors.Is(err, store.ErrBadCommand) {
			return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
		}
		return b.errorResponse(req, err)
	}
	b.audit(conn, req, "group-wide broker settings changed", "settings", set)
	return nil
}

// handleWritePerm serves WIPE_WRITE_PERM_OF_BROKER and
// ADD_WRITE_PERM_OF_BROKER for this group (header brokerName): the group's
// brokerPermission becomes 4 (read only) or 6, through the log. The answer
// counts the group's topics, as a name server counts those it changed.
func (b *Broker) handleWritePerm(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	name := req.ExtFields["brokerName"]
	if name != b.cfg.BrokerName {
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("broker name %q: this group is %q", name, b.cfg.BrokerName))
	}
	perm, field := remoting.PermRead, "wipeTopicCount"
	if req.Code == CodeAddWritePermOfBroker {
		perm, field = remoting.PermRead|remoting.PermWrite, "addTopicCount"
	}
	return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command {
		if resp := b.proposeSettings(ctx, conn, req, map[string]string{SettingBrokerPermission: strconv.Itoa(perm)}); resp != nil {
			return resp
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.ExtFields = map[string]string{field: strconv.Itoa(len(b.rep.Store().Topics()))}
		return resp
	})
}

// AdminMaintenance is the JSON view of CLEAN_EXPIRED_CONSUMEQUEUE and
// DELETE_EXPIRED_COMMITLOG: what this node deleted.
type AdminMaintenance struct {
	Node    uint64 `json:"node"`
	Deleted int    `json:"deleted"` // files (consume queues) or segments (commitlog)
	What    string `json:"what"`
}

// handleMaintenance serves CLEAN_EXPIRED_CONSUMEQUEUE and
// DELETE_EXPIRED_COMMITLOG on this node (retention is each node's own).
func (b *Broker) handleMaintenance(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	st := b.rep.Store()
	var v AdminMaintenance
	var err error
	v.Node = b.cfg.ID
	if req.Code == CodeCleanExpiredConsumeQueue {
		v.What = "consume-queue files"
		v.Deleted, err = st.CleanExpiredQueues()
	} else {
		v.What = "commitlog segments"
		v.Deleted, err = st.DeleteExpired()
	}
	b.audit(conn, req, "expired "+v.What+" deleted on request", "deleted", v.Deleted, "err", err)
	if err != nil {
		return b.errorResponse(req, err)
	}
	if jsonView(req) {
		return b.adminAnswer(req, v, nil)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// extClientAddr carries a forwarded request's client address to the
// leader, for its log (audit). A node sets it on every request it reads
// from a client and trusts it only on requests forwarded by a member.
const extClientAddr = "raftmqClientAddr"

// markCaller records the client's address on a request read from a
// client (not one forwarded by a member).
func markCaller(conn *remoting.ServerConn, req *remoting.Command) {
	if conn == nil || req.ExtFields[extForwarded] != "" {
		return
	}
	if req.ExtFields == nil {
		req.ExtFields = map[string]string{}
	}
	req.ExtFields[extClientAddr] = conn.RemoteAddr().String()
}

// caller is who sent a request, for the log: its client address (through
// which member, if forwarded) and its access key, if signed.
func caller(conn *remoting.ServerConn, req *remoting.Command) []any {
	by := req.ExtFields[extClientAddr]
	if by == "" {
		by = remoteAddr(conn)
	}
	attrs := []any{"by", by}
	if via := req.ExtFields[extForwarded]; via != "" {
		attrs = append(attrs, "via_node", via)
	}
	if ak := req.ExtFields["AccessKey"]; ak != "" {
		attrs = append(attrs, "access_key", ak)
	}
	return attrs
}

// audit logs an admin change carried out, once, on the node that carried
// it out, with who asked.
func (b *Broker) audit(conn *remoting.ServerConn, req *remoting.Command, what string, kv ...any) {
	b.log.Info("cluster: "+what, append(append(kv, "code", req.Code), caller(conn, req)...)...)
}
