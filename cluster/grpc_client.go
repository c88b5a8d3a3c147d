package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/cluster/membership"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// A RocketMQ 5 client's session on a node: the Settings it sent on its
// Telemetry stream (which client type, which topics or group) and the
// streams open to it, over which the node sends transaction check-backs.

type grpcSession struct {
	clientID string
	settings *rmqpb.Settings
	ch       *telemetryChannel // the latest stream; nil when none is open
}

// telemetryChannel is one Telemetry stream as a membership.Channel: a
// transaction check-back (CHECK_TRANSACTION_STATE) becomes a
// RecoverOrphanedTransactionCommand.
type telemetryChannel struct {
	s      *grpcService
	addr   string
	mu     sync.Mutex // serializes Send
	stream rmqpb.MessagingService_TelemetryServer
}

var _ membership.Channel = (*telemetryChannel)(nil)

func (c *telemetryChannel) send(cmd *rmqpb.TelemetryCommand) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stream.Send(cmd)
}

func (c *telemetryChannel) Oneway(req *remoting.Command) error {
	switch req.Code {
	case remoting.CheckTransactionState:
		h, err := remoting.DecodeCheckTransactionStateRequestHeader(req.ExtFields)
		if err != nil {
			return fmt.Errorf("cluster: grpc check-back: %w", err)
		}
		m, _, err := message.Decode(req.Body)
		if err != nil {
			return fmt.Errorf("cluster: grpc check-back: decode the half message: %w", err)
		}
		gm := grpcMessage(&m, h.Topic)
		gm.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
		return c.send(&rmqpb.TelemetryCommand{Status: ok(), Command: &rmqpb.TelemetryCommand_RecoverOrphanedTransactionCommand{
			RecoverOrphanedTransactionCommand: &rmqpb.RecoverOrphanedTransactionCommand{Message: gm, TransactionId: grpcTxnID(h.OffsetMsgID, h.TranStateTableOffset)}}})
	case remoting.NotifyConsumerIDsChanged:
		// RocketMQ 5 clients ask for their assignment every few seconds;
		// there is nothing to push.
		return nil
	}
	return fmt.Errorf("cluster: request code %d cannot be sent to a gRPC client", req.Code)
}

// Telemetry serves a client's command stream: Settings are answered with
// the settings the client must use and register the client; the client's
// answers to the node's commands are logged.
func (s *grpcService) Telemetry(stream rmqpb.MessagingService_TelemetryServer) error {
	ctx := stream.Context()
	clientID := mdValue(ctx, mdClientID)
	if clientID == "" {
		return status.Error(codes.InvalidArgument, "Telemetry: x-mq-client-id metadata is required")
	}
	ch := &telemetryChannel{s: s, addr: peerAddr(ctx), stream: stream}
	s.b.log.Debug("cluster: grpc telemetry stream opened", "client_id", clientID, "addr", ch.addr)
	defer s.closeChannel(clientID, ch)
	for {
		cmd, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			s.b.log.Debug("cluster: grpc telemetry stream ended by the client", "client_id", clientID, "addr", ch.addr)
			return nil
		}
		if err != nil {
			s.b.log.Debug("cluster: grpc telemetry stream failed", "client_id", clientID, "addr", ch.addr, "err", err)
			return err
		}
		switch c := cmd.Command.(type) {
		case *rmqpb.TelemetryCommand_Settings:
			reply, code, err := s.settings(ctx, clientID, ch, c.Settings)
			if err != nil {
				_ = ch.send(&rmqpb.TelemetryCommand{Status: reply})
				return status.Error(code, reply.Message)
			}
			if err := ch.send(&rmqpb.TelemetryCommand{Status: ok(), Command: &rmqpb.TelemetryCommand_Settings{Settings: s.serverSettings(c.Settings)}}); err != nil {
				return err
			}
		case *rmqpb.TelemetryCommand_ThreadStackTrace, *rmqpb.TelemetryCommand_VerifyMessageResult:
			s.b.log.Debug("cluster: grpc client answered a command", "client_id", clientID, "command", fmt.Sprintf("%T", c))
		default:
			s.b.log.Debug("cluster: grpc client sent an unexpected telemetry command", "client_id", clientID, "command", fmt.Sprintf("%T", c))
		}
	}
}

// settings checks a client's Settings and registers the client. On
// refusal it returns the status to send and the stream's gRPC code.
func (s *grpcService) settings(ctx context.Context, clientID string, ch *telemetryChannel, in *rmqpb.Settings) (*rmqpb.Status, codes.Code, error) {
	var need []acl.Resource
	switch p := in.PubSub.(type) {
	case *rmqpb.Settings_Publishing:
		for _, t := range p.Publishing.Topics {
			need = append(need, acl.Resource{Name: t.GetName(), Perm: acl.Pub})
		}
	case *rmqpb.Settings_Subscription:
		if p.Subscription.GetGroup().GetName() == "" {
			return st(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "subscription settings without a consumer group"), codes.InvalidArgument, errors.New("no group")
		}
		need = append(need, acl.Resource{Group: true, Name: p.Subscription.Group.GetName(), Perm: acl.Sub})
		for _, e := range p.Subscription.Subscriptions {
			need = append(need, acl.Resource{Name: e.GetTopic().GetName(), Perm: acl.Sub})
		}
	default:
		return st(rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE, "settings have neither publishing nor subscription"), codes.InvalidArgument, errors.New("no pub_sub")
	}
	if _, denied := s.authorize(ctx, "Telemetry", need); denied != nil {
		return denied, codes.PermissionDenied, errors.New(denied.Message)
	}
	s.mu.Lock()
	sess := s.sessions[clientID]
	if sess == nil {
		sess = &grpcSession{clientID: clientID}
		s.sessions[clientID] = sess
	}
	sess.settings, sess.ch = proto.Clone(in).(*rmqpb.Settings), ch
	s.mu.Unlock()
	s.register(ctx, sess)
	return nil, codes.OK, nil
}

// serverSettings is the Settings reply: the client's own, with the
// policies the node sets. RocketMQ 5 clients need an exponential backoff
// and a body bound for producers, a batch size and long-polling timeout
// for consumers.
func (s *grpcService) serverSettings(in *rmqpb.Settings) *rmqpb.Settings {
	out := proto.Clone(in).(*rmqpb.Settings)
	switch p := out.PubSub.(type) {
	case *rmqpb.Settings_Publishing:
		out.BackoffPolicy = &rmqpb.RetryPolicy{MaxAttempts: 3, Strategy: &rmqpb.RetryPolicy_ExponentialBackoff{
			ExponentialBackoff: &rmqpb.ExponentialBackoff{Initial: durationpb.New(10 * time.Millisecond), Max: durationpb.New(time.Second), Multiplier: 2}}}
		p.Publishing.MaxBodySize = message.MaxBodySize
		p.Publishing.ValidateMessageType = true
	case *rmqpb.Settings_Subscription:
		gc, found := s.b.rep.Store().SubscriptionGroup(p.Subscription.GetGroup().GetName())
		if !found {
			gc = offsets.NewSubscriptionGroupConfig(p.Subscription.GetGroup().GetName())
		}
		fifo := gc.ConsumeMessageOrderly
		batch := int32(32)
		p.Subscription.Fifo = &fifo
		p.Subscription.ReceiveBatchSize = &batch
		p.Subscription.LongPollingTimeout = durationpb.New(20 * time.Second)
		out.BackoffPolicy = &rmqpb.RetryPolicy{MaxAttempts: max(gc.RetryMaxTimes, 0) + 1, Strategy: &rmqpb.RetryPolicy_ExponentialBackoff{
			ExponentialBackoff: &rmqpb.ExponentialBackoff{Initial: durationpb.New(10 * time.Second), Max: durationpb.New(2 * time.Hour), Multiplier: 2}}}
	}
	out.Metric = &rmqpb.Metric{On: false}
	return out
}

// register puts the session's client into the membership registry, over
// its latest stream: producers under each topic they publish (the
// producer group RocketMQ's proxy uses), consumers under their group.
func (s *grpcService) register(ctx context.Context, sess *grpcSession) {
	s.mu.Lock()
	set, ch := sess.settings, sess.ch
	s.mu.Unlock()
	if set == nil || ch == nil {
		return
	}
	hb := &remoting.HeartbeatData{ClientID: sess.clientID}
	switch p := set.PubSub.(type) {
	case *rmqpb.Settings_Publishing:
		for _, t := range p.Publishing.Topics {
			hb.ProducerDataSet = append(hb.ProducerDataSet, remoting.ProducerData{GroupName: t.GetName()})
		}
	case *rmqpb.Settings_Subscription:
		cd := remoting.ConsumerData{GroupName: p.Subscription.GetGroup().GetName(), ConsumeType: "CONSUME_POP", MessageModel: "CLUSTERING",
			ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET"}
		for _, e := range p.Subscription.Subscriptions {
			sd := remoting.SubscriptionData{Topic: e.GetTopic().GetName(), SubString: e.GetExpression().GetExpression(), ExpressionType: "TAG"}
			if e.GetExpression().GetType() == rmqpb.FilterType_SQL {
				sd.ExpressionType = "SQL92"
			}
			if sd.SubString == "" {
				sd.SubString = "*"
			}
			cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, sd)
		}
		hb.ConsumerDataSet = append(hb.ConsumerDataSet, cd)
	}
	lang := mdValue(ctx, mdLanguage)
	if ua := set.GetUserAgent(); ua != nil && ua.Language != rmqpb.Language_LANGUAGE_UNSPECIFIED {
		lang = ua.Language.String()
	}
	ver, _ := strconv.Atoi(mdValue(ctx, mdVersion))
	s.b.log.Debug("cluster: grpc client registered", "client_id", sess.clientID, "addr", ch.addr, "consumers", len(hb.ConsumerDataSet), "producers", len(hb.ProducerDataSet))
	changed := s.b.members.Heartbeat(membership.Client{Channel: ch, Addr: ch.addr, Language: lang, Version: int32(ver)}, hb, time.Now())
	s.b.notifyChanged(changed) // remoting consumers of the same group rebalance
	if s.b.rep.Node().IsLeader() {
		// As for a remoting consumer's heartbeat: the group's config and
		// retry topic exist once it has a member.
		for _, cd := range hb.ConsumerDataSet {
			if err := s.b.ensureGroup(ctx, cd.GroupName); err != nil {
				s.b.log.Warn("cluster: creating a consumer group's config failed", "group", cd.GroupName, "err", err)
			}
		}
	}
}

// closeChannel forgets a stream that ended.
func (s *grpcService) closeChannel(clientID string, ch *telemetryChannel) {
	s.mu.Lock()
	if sess := s.sessions[clientID]; sess != nil && sess.ch == ch {
		sess.ch = nil
	}
	s.mu.Unlock()
	s.b.members.ChannelClosed(ch)
}

// Heartbeat keeps a client registered. A client that sent no Settings yet
// is UNRECOGNIZED_CLIENT_TYPE, as with RocketMQ's proxy.
func (s *grpcService) Heartbeat(ctx context.Context, req *rmqpb.HeartbeatRequest) (*rmqpb.HeartbeatResponse, error) {
	clientID := mdValue(ctx, mdClientID)
	if clientID == "" {
		return &rmqpb.HeartbeatResponse{Status: st(rmqpb.Code_CLIENT_ID_REQUIRED, "x-mq-client-id metadata is required")}, nil
	}
	if g := req.GetGroup().GetName(); g != "" && req.ClientType != rmqpb.ClientType_PRODUCER {
		if _, denied := s.authorize(ctx, "Heartbeat", []acl.Resource{{Group: true, Name: g, Perm: acl.Sub}}); denied != nil {
			return &rmqpb.HeartbeatResponse{Status: denied}, nil
		}
	}
	s.mu.Lock()
	sess := s.sessions[clientID]
	s.mu.Unlock()
	if sess == nil {
		return &rmqpb.HeartbeatResponse{Status: st(rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE, "no settings from client %s on this node yet (Telemetry first)", clientID)}, nil
	}
	s.register(ctx, sess)
	return &rmqpb.HeartbeatResponse{Status: ok()}, nil
}

// NotifyClientTermination removes a client that shuts down.
func (s *grpcService) NotifyClientTermination(ctx context.Context, req *rmqpb.NotifyClientTerminationRequest) (*rmqpb.NotifyClientTerminationResponse, error) {
	clientID := mdValue(ctx, mdClientID)
	if clientID == "" {
		return &rmqpb.NotifyClientTerminationResponse{Status: st(rmqpb.Code_CLIENT_ID_REQUIRED, "x-mq-client-id metadata is required")}, nil
	}
	if g := req.GetGroup().GetName(); g != "" {
		if _, denied := s.authorize(ctx, "NotifyClientTermination", []acl.Resource{{Group: true, Name: g, Perm: acl.Sub}}); denied != nil {
			return &rmqpb.NotifyClientTerminationResponse{Status: denied}, nil
		}
	}
	s.mu.Lock()
	sess := s.sessions[clientID]
	delete(s.sessions, clientID)
	s.mu.Unlock()
	s.renew.dropClient(clientID)
	if sess != nil && sess.settings != nil {
		switch p := sess.settings.PubSub.(type) {
		case *rmqpb.Settings_Publishing:
			for _, t := range p.Publishing.Topics {
				s.b.members.Unregister(clientID, t.GetName(), "")
			}
		case *rmqpb.Settings_Subscription:
			s.b.members.Unregister(clientID, "", p.Subscription.GetGroup().GetName())
		}
	}
	return &rmqpb.NotifyClientTerminationResponse{Status: ok()}, nil
}

// QueryRoute names the topic's queues, all on the group's one broker name,
// whose endpoint is the leader's gRPC address (this node's while no
// leader is known). Like a remoting route query it needs no credentials.
func (s *grpcService) QueryRoute(ctx context.Context, req *rmqpb.QueryRouteRequest) (*rmqpb.QueryRouteResponse, error) {
	topic := req.GetTopic().GetName()
	tc, code, msg := s.topicForRoute(ctx, topic)
	if code != rmqpb.Code_OK {
		return &rmqpb.QueryRouteResponse{Status: st(code, "%s", msg)}, nil
	}
	broker := s.brokerOf(req.Endpoints)
	n := max(tc.ReadQueueNums, tc.WriteQueueNums)
	resp := &rmqpb.QueryRouteResponse{Status: ok()}
	for q := range n {
		perm := rmqpb.Permission_NONE
		r := q < tc.ReadQueueNums && tc.Perm&remoting.PermRead != 0
		w := q < tc.WriteQueueNums && tc.Perm&remoting.PermWrite != 0
		switch {
		case r && w:
			perm = rmqpb.Permission_READ_WRITE
		case r:
			perm = rmqpb.Permission_READ
		case w:
			perm = rmqpb.Permission_WRITE
		}
		resp.MessageQueues = append(resp.MessageQueues, &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: topic}, Id: q, Permission: perm, Broker: broker,
			AcceptMessageTypes: allMessageTypes})
	}
	if s.b.cfg.FailoverRoutes && tc.Perm&remoting.PermWrite != 0 {
		// As in remoting routes (FailoverBrokerName): each follower is a
		// write-only broker of its own, so that a producer whose send to a
		// dead leader failed retries on a live node, which forwards it.
		// A follower the leader has not heard from lately is left out
		// (and named again once it answers): a client pins a FIFO message
		// group to a broker by hash and would fail its sends there until
		// the node came back. The node picks a group's queue by its hash
		// whichever node forwards it, so each group's order holds.
		active, known := s.activeNodes(ctx)
		for _, id := range s.followers(broker) {
			if known && id != s.b.cfg.ID && !slices.Contains(active, id) {
				continue
			}
			fb := &rmqpb.Broker{Name: FailoverBrokerName(s.b.cfg.BrokerName, id), Id: 0, Endpoints: s.endpoint(id, req.Endpoints)}
			for q := range tc.WriteQueueNums {
				resp.MessageQueues = append(resp.MessageQueues, &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: topic}, Id: q, Permission: rmqpb.Permission_WRITE,
					Broker: fb, AcceptMessageTypes: allMessageTypes})
			}
		}
	}
	return resp, nil
}

// activeTTL is how long a follower reuses the leader's list of the nodes
// it heard from, and activeAsk bounds asking for it.
const (
	activeTTL = time.Second
	activeAsk = 500 * time.Millisecond
)

type activeCache struct {
	mu     sync.Mutex
	at     time.Time
	leader uint64
	ids    []uint64
}

// activeNodes returns the nodes the leader heard from within its last
// election timeout (raft's RecentActive): its own view on the leader; a
// follower asks the leader (CLUSTER_STATUS), at most once per activeTTL.
// known is false when that cannot be learnt: then no node is left out.
func (s *grpcService) activeNodes(ctx context.Context) (ids []uint64, known bool) {
	st := s.b.rep.Node().Status()
	switch {
	case st.Leader == s.b.cfg.ID:
		return st.Active, len(st.Active) > 0
	case st.Leader == 0:
		return nil, false
	}
	c := &s.active
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == st.Leader && time.Since(c.at) < activeTTL {
		return c.ids, len(c.ids) > 0
	}
	actx, cancel := context.WithTimeout(ctx, activeAsk)
	defer cancel()
	resp, _, _ := s.b.forward(actx, s.b.signInternal(remoting.NewRequest(remoting.ClusterStatus, map[string]string{}, nil)))
	var ns struct {
		Raft struct {
			ID     uint64   `json:"id"`
			Active []uint64 `json:"active"`
		} `json:"raft"`
	}
	c.leader, c.at, c.ids = st.Leader, time.Now(), nil
	if resp.Code == remoting.Success && json.Unmarshal(resp.Body, &ns) == nil && ns.Raft.ID == st.Leader {
		c.ids = ns.Raft.Active
	}
	return c.ids, len(c.ids) > 0
}

var allMessageTypes = []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY, rmqpb.MessageType_TRANSACTION}

// followers lists, in id order, the members with a gRPC address other than
// the one the route names as the leader's.
func (s *grpcService) followers(leader *rmqpb.Broker) []uint64 {
	leaderAddr := ""
	if a := leader.GetEndpoints().GetAddresses(); len(a) > 0 {
		leaderAddr = net.JoinHostPort(a[0].Host, strconv.Itoa(int(a[0].Port)))
	}
	leaderID := s.b.rep.Node().Status().Leader
	s.b.mu.Lock()
	var ids []uint64
	for id, p := range s.b.peers {
		if p.GRPC != "" && p.GRPC != leaderAddr && id != leaderID {
			ids = append(ids, id)
		}
	}
	s.b.mu.Unlock()
	slices.Sort(ids)
	return ids
}

func (s *grpcService) brokerOf(access *rmqpb.Endpoints) *rmqpb.Broker {
	leader := s.b.rep.Node().Status().Leader
	return &rmqpb.Broker{Name: s.b.cfg.BrokerName, Id: 0, Endpoints: s.endpoint(leader, access)}
}

// topicForRoute reads a topic's config as a route query does: a follower
// first catches up with the leader's commit index.
func (s *grpcService) topicForRoute(ctx context.Context, topic string) (offsets.TopicConfig, rmqpb.Code, string) {
	if topic == "" {
		return offsets.TopicConfig{}, rmqpb.Code_ILLEGAL_TOPIC, "topic is empty"
	}
	s.b.followerCatchUp(ctx, "route", "topic", topic)
	tc, found := s.b.rep.Store().Topic(topic)
	if !found && s.b.cfg.AutoCreateTopics && message.CheckTopic(topic) == nil {
		// Created by the first send, with the template's queues.
		tc, found = autoCreateTemplate(), true
		tc.TopicName = topic
	}
	if !found {
		return tc, rmqpb.Code_TOPIC_NOT_FOUND, fmt.Sprintf("topic %s does not exist", topic)
	}
	return tc, rmqpb.Code_OK, ""
}

// QueryAssignment tells a push consumer which queues to receive from: as
// RocketMQ's proxy, one assignment per broker (queue -1) for a
// concurrently consumed group, each readable queue for a FIFO group.
func (s *grpcService) QueryAssignment(ctx context.Context, req *rmqpb.QueryAssignmentRequest) (*rmqpb.QueryAssignmentResponse, error) {
	topic, group := req.GetTopic().GetName(), req.GetGroup().GetName()
	if _, denied := s.authorize(ctx, "QueryAssignment", []acl.Resource{{Group: true, Name: group, Perm: acl.Sub}, {Name: topic, Perm: acl.Sub}}); denied != nil {
		return &rmqpb.QueryAssignmentResponse{Status: denied}, nil
	}
	tc, code, msg := s.topicForRoute(ctx, topic)
	if code != rmqpb.Code_OK {
		return &rmqpb.QueryAssignmentResponse{Status: st(code, "%s", msg)}, nil
	}
	if tc.Perm&remoting.PermRead == 0 || tc.ReadQueueNums == 0 {
		return &rmqpb.QueryAssignmentResponse{Status: st(rmqpb.Code_FORBIDDEN, "topic %s has no readable queue", topic)}, nil
	}
	broker := s.brokerOf(req.Endpoints)
	mq := func(id int32) *rmqpb.Assignment {
		return &rmqpb.Assignment{MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: topic}, Id: id, Permission: rmqpb.Permission_READ_WRITE, Broker: broker,
			AcceptMessageTypes: allMessageTypes}}
	}
	resp := &rmqpb.QueryAssignmentResponse{Status: ok()}
	if gc, found := s.b.rep.Store().SubscriptionGroup(group); found && gc.ConsumeMessageOrderly {
		for q := range tc.ReadQueueNums {
			resp.Assignments = append(resp.Assignments, mq(q))
		}
	} else {
		resp.Assignments = append(resp.Assignments, mq(-1))
	}
	return resp, nil
}
