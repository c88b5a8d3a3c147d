package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// Remoting front end of the admin API (cluster/admin.go): RocketMQ's admin
// codes answered in RocketMQ's body shapes, or, when the request carries
// remoting.FieldAdminView=json (raftmq's CLI), the admin struct as JSON.

// handleAdminCode serves the admin codes of cluster/admin.go; ok is false
// for any other code.
func (b *Broker) handleAdminCode(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) (resp *remoting.Command, ok bool) {
	switch req.Code {
	case remoting.GetBrokerClusterInfo:
		if jsonView(req) {
			return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command {
				v, err := b.AdminCluster(ctx)
				return b.adminAnswer(req, v, err)
			}), true
		}
		return b.clusterInfoResponse(req), true
	case remoting.GetTopicStatsInfo:
		return b.handleTopicStats(ctx, conn, req), true
	case remoting.GetConsumeStats:
		return b.handleConsumeStats(ctx, conn, req), true
	case remoting.GetConsumerConnectionList:
		// The leader's registry: every client heartbeats to the leader,
		// while a follower knows only the clients whose routes name it
		// (not a RocketMQ 4.x producer's, nor a RocketMQ 5 client's with
		// failover routes off), and would answer "not online".
		return b.leaderOnly(ctx, req, func(context.Context) *remoting.Command { return b.handleConsumerConnection(conn, req) }), true
	case remoting.GetProducerConnectionList:
		return b.leaderOnly(ctx, req, func(context.Context) *remoting.Command { return b.handleProducerConnection(conn, req) }), true
	case remoting.InvokeBrokerToResetOffset:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleResetOffset(ctx, conn, req) }), true
	case remoting.ImportConfig:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleImportConfig(ctx, conn, req) }), true
	case CodeGetAllConsumerOffset:
		return b.handleAllConsumerOffsets(ctx, req), true
	case CodeGetBrokerConfig:
		return b.handleGetBrokerConfig(req), true
	case CodeUpdateBrokerConfig:
		return b.handleUpdateBrokerConfig(ctx, conn, req), true
	case CodeWipeWritePermOfBroker, CodeAddWritePermOfBroker:
		return b.handleWritePerm(ctx, conn, req), true
	case CodeCleanExpiredConsumeQueue, CodeDeleteExpiredCommitLog:
		return b.handleMaintenance(conn, req), true
	case remoting.GetBrokerRuntimeInfo:
		body, _ := json.Marshal(remoting.KVTable{Table: b.AdminRuntime()})
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = body
		return resp, true
	}
	return nil, false
}

func jsonView(req *remoting.Command) bool {
	return req.ExtFields[remoting.FieldAdminView] == remoting.AdminViewJSON
}

// adminAnswer answers with v as JSON, or with err's code.
func (b *Broker) adminAnswer(req *remoting.Command, v any, err error) *remoting.Command {
	if err != nil {
		return b.adminError(req, err)
	}
	body, err := json.Marshal(v)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// adminError maps an admin API error to RocketMQ's code and a remark
// naming what was not found.
func (b *Broker) adminError(req *remoting.Command, err error) *remoting.Command {
	switch {
	case errors.Is(err, store.ErrUnknownTopic):
		return remoting.NewResponse(req, remoting.TopicNotExist, err.Error())
	case errors.Is(err, ErrUnknownGroup):
		return remoting.NewResponse(req, remoting.SubscriptionGroupNotExist, err.Error())
	case errors.Is(err, ErrConsumerNotOnline):
		return remoting.NewResponse(req, remoting.ConsumerNotOnline, err.Error())
	case errors.Is(err, ErrProducerNotOnline):
		// RocketMQ's answer, word for word.
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("the producer group[%s] not exist", strings.TrimPrefix(err.Error(), ErrProducerNotOnline.Error()+": ")))
	case errors.Is(err, ErrNoQuorum):
		return remoting.NewResponse(req, remoting.ServiceNotAvailable, err.Error()+"; retry")
	}
	return b.errorResponse(req, err)
}

// clusterInfoResponse answers GET_BROKER_CLUSTER_INFO as a name server
// would for this group alone: its broker name with the ready leader as
// broker id 0 and the other nodes under their ids.
func (b *Broker) clusterInfoResponse(req *remoting.Command) *remoting.Command {
	leader := b.rep.Node().Status().Leader
	if leader == b.cfg.ID && !b.rep.Node().LeaderReady() {
		leader = 0
	}
	addrs := map[int64]string{}
	b.mu.Lock()
	for id, p := range b.peers {
		if id == leader {
			addrs[remoting.MasterID] = p.Client
		} else {
			addrs[int64(id)] = p.Client
		}
	}
	b.mu.Unlock()
	ci := remoting.ClusterInfo{
		BrokerAddrTable:  map[string]remoting.BrokerData{b.cfg.BrokerName: {Cluster: b.cfg.ClusterName, BrokerName: b.cfg.BrokerName, BrokerAddrs: addrs}},
		ClusterAddrTable: map[string][]string{b.cfg.ClusterName: {b.cfg.BrokerName}},
	}
	body, err := json.Marshal(ci)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

func (b *Broker) handleTopicStats(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeTopicStatsRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	v, err := b.AdminTopicStatus(ctx, h.Topic)
	if err != nil || jsonView(req) {
		return b.adminAnswer(req, v, err)
	}
	t := make(map[remoting.MessageQueue]remoting.TopicOffset, len(v.Queues))
	for _, q := range v.Queues {
		t[remoting.MessageQueue{Topic: v.Topic, BrokerName: b.cfg.BrokerName, QueueID: q.QueueID}] =
			remoting.TopicOffset{MinOffset: q.MinOffset, MaxOffset: q.MaxOffset, LastUpdateTimestamp: q.LastUpdate}
	}
	return b.bodyAnswer(req, func() ([]byte, error) { return remoting.EncodeTopicStatsTable(t) })
}

func (b *Broker) bodyAnswer(req *remoting.Command, enc func() ([]byte, error)) *remoting.Command {
	body, err := enc()
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

func (b *Broker) handleConsumeStats(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeConsumeStatsRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	v, err := b.AdminConsumerProgress(ctx, h.ConsumerGroup, h.Topic)
	if err != nil || jsonView(req) {
		return b.adminAnswer(req, v, err)
	}
	t := make(map[remoting.MessageQueue]remoting.OffsetWrapper, len(v.Queues))
	for _, q := range v.Queues {
		t[remoting.MessageQueue{Topic: q.Topic, BrokerName: b.cfg.BrokerName, QueueID: q.QueueID}] = remoting.OffsetWrapper{
			BrokerOffset: q.BrokerOffset, ConsumerOffset: q.ConsumerOffset, PullOffset: q.ConsumerOffset, LastTimestamp: q.LastConsume}
	}
	return b.bodyAnswer(req, func() ([]byte, error) { return remoting.EncodeConsumeStats(t, 0) })
}

func (b *Broker) handleConsumerConnection(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeConsumerConnectionRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	v, err := b.AdminConsumerConnection(h.ConsumerGroup)
	if err != nil || jsonView(req) {
		return b.adminAnswer(req, v, err)
	}
	cc := remoting.ConsumerConnection{SubscriptionTable: map[string]remoting.SubscriptionData{},
		ConsumeType: v.ConsumeType, MessageModel: v.MessageModel, ConsumeFromWhere: v.ConsumeFromWhere}
	for _, c := range v.Clients {
		cc.ConnectionSet = append(cc.ConnectionSet, remoting.ConnectionInfo{ClientID: c.ClientID, ClientAddr: c.Addr, Language: c.Language, Version: c.Version})
	}
	for _, s := range v.Subscriptions {
		if sd, ok := b.members.Subscription(h.ConsumerGroup, s.Topic); ok {
			cc.SubscriptionTable[s.Topic] = sd
		}
	}
	return b.bodyAnswer(req, func() ([]byte, error) { return json.Marshal(cc) })
}

func (b *Broker) handleProducerConnection(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeProducerConnectionRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	v, err := b.AdminProducerConnection(h.ProducerGroup)
	if err != nil || jsonView(req) {
		return b.adminAnswer(req, v, err)
	}
	pc := remoting.ProducerConnection{}
	for _, c := range v.Clients {
		pc.ConnectionSet = append(pc.ConnectionSet, remoting.ConnectionInfo{ClientID: c.ClientID, ClientAddr: c.Addr, Language: c.Language, Version: c.Version})
	}
	return b.bodyAnswer(req, func() ([]byte, error) { return json.Marshal(pc) })
}

func (b *Broker) handleResetOffset(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeResetOffsetRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	v, err := b.AdminResetOffsetByTime(ctx, h.Group, h.Topic, h.Timestamp, h.IsForce)
	if err == nil {
		b.audit(conn, req, "consumer offsets reset by time", "group", h.Group, "topic", h.Topic, "timestamp", h.Timestamp, "queues", len(v.Queues))
	}
	if err != nil || jsonView(req) {
		return b.adminAnswer(req, v, err)
	}
	return b.bodyAnswer(req, func() ([]byte, error) { return remoting.EncodeResetOffsetBody(b.resetTable(v.Topic, v.Queues)) })
}

func (b *Broker) resetTable(topic string, qs []AdminResetQueue) map[remoting.MessageQueue]int64 {
	t := make(map[remoting.MessageQueue]int64, len(qs))
	for _, q := range qs {
		t[remoting.MessageQueue{Topic: topic, BrokerName: b.cfg.BrokerName, QueueID: q.QueueID}] = q.New
	}
	return t
}

// notifyReset sends RESET_CONSUMER_CLIENT_OFFSET (one-way) to every
// online consumer of group, as RocketMQ's broker does, and returns how
// many it was sent to.
func (b *Broker) notifyReset(group, topic string, ts int64, qs []AdminResetQueue) int {
	chans := b.members.ConsumerChannels(group)
	if len(chans) == 0 {
		return 0
	}
	body, err := remoting.EncodeResetOffsetBody(b.resetTable(topic, qs))
	if err != nil {
		b.log.Warn("cluster: reset notice not sent", "group", group, "err", err)
		return 0
	}
	h := remoting.ResetOffsetRequestHeader{Topic: topic, Group: group, Timestamp: ts, IsForce: true}
	n := 0
	for _, ch := range chans {
		if err := ch.Oneway(remoting.NewRequest(remoting.ResetConsumerClientOffset, h.Encode(), body)); err != nil {
			b.log.Debug("cluster: reset notice", "group", group, "err", err)
			continue
		}
		n++
	}
	return n
}

func (b *Broker) handleImportConfig(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	var body remoting.ImportConfigBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("import config: %v", err))
	}
	var cs offsets.ConfigSet
	for i, raw := range body.Topics {
		var tc offsets.TopicConfig
		if err := json.Unmarshal(raw, &tc); err != nil {
			return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("import config: topic %d: %v", i, err))
		}
		if err := tc.Validate(); err != nil {
			return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("import config: topic %q: %v", tc.TopicName, err))
		}
		cs.Topics = append(cs.Topics, tc)
	}
	for i, raw := range body.Groups {
		var gc offsets.SubscriptionGroupConfig
		if err := json.Unmarshal(raw, &gc); err != nil {
			return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("import config: group %d: %v", i, err))
		}
		if err := gc.Validate(); err != nil {
			return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("import config: group %q: %v", gc.GroupName, err))
		}
		cs.Groups = append(cs.Groups, gc)
	}
	for _, o := range body.Offsets {
		cs.Offsets = append(cs.Offsets, offsets.ConsumerOffset{Group: o.Group, Topic: o.Topic, QueueID: o.QueueID, Offset: o.Offset})
	}
	v, err := b.AdminImportConfig(ctx, cs)
	b.audit(conn, req, "import config requested", "topics", len(cs.Topics), "groups", len(cs.Groups), "offsets", len(cs.Offsets), "err", err)
	return b.adminAnswer(req, v, err)
}

// statusRequest is a CLUSTER_STATUS request.
func statusRequest() *remoting.Command {
	return remoting.NewRequest(remoting.ClusterStatus, nil, nil)
}

// CodeGetAllConsumerOffset is RocketMQ's GET_ALL_CONSUMER_OFFSET.
const CodeGetAllConsumerOffset int32 = 43

// handleAllConsumerOffsets answers GET_ALL_CONSUMER_OFFSET with every
// committed offset, as RocketMQ's consumerOffset.json
// ({"offsetTable":{"topic@group":{"queueId":offset}}}), after a read
// barrier: the groups that have offsets, with or without a subscription
// group config.
func (b *Broker) handleAllConsumerOffsets(ctx context.Context, req *remoting.Command) *remoting.Command {
	if resp := b.barrierOrRefuse(ctx, req, "consumer offsets"); resp != nil {
		return resp
	}
	st := b.rep.Store()
	table := map[string]map[int32]int64{}
	for _, gl := range st.ConsumerLags() {
		table[gl.Topic+"@"+gl.Group] = st.ConsumerOffsets(gl.Group, gl.Topic)
	}
	return b.adminAnswer(req, map[string]any{"offsetTable": table}, nil)
}
