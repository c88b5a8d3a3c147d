package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/cluster/membership"
	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// Consumer groups: heartbeats fill the node's membership registry
// (package membership), which answers GET_CONSUMER_LIST_BY_GROUP; changes
// are pushed to the group's clients as NOTIFY_CONSUMER_IDS_CHANGED. The
// group's replicated parts (its subscription-group config and its
// %RETRY% topic) are created through raft by the leader on the first
// heartbeat that names the group.

// RetryGroupTopic returns a consumer group's retry topic, %RETRY%group.
func RetryGroupTopic(group string) string { return "%RETRY%" + group }

func (b *Broker) handleHeartbeat(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	hb, err := remoting.DecodeHeartbeatData(req.Body)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("heartbeat: %v", err))
	}
	if hb.ClientID == "" {
		return b.refuse(conn, req, remoting.InvalidParameter, "heartbeat: clientID is empty")
	}
	// A heartbeat a follower forwarded (missingGroup below) only asks the
	// leader to create its groups: the client is registered where it
	// sent it, and registering the follower's forwarding connection here
	// would send the client's notifications (offset resets, consumer
	// list changes) to the follower instead.
	if req.ExtFields[extForwarded] == "" {
		b.watchConn(conn)
		if failpoint.On(b.fp, failpoint.ForgetMembers) {
			b.forgetMembers()
		}
		changed := b.members.Heartbeat(membership.Client{Channel: conn, Addr: remoteAddr(conn), Language: req.Language, Version: req.Version}, &hb, time.Now())
		b.notifyChanged(changed)
	}
	if b.rep.Node().IsLeader() {
		for _, cd := range hb.ConsumerDataSet {
			if cd.GroupName == "" {
				continue
			}
			if err := b.ensureGroup(ctx, cd.GroupName); err != nil {
				// Not fatal for the heartbeat: the next one tries again.
				b.log.Warn("cluster: creating a consumer group's config failed", "group", cd.GroupName, "err", err)
			}
		}
	} else if b.missingGroup(&hb) {
		// Only the leader creates a group: a client that knows only this
		// follower would otherwise pop (forwarded) a group that never
		// exists. The leader creates the group and does not register the
		// client (it is registered here, on its own connection).
		resp, _, drop := b.forward(ctx, req)
		b.forwardDone(req, resp, drop)
		if resp.Code != remoting.Success {
			b.log.Warn("cluster: a heartbeat naming a new consumer group was not forwarded to the leader", "code", resp.Code, "remark", resp.Remark)
		}
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// missingGroup reports whether hb names a consumer group this node's
// store has no config of.
func (b *Broker) missingGroup(hb *remoting.HeartbeatData) bool {
	st := b.rep.Store()
	for _, cd := range hb.ConsumerDataSet {
		if _, ok := st.SubscriptionGroup(cd.GroupName); cd.GroupName != "" && !ok {
			return true
		}
	}
	return false
}

// ensureGroup creates, through raft, a consumer group's subscription-group
// config and its retry topic where they are missing. Leader only.
func (b *Broker) ensureGroup(ctx context.Context, group string) error {
	st := b.rep.Store()
	gc, ok := st.SubscriptionGroup(group)
	if !ok {
		gc = offsets.NewSubscriptionGroupConfig(group)
		if err := gc.Validate(); err != nil {
			return err
		}
		if err := b.exec(ctx, &store.Command{Op: store.OpUpdateGroup, Group: &gc}); err != nil {
			return fmt.Errorf("create subscription group %q: %w", group, err)
		}
	}
	retry := RetryGroupTopic(group)
	if _, ok := st.Topic(retry); ok {
		return nil
	}
	tc := offsets.NewTopicConfig(retry, max(gc.RetryQueueNums, 1))
	if err := tc.Validate(); err != nil {
		return err
	}
	if err := b.exec(ctx, &store.Command{Op: store.OpCreateTopic, Topic: &tc}); err != nil {
		return fmt.Errorf("create retry topic %q: %w", retry, err)
	}
	return nil
}

// exec replicates a command with the send timeout. It is not cancelled
// when the client's connection closes: a request received is carried out.
func (b *Broker) exec(ctx context.Context, c *store.Command) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.SendTimeout)
	defer cancel()
	return b.rep.Exec(cctx, c)
}

func (b *Broker) handleUnregisterClient(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeUnregisterClientRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	b.notifyChanged(b.members.Unregister(h.ClientID, h.ProducerGroup, h.ConsumerGroup))
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleConsumerList(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	if failpoint.On(b.fp, failpoint.ForgetMembers) {
		b.forgetMembers()
	}
	h, err := remoting.DecodeGetConsumerListByGroupRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	ids := b.members.ConsumerIDs(h.ConsumerGroup)
	if len(ids) == 0 {
		// As RocketMQ's broker. The Go client reads the (empty) body anyway.
		resp := remoting.NewResponse(req, remoting.SystemError, "no consumer for this group, "+h.ConsumerGroup)
		resp.Body, _ = json.Marshal(remoting.ConsumerListBody{})
		return resp
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(remoting.ConsumerListBody{ConsumerIDList: ids})
	return resp
}

// notifyChanged tells every client of each group that the group's members
// changed, so they rebalance now rather than at their next 20 s round. The
// sends are one-way and run on a goroutine of their own: a slow client
// must not hold up the heartbeat that caused them.
func (b *Broker) notifyChanged(groups []string) {
	for _, g := range groups {
		if gc, ok := b.rep.Store().SubscriptionGroup(g); ok && !gc.NotifyConsumerIdsChangedEnable {
			continue
		}
		chans := b.members.ConsumerChannels(g)
		if len(chans) == 0 {
			continue
		}
		b.log.Info("cluster: consumer group changed", "group", g, "clients", b.members.ConsumerIDs(g))
		h := remoting.NotifyConsumerIDsChangedRequestHeader{ConsumerGroup: g}
		go func() {
			for _, ch := range chans {
				if err := ch.Oneway(remoting.NewRequest(remoting.NotifyConsumerIDsChanged, h.Encode(), nil)); err != nil {
					b.log.Debug("cluster: notify consumer ids changed", "group", g, "err", err)
				}
			}
		}()
	}
}

// watchConn removes a connection's clients from the registry when it
// closes. One watcher per connection.
func (b *Broker) watchConn(conn *remoting.ServerConn) {
	b.mu.Lock()
	_, seen := b.watched[conn]
	if !seen {
		b.watched[conn] = struct{}{}
	}
	b.mu.Unlock()
	if seen {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		select {
		case <-conn.Done():
		case <-b.stopc:
			return
		}
		b.mu.Lock()
		delete(b.watched, conn)
		b.mu.Unlock()
		b.notifyChanged(b.members.ChannelClosed(conn))
	}()
}

// expireClients drops clients silent for the registry's expiry and old
// queue locks, every 10 s.
func (b *Broker) expireClients() {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.stopc:
			return
		}
		now := time.Now()
		b.notifyChanged(b.members.Expire(now))
		b.locks.Expire(now)
	}
}

func (b *Broker) handleLockBatch(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	body, err := remoting.DecodeLockBatchRequestBody(req.Body)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("lock batch: %v", err))
	}
	if body.ConsumerGroup == "" || body.ClientID == "" {
		return b.refuse(conn, req, remoting.InvalidParameter, "lock batch: consumerGroup and clientId are required")
	}
	// A table from an earlier term of this node's leadership no longer
	// says who holds what.
	if term := b.rep.Node().Status().Term; b.lockTerm.Swap(term) != term {
		b.locks.Reset()
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	if req.Code == remoting.UnlockBatchMQ {
		b.locks.Unlock(body.ConsumerGroup, body.ClientID, body.MQSet)
		return resp
	}
	ok := b.locks.TryLock(body.ConsumerGroup, body.ClientID, body.MQSet, time.Now())
	if failpoint.On(b.fp, failpoint.LockTwoOwners) {
		ok = lockTwoOwners(ok, body.MQSet)
	}
	if len(ok) < len(body.MQSet) {
		b.log.Debug("cluster: queue locks refused", "group", body.ConsumerGroup, "client", body.ClientID, "asked", len(body.MQSet), "granted", len(ok))
	}
	resp.Body, _ = json.Marshal(remoting.LockBatchResponseBody{LockOKMQSet: ok})
	return resp
}

// Subscription-group admin (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200,
// GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201, DELETE_SUBSCRIPTIONGROUP 207) and
// topic deletion (DELETE_TOPIC_IN_BROKER 215), all through raft.

func (b *Broker) handleUpdateGroup(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	var gc offsets.SubscriptionGroupConfig
	if err := remoting.DecodeJSON(req.Body, &gc); err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("subscription group: %v", err))
	}
	if err := gc.Validate(); err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	if err := b.exec(ctx, &store.Command{Op: store.OpUpdateGroup, Group: &gc}); err != nil {
		return b.errorResponse(req, err)
	}
	b.audit(conn, req, "subscription group created or updated", "group", gc.GroupName)
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleAllGroups(ctx context.Context, req *remoting.Command) *remoting.Command {
	if resp := b.barrierOrRefuse(ctx, req, "subscription groups"); resp != nil {
		return resp
	}
	table := map[string]offsets.SubscriptionGroupConfig{}
	for _, gc := range b.rep.Store().SubscriptionGroups() {
		table[gc.GroupName] = gc
	}
	body, err := json.Marshal(map[string]any{
		"subscriptionGroupTable": table,
		"dataVersion":            b.dataVersion(),
	})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// dataVersion is RocketMQ's DataVersion of the broker's config: the
// applied raft index stands for its counter.
func (b *Broker) dataVersion() map[string]any {
	return map[string]any{"timestamp": time.Now().UnixMilli(), "counter": b.rep.Node().Status().Applied}
}

func (b *Broker) handleDeleteGroup(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	name := req.ExtFields["groupName"]
	if name == "" {
		return b.refuse(conn, req, remoting.InvalidParameter, "delete subscription group: ext field groupName is required")
	}
	if _, ok := b.rep.Store().SubscriptionGroup(name); !ok {
		return remoting.NewResponse(req, remoting.SubscriptionGroupNotExist, fmt.Sprintf("subscription group [%s] does not exist", name))
	}
	if err := b.exec(ctx, &store.Command{Op: store.OpDeleteGroup, Name: name}); err != nil {
		return b.errorResponse(req, err)
	}
	b.audit(conn, req, "subscription group deleted", "group", name)
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleDeleteTopic(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	topic := req.ExtFields["topic"]
	if topic == "" {
		return b.refuse(conn, req, remoting.InvalidParameter, "delete topic: ext field topic is required")
	}
	if _, ok := b.rep.Store().Topic(topic); !ok {
		// Deleting a missing topic is done already: mqadmin deletes from
		// every broker of a cluster, some of which may not have it.
		return remoting.NewResponse(req, remoting.Success, "")
	}
	if err := b.exec(ctx, &store.Command{Op: store.OpDeleteTopic, Name: topic}); err != nil {
		return b.errorResponse(req, err)
	}
	b.audit(conn, req, "topic deleted", "topic", topic)
	return remoting.NewResponse(req, remoting.Success, "")
}

// handleTopicList answers GET_ALL_TOPIC_LIST_FROM_NAMESERVER for a client
// that uses the group's nodes as its name server. Like the subscription
// group list it is a linearizable read (a raft ReadIndex round first): a
// topic created through the leader is listed by a follower asked next.
func (b *Broker) handleTopicList(ctx context.Context, req *remoting.Command) *remoting.Command {
	if resp := b.barrierOrRefuse(ctx, req, "topic list"); resp != nil {
		return resp
	}
	var names []string
	for _, tc := range b.rep.Store().Topics() {
		names = append(names, tc.TopicName)
	}
	if names == nil {
		names = []string{}
	}
	body, _ := json.Marshal(map[string]any{"topicList": names})
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

func remoteAddr(conn *remoting.ServerConn) string {
	if conn == nil {
		return ""
	}
	return conn.RemoteAddr().String()
}

// refuse answers a request with an error and logs it once per client
// host, request code and answer, so an operator sees why a client fails
// without a log line per retry.
func (b *Broker) refuse(conn *remoting.ServerConn, req *remoting.Command, code int32, remark string) *remoting.Command {
	b.met.Refused.WithLabelValues(strconv.Itoa(int(code))).Inc()
	if addr, first := b.refused.First(conn, req, code); first {
		b.log.Warn("cluster: request refused (logged once per client host and code)", "client", addr,
			"code", req.Code, "language", req.Language, "version", req.Version, "answer", code, "remark", remark)
	}
	return remoting.NewResponse(req, code, remark)
}
