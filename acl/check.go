package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// TraceTopic is RocketMQ's message trace topic (TopicValidator.RMQ_SYS_TRACE_TOPIC):
// a request whose only need there is PUB passes once signed.
const TraceTopic = "RMQ_SYS_TRACE_TOPIC"

// Policy is a compiled Config that answers Check. It is immutable and
// safe for concurrent use; a changed ACL is a new Policy (Apply).
type Policy struct {
	cfg      *Config
	global   []AddrPattern
	accounts map[string]*account
}

type account struct {
	Account
	white  AddrPattern
	topics map[string]Perm
	groups map[string]Perm
}

// NewPolicy validates and compiles c (which it copies).
func NewPolicy(c *Config) (*Policy, error) {
	c = c.Clone()
	c.normalize()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p := &Policy{cfg: c, accounts: make(map[string]*account, len(c.Accounts))}
	for _, s := range c.GlobalWhiteRemoteAddresses {
		pat, _ := CompileAddrPattern(s) // Validate compiled it
		p.global = append(p.global, pat)
	}
	for _, a := range c.Accounts {
		ca := &account{Account: a, topics: map[string]Perm{}, groups: map[string]Perm{}}
		ca.white, _ = CompileAddrPattern(a.WhiteRemoteAddress)
		for _, rp := range a.TopicPerms {
			ca.topics[rp.Name] = rp.Perm
		}
		for _, rp := range a.GroupPerms {
			ca.groups[rp.Name] = rp.Perm
		}
		p.accounts[a.AccessKey] = ca
	}
	return p, nil
}

// Config returns a copy of the policy's config.
func (p *Policy) Config() *Config { return p.cfg.Clone() }

// Apply returns the policy of p's config with u applied (Config.Apply).
func (p *Policy) Apply(u Update) (*Policy, error) {
	c, err := p.cfg.Apply(u)
	if err != nil {
		return nil, err
	}
	return NewPolicy(c)
}

// Request is what Check needs of a request.
type Request struct {
	// RemoteAddr is the client's address, "host:port" (the connection's
	// remote address).
	RemoteAddr string
	Code       int32
	ExtFields  map[string]string
	Body       []byte
	// Unsigned lists ext fields a trusted hop may have added after the
	// client signed (raftmq's forwarding marker); they are left out of the
	// signature.
	Unsigned []string
}

// Grant says why Check let a request through.
type Grant uint8

const (
	// GrantGlobalWhite: the client's address is in
	// globalWhiteRemoteAddresses; nothing else was checked.
	GrantGlobalWhite Grant = iota + 1
	// GrantAccountWhite: the access key's whiteRemoteAddress matches; no
	// signature or permission was checked.
	GrantAccountWhite
	// GrantSigned: the signature and the permissions held.
	GrantSigned
	// GrantNameServerRead: a route query (NameServerRead), answered to
	// anyone as RocketMQ's name server does; nothing was checked.
	GrantNameServerRead
)

func (g Grant) String() string {
	switch g {
	case GrantGlobalWhite:
		return "global white address"
	case GrantAccountWhite:
		return "account white address"
	case GrantSigned:
		return "signed"
	case GrantNameServerRead:
		return "name server read"
	}
	return fmt.Sprintf("Grant(%d)", uint8(g))
}

// ErrDenied is what every *DeniedError is (errors.Is).
var ErrDenied = errors.New("acl: access denied")

// DeniedError is a refused request. Msg is RocketMQ's AclException
// message ("No accessKey is configured", "No acl config for X", "Check
// signature failed for accessKey=X", "Need admin permission for request
// code=N, but accessKey=X is not", "No default permission for topic:T" or
// "group:G").
type DeniedError struct {
	Code      int32  // the request code
	AccessKey string // as sent; "" if none
	Msg       string
}

func (e *DeniedError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrDenied) hold.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// Remark is the remark of the answer a broker sends: the message with the
// exception class a RocketMQ broker names, which Java clients print.
func (e *DeniedError) Remark() string {
	return "org.apache.rocketmq.acl.common.AclException: " + e.Msg
}

// whiteMatcher tells whether a white-address pattern admits the request's
// remote address (a pattern matching every address admits even one that
// cannot be parsed).
func whiteMatcher(remote string) func(AddrPattern) bool {
	addr, addrOK := ParseRemoteAddr(remote)
	return func(pat AddrPattern) bool {
		if pat.kind == patAll {
			return true
		}
		return addrOK && pat.matchAddr(addr)
	}
}

// globalWhite reports whether a global white address admits the request.
func (p *Policy) globalWhite(white func(AddrPattern) bool) bool {
	for _, pat := range p.global {
		if white(pat) {
			return true
		}
	}
	return false
}

// Check decides a request, in RocketMQ's order
// (PlainPermissionManager.validate), after one step of its own:
//
//  0. a route query (NameServerRead): allowed, as RocketMQ's name server,
//     which checks no ACL, answers it;
//  1. the client's address matches globalWhiteRemoteAddresses: allowed;
//  2. no AccessKey field: "No accessKey is configured"; an unknown one:
//     "No acl config for X";
//  3. the account's whiteRemoteAddress matches: allowed;
//  4. the Signature does not verify (Verify): "Check signature failed for
//     accessKey=X";
//  5. the only need is PUB on RMQ_SYS_TRACE_TOPIC: allowed;
//  6. an admin request (NeedsAdmin) from a non-admin account: "Need admin
//     permission for request code=N, but accessKey=X is not";
//  7. an admin account without topic and group perms: allowed; else each
//     resource the request touches (Resources) needs its perm, from the
//     account's list or its default: "No default permission for
//     topic:T" / "group:G".
//
// Unlike RocketMQ, which reads the resources before step 1, Check reads
// them (and decodes a heartbeat's body) only after the signature held; a
// request whose resources cannot be read is refused with the reason.
func (p *Policy) Check(r Request) (Grant, error) {
	if NameServerRead(r.Code) {
		return GrantNameServerRead, nil
	}
	white := whiteMatcher(r.RemoteAddr)
	if p.globalWhite(white) {
		return GrantGlobalWhite, nil
	}
	ak, ok := r.ExtFields[FieldAccessKey]
	deny := func(format string, args ...any) (Grant, error) {
		return 0, &DeniedError{Code: r.Code, AccessKey: ak, Msg: fmt.Sprintf(format, args...)}
	}
	if !ok {
		return deny("No accessKey is configured")
	}
	a := p.accounts[ak]
	if a == nil {
		return deny("No acl config for %s", ak)
	}
	if white(a.white) {
		return GrantAccountWhite, nil
	}
	if !verify(r.ExtFields, r.Body, a.SecretKey, r.Unsigned) {
		return deny("Check signature failed for accessKey=%s", ak)
	}
	need, err := Resources(r.Code, r.ExtFields, r.Body)
	if err != nil {
		return deny("%s", strings.TrimPrefix(err.Error(), "acl: "))
	}
	for _, res := range need {
		if !res.Group && res.Name == TraceTopic && res.Perm == Pub {
			return GrantSigned, nil
		}
	}
	if NeedsAdmin(r.Code, r.ExtFields) && !a.Admin {
		return deny("Need admin permission for request code=%d, but accessKey=%s is not", r.Code, ak)
	}
	if a.Admin && len(a.topics) == 0 && len(a.groups) == 0 {
		return GrantSigned, nil
	}
	for _, res := range need {
		list, def := a.topics, a.DefaultTopicPerm
		if res.Group {
			list, def = a.groups, a.DefaultGroupPerm
		}
		owned, listed := list[res.Name]
		if !listed {
			owned = def
		}
		if !owned.Allows(res.Perm) {
			return deny("No default permission for %s", res)
		}
	}
	return GrantSigned, nil
}

// Resource is a topic or consumer group a request touches, and the perm
// it needs there.
type Resource struct {
	Group bool   // a consumer group, named without %RETRY%; else a topic
	Name  string // never empty
	Perm  Perm
}

// String is "topic:T" or "group:G", as RocketMQ prints resources.
func (r Resource) String() string {
	if r.Group {
		return "group:" + r.Name
	}
	return "topic:" + r.Name
}

// resources collects needs in order, a resource named twice keeping its
// first place and its last perm (RocketMQ's resource map).
type resources []Resource

func (rs *resources) add(res Resource) {
	if res.Name == "" {
		return // RocketMQ skips a missing (null) name
	}
	for i := range *rs {
		if (*rs)[i].Group == res.Group && (*rs)[i].Name == res.Name {
			(*rs)[i].Perm = res.Perm
			return
		}
	}
	*rs = append(*rs, res)
}

// topic adds a topic; a retry topic %RETRY%G is group G, as in RocketMQ.
func (rs *resources) topic(name string, perm Perm) {
	if g, ok := strings.CutPrefix(name, RetryPrefix); ok {
		rs.group(g, perm)
		return
	}
	rs.add(Resource{Name: name, Perm: perm})
}

func (rs *resources) group(name string, perm Perm) {
	rs.add(Resource{Group: true, Name: name, Perm: perm})
}

// Resources returns the topics and groups a request touches and the perm
// each needs, read with the decoders the broker uses, so that what is
// checked is what the broker acts on:
//
//   - SEND_MESSAGE 10, SEND_MESSAGE_V2 310, SEND_BATCH_MESSAGE 320,
//     SEND_REPLY_MESSAGE 324, SEND_REPLY_MESSAGE_V2 325: PUB on the topic;
//     a retry topic %RETRY%G needs SUB on group G instead;
//   - CONSUMER_SEND_MSG_BACK 36: SUB on group;
//   - PULL_MESSAGE 11, LITE_PULL_MESSAGE 361, QUERY_CONSUMER_OFFSET 14,
//     UPDATE_CONSUMER_OFFSET 15: SUB on topic and on consumerGroup;
//   - QUERY_MESSAGE 12, SEARCH_OFFSET_BY_TIMESTAMP 29, GET_MAX_OFFSET 30,
//     GET_MIN_OFFSET 31: SUB on topic;
//   - HEART_BEAT 34: SUB on every consumer group in the body and on every
//     topic they subscribe;
//   - UNREGISTER_CLIENT 35 (if it names a consumer group),
//     GET_CONSUMER_LIST_BY_GROUP 38: SUB on consumerGroup;
//   - LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42: SUB on the body's group and
//     on the topics of its queues;
//   - the pop codes (POP_MESSAGE 200050, ACK_MESSAGE 200051, PEEK_MESSAGE
//     200052, CHANGE_MESSAGE_INVISIBLETIME 200053, NOTIFICATION 200054,
//     POLLING_INFO 200055) and raftmq's DEAD_LETTER_MESSAGE 9011: SUB on
//     consumerGroup and topic;
//     BATCH_ACK_MESSAGE 200151: SUB on each ack's group and topic;
//   - RECALL_MESSAGE 370: PUB on topic;
//   - anything else: nothing (signature, and NeedsAdmin, only).
//
// A topic %RETRY%G is always group G. RocketMQ's table has the sends (its
// V1 send reads a "group" field no client sends, V2 the producer group,
// which is CLIENT_INNER_PRODUCER for the clients' retry fallback), 36,
// 11, 12, 34, 35, 38 and 15; raftmq adds 324, 325, 361, 14, 29, 30, 31,
// 41 and 42, and checks a retry topic send against the group the topic
// belongs to.
func Resources(code int32, ext map[string]string, body []byte) ([]Resource, error) {
	var rs resources
	fail := func(err error) ([]Resource, error) {
		return nil, fmt.Errorf("acl: request code %d: %w", code, err)
	}
	switch code {
	case remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage,
		remoting.SendReplyMessage, remoting.SendReplyMessageV2:
		h, err := remoting.DecodeSendMessageRequestHeader(code, ext)
		if err != nil {
			return fail(err)
		}
		if strings.HasPrefix(h.Topic, RetryPrefix) {
			rs.topic(h.Topic, Sub)
		} else {
			rs.topic(h.Topic, Pub)
		}
	case remoting.RecallMessage:
		if ext["topic"] == "" {
			return fail(fmt.Errorf("recall without topic: %w", remoting.ErrMalformed))
		}
		rs.topic(ext["topic"], Pub)
	case remoting.ConsumerSendMsgBack:
		h, err := remoting.DecodeConsumerSendMsgBackRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.group(h.Group, Sub)
	case remoting.PullMessage, remoting.LitePullMessage:
		h, err := remoting.DecodePullMessageRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.topic(h.Topic, Sub)
		rs.group(h.ConsumerGroup, Sub)
	case remoting.PopMessage, remoting.AckMessage, remoting.ChangeMessageInvisibleTime,
		remoting.PeekMessage, remoting.Notification, remoting.PollingInfo, remoting.DeadLetterMessage:
		// Every pop header has consumerGroup and topic.
		group, topic := ext["consumerGroup"], ext["topic"]
		if group == "" || topic == "" {
			return fail(fmt.Errorf("pop request without consumerGroup or topic: %w", remoting.ErrMalformed))
		}
		rs.topic(topic, Sub)
		rs.group(group, Sub)
	case remoting.BatchAckMessage:
		body, err := remoting.DecodeBatchAckBody(body)
		if err != nil {
			return fail(err)
		}
		for _, a := range body.Acks {
			rs.topic(a.Topic, Sub)
			rs.group(a.ConsumerGroup, Sub)
		}
	case remoting.QueryConsumerOffset:
		h, err := remoting.DecodeQueryConsumerOffsetRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.group(h.ConsumerGroup, Sub)
		rs.topic(h.Topic, Sub)
	case remoting.UpdateConsumerOffset:
		h, err := remoting.DecodeUpdateConsumerOffsetRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.group(h.ConsumerGroup, Sub)
		rs.topic(h.Topic, Sub)
	case remoting.QueryMessage:
		h, err := remoting.DecodeQueryMessageRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.topic(h.Topic, Sub)
	case remoting.SearchOffsetByTimestamp:
		h, err := remoting.DecodeSearchOffsetRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.topic(h.Topic, Sub)
	case remoting.GetMaxOffset:
		h, err := remoting.DecodeGetMaxOffsetRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.topic(h.Topic, Sub)
	case remoting.GetMinOffset:
		h, err := remoting.DecodeGetMinOffsetRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.topic(h.Topic, Sub)
	case remoting.HeartBeat:
		hb, err := remoting.DecodeHeartbeatData(body)
		if err != nil {
			return fail(err)
		}
		for _, cd := range hb.ConsumerDataSet {
			rs.group(cd.GroupName, Sub)
			for _, sd := range cd.SubscriptionDataSet {
				rs.topic(sd.Topic, Sub)
			}
		}
	case remoting.UnregisterClient:
		h, err := remoting.DecodeUnregisterClientRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.group(h.ConsumerGroup, Sub)
	case remoting.GetConsumerListByGroup:
		h, err := remoting.DecodeGetConsumerListByGroupRequestHeader(ext)
		if err != nil {
			return fail(err)
		}
		rs.group(h.ConsumerGroup, Sub)
	case remoting.LockBatchMQ, remoting.UnlockBatchMQ:
		b, err := remoting.DecodeLockBatchRequestBody(body)
		if err != nil {
			return fail(err)
		}
		rs.group(b.ConsumerGroup, Sub)
		for _, mq := range b.MQSet {
			rs.topic(mq.Topic, Sub)
		}
	}
	return rs, nil
}
