package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/pop"
)

// The broker's admin API: plain functions returning plain structs, which
// the remoting handlers (cluster/admin_handlers.go: RocketMQ's admin codes,
// in RocketMQ's body shapes or, asked with remoting.FieldAdminView, as
// these structs in JSON) and any other front end (an HTTP console) call.
// Reads are answered from replicated state after a read barrier, so a
// follower answers what the leader would; changes go through raft on the
// leader and return ErrNotLeader elsewhere (the handlers forward).

// Admin errors a caller can tell apart.
var (
	// ErrUnknownGroup: no subscription-group config, no committed offset
	// and no online consumer names the group.
	ErrUnknownGroup = errors.New("cluster: unknown consumer group")
	// ErrConsumerNotOnline: the group exists but no consumer of it is
	// connected to this node.
	ErrConsumerNotOnline = errors.New("cluster: no consumer of the group is online")
	// ErrProducerNotOnline: no producer of the group is connected to
	// this node.
	ErrProducerNotOnline = errors.New("cluster: no producer of the group is online")
	// ErrNoQuorum: the read barrier failed, so this node cannot tell
	// whether its state is current.
	ErrNoQuorum = errors.New("cluster: no quorum confirmed this node's state")
)

// AdminCluster is the group as its leader sees it.
type AdminCluster struct {
	Cluster   string        `json:"cluster"`
	Broker    string        `json:"broker"`
	Leader    uint64        `json:"leader"`
	Term      uint64        `json:"term"`
	Commit    uint64        `json:"commit"`
	LastIndex uint64        `json:"lastIndex"`
	Members   []AdminMember `json:"members"`
}

// AdminMember is one member of the group. Match, LagEntries and LagBytes
// come from the leader's replication progress: how far the member's log
// is known to match the leader's, and how much of the leader's log it
// still lacks (entries and commit-log bytes). Role, Term, Commit and
// Applied are the member's own answer, when it gave one (Reachable).
type AdminMember struct {
	ID         uint64 `json:"id"`
	Client     string `json:"client"`
	Raft       string `json:"raft"`
	Role       string `json:"role"`
	Reachable  bool   `json:"reachable"`
	Error      string `json:"error,omitempty"`
	Term       uint64 `json:"term"`
	Commit     uint64 `json:"commit"`
	Applied    uint64 `json:"applied"`
	Match      uint64 `json:"match"`
	LagEntries uint64 `json:"lagEntries"`
	LagBytes   int64  `json:"lagBytes"`
	// Active: the leader heard from it within the last election timeout.
	Active bool `json:"active"`
}

// memberAskTimeout bounds the status question to each member.
const memberAskTimeout = time.Second

// AdminCluster returns the group's members with their roles, terms and
// replication lag. Leader only (ErrNotLeader elsewhere): only the leader
// knows how far each follower got.
func (b *Broker) AdminCluster(ctx context.Context) (AdminCluster, error) {
	node := b.rep.Node()
	st := node.Status()
	if !node.IsLeader() || st.Leader != b.cfg.ID {
		return AdminCluster{}, ErrNotLeader
	}
	l := b.rep.Store().Log()
	end := l.EndPosition()
	out := AdminCluster{Cluster: b.cfg.ClusterName, Broker: b.cfg.BrokerName, Leader: st.Leader, Term: st.Term,
		Commit: st.Commit, LastIndex: st.LastIndex}
	b.mu.Lock()
	peers := make(map[uint64]Peer, len(b.peers))
	for id, p := range b.peers {
		peers[id] = p
	}
	b.mu.Unlock()
	ids := slices.Clone(st.Voters)
	for id := range peers {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out.Members = make([]AdminMember, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		p := peers[id]
		m := AdminMember{ID: id, Client: p.Client, Raft: p.Raft, Active: id == b.cfg.ID || slices.Contains(st.Active, id)}
		if match, ok := st.Progress[id]; ok {
			m.Match = match
			if st.LastIndex > match {
				m.LagEntries = st.LastIndex - match
				if pos, err := l.Position(match + 1); err == nil {
					m.LagBytes = end - pos
				} else {
					// The entries it lacks are gone from the leader's log
					// (it needs a snapshot): all of the log is behind it.
					m.LagBytes = end - l.MinPosition()
				}
			}
		}
		switch {
		case slices.Contains(st.Learners, id):
			m.Role = raftlog.RoleLearner // until it has caught up
		case !slices.Contains(st.Voters, id):
			m.Role = "removed"
		}
		out.Members[i] = m
		if id == b.cfg.ID {
			out.Members[i].Role, out.Members[i].Reachable = st.Role, true
			out.Members[i].Term, out.Members[i].Commit, out.Members[i].Applied = st.Term, st.Commit, st.Applied
			continue
		}
		wg.Add(1)
		go func(m *AdminMember) {
			defer wg.Done()
			ns, err := b.askStatus(ctx, m.Client)
			if err != nil {
				m.Error = err.Error()
				return
			}
			m.Reachable = true
			if m.Role == "" {
				m.Role = ns.Status.Role
			}
			m.Term, m.Commit, m.Applied = ns.Status.Term, ns.Status.Commit, ns.Status.Applied
		}(&out.Members[i])
	}
	wg.Wait()
	return out, nil
}

// askStatus asks the node at addr for its NodeStatus.
func (b *Broker) askStatus(ctx context.Context, addr string) (NodeStatus, error) {
	var ns NodeStatus
	if addr == "" {
		return ns, errors.New("no client address known")
	}
	actx, cancel := context.WithTimeout(ctx, memberAskTimeout)
	defer cancel()
	conn, err := b.forwardConn(actx, addr)
	if err != nil {
		return ns, err
	}
	resp, err := conn.Invoke(actx, b.signInternal(statusRequest()))
	if err != nil {
		return ns, err
	}
	if resp.Code != 0 {
		return ns, fmt.Errorf("status of %s: code %d: %s", addr, resp.Code, resp.Remark)
	}
	if err := json.Unmarshal(resp.Body, &ns); err != nil {
		return ns, fmt.Errorf("status of %s: %w", addr, err)
	}
	return ns, nil
}

// AdminQueue is one queue of a topic: its first and next offsets and the
// store time of its newest message (Unix ms; 0 when empty).
type AdminQueue struct {
	QueueID    int32 `json:"queueId"`
	MinOffset  int64 `json:"minOffset"`
	MaxOffset  int64 `json:"maxOffset"`
	LastUpdate int64 `json:"lastUpdateTimestamp"`
}

// AdminTopicStatus is a topic's config and its queues.
type AdminTopicStatus struct {
	Topic       string       `json:"topic"`
	ReadQueues  int32        `json:"readQueueNums"`
	WriteQueues int32        `json:"writeQueueNums"`
	Perm        int32        `json:"perm"`
	Order       bool         `json:"order"`
	Queues      []AdminQueue `json:"queues"`
}

// barrier is readBarrier with ErrNoQuorum.
func (b *Broker) barrier(ctx context.Context) error {
	if err := b.readBarrier(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrNoQuorum, err)
	}
	return nil
}

// AdminTopicStatus returns a topic's queues (after a read barrier), or an
// error wrapping store.ErrUnknownTopic.
func (b *Broker) AdminTopicStatus(ctx context.Context, topic string) (AdminTopicStatus, error) {
	if err := b.barrier(ctx); err != nil {
		return AdminTopicStatus{}, err
	}
	st := b.rep.Store()
	tc, ok := st.Topic(topic)
	if !ok {
		return AdminTopicStatus{}, fmt.Errorf("%w: %s", store.ErrUnknownTopic, topic)
	}
	out := AdminTopicStatus{Topic: topic, ReadQueues: tc.ReadQueueNums, WriteQueues: tc.WriteQueueNums, Perm: tc.Perm, Order: tc.Order}
	for q := range max(tc.ReadQueueNums, tc.WriteQueueNums) {
		aq := AdminQueue{QueueID: q, MinOffset: st.MinOffset(topic, q), MaxOffset: st.MaxOffset(topic, q)}
		if aq.MaxOffset > 0 {
			aq.LastUpdate, _ = st.StoreTimeAt(topic, q, aq.MaxOffset-1)
		}
		out.Queues = append(out.Queues, aq)
	}
	return out, nil
}

// AdminConsumeQueue is a consumer group's progress in one queue. Lag is
// BrokerOffset - ConsumerOffset; LastConsume is the store time (Unix ms)
// of the last message the group consumed there (0: none).
type AdminConsumeQueue struct {
	Topic          string `json:"topic"`
	QueueID        int32  `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`
	ConsumerOffset int64  `json:"consumerOffset"`
	Committed      bool   `json:"committed"`
	Lag            int64  `json:"lag"`
	LastConsume    int64  `json:"lastConsumeTimestamp"`
	// InFlight counts the group's popped messages of the queue neither
	// acked nor dead-lettered (pop consumption).
	InFlight int64 `json:"inFlight,omitempty"`
}

// AdminConsumerProgress is a consumer group's progress in every queue of
// its topics, and its total lag.
type AdminConsumerProgress struct {
	Group    string              `json:"group"`
	Topics   []string            `json:"topics"`
	Queues   []AdminConsumeQueue `json:"queues"`
	TotalLag int64               `json:"totalLag"`
	// TotalInFlight sums the queues' InFlight.
	TotalInFlight int64 `json:"totalInFlight,omitempty"`
}

// groupKnown reports whether anything names group: a subscription-group
// config, a committed offset, or an online consumer.
func (b *Broker) groupKnown(group string) bool {
	st := b.rep.Store()
	if _, ok := st.SubscriptionGroup(group); ok {
		return true
	}
	return len(st.GroupTopics(group)) > 0 || len(b.members.ConsumerIDs(group)) > 0
}

// AdminConsumerProgress returns group's progress (after a read barrier)
// in topic, or, with topic "", in every topic it has committed offsets in
// or its online consumers subscribe to. Errors wrap ErrUnknownGroup or
// store.ErrUnknownTopic.
func (b *Broker) AdminConsumerProgress(ctx context.Context, group, topic string) (AdminConsumerProgress, error) {
	if err := b.barrier(ctx); err != nil {
		return AdminConsumerProgress{}, err
	}
	st := b.rep.Store()
	if !b.groupKnown(group) {
		return AdminConsumerProgress{}, fmt.Errorf("%w: %s", ErrUnknownGroup, group)
	}
	var topics []string
	if topic != "" {
		if _, ok := st.Topic(topic); !ok {
			return AdminConsumerProgress{}, fmt.Errorf("%w: %s", store.ErrUnknownTopic, topic)
		}
		topics = []string{topic}
	} else {
		topics = st.GroupTopics(group)
		for _, c := range b.members.Consumers(group) {
			for _, s := range c.Subscriptions {
				if _, ok := st.Topic(s.Topic); ok && !slices.Contains(topics, s.Topic) {
					topics = append(topics, s.Topic)
				}
			}
		}
		sort.Strings(topics)
	}
	out := AdminConsumerProgress{Group: group, Topics: topics, Queues: []AdminConsumeQueue{}}
	inFlight := st.PopInFlight(group)
	for _, t := range topics {
		tc, ok := st.Topic(t)
		if !ok {
			continue
		}
		offs := st.ConsumerOffsets(group, t)
		for q := range max(tc.ReadQueueNums, tc.WriteQueueNums) {
			cq := AdminConsumeQueue{Topic: t, QueueID: q, BrokerOffset: st.MaxOffset(t, q)}
			cq.ConsumerOffset, cq.Committed = offs[q]
			cq.Lag = max(cq.BrokerOffset-cq.ConsumerOffset, 0)
			if cq.ConsumerOffset > 0 {
				cq.LastConsume, _ = st.StoreTimeAt(t, q, cq.ConsumerOffset-1)
			}
			cq.InFlight = int64(inFlight[pop.Key{Group: group, Topic: t, Queue: q}])
			out.TotalLag += cq.Lag
			out.TotalInFlight += cq.InFlight
			out.Queues = append(out.Queues, cq)
		}
	}
	return out, nil
}

// AdminConnection is one client connected to this node.
type AdminConnection struct {
	ClientID string    `json:"clientId"`
	Addr     string    `json:"clientAddr"`
	Language string    `json:"language"`
	Version  int32     `json:"version"`
	LastSeen time.Time `json:"lastHeartbeat"`
}

// AdminSubscription is one topic a group's consumers subscribe to.
type AdminSubscription struct {
	Topic          string `json:"topic"`
	Expression     string `json:"subString"`
	ExpressionType string `json:"expressionType"`
}

// AdminConsumerConnection is a consumer group's clients as this node
// knows them from their heartbeats. Every client heartbeats to the leader
// and to the other nodes its routes name, so the remoting view asks the
// leader (cluster/admin_handlers.go).
type AdminConsumerConnection struct {
	Group            string              `json:"group"`
	Clients          []AdminConnection   `json:"clients"`
	Subscriptions    []AdminSubscription `json:"subscriptions"`
	ConsumeType      string              `json:"consumeType"`
	MessageModel     string              `json:"messageModel"`
	ConsumeFromWhere string              `json:"consumeFromWhere"`
}

// AdminConsumerConnection returns group's online clients and their
// subscriptions. Errors wrap ErrUnknownGroup or ErrConsumerNotOnline.
func (b *Broker) AdminConsumerConnection(group string) (AdminConsumerConnection, error) {
	if failpoint.On(b.fp, failpoint.ForgetMembers) {
		b.forgetMembers()
	}
	cs := b.members.Consumers(group)
	if len(cs) == 0 {
		if !b.groupKnown(group) {
			return AdminConsumerConnection{}, fmt.Errorf("%w: %s", ErrUnknownGroup, group)
		}
		return AdminConsumerConnection{}, fmt.Errorf("%w: %s", ErrConsumerNotOnline, group)
	}
	out := AdminConsumerConnection{Group: group}
	subs := map[string]AdminSubscription{}
	for _, c := range cs {
		out.Clients = append(out.Clients, AdminConnection{ClientID: c.ClientID, Addr: c.Addr, Language: c.Language, Version: c.Version, LastSeen: c.LastSeen})
		out.ConsumeType, out.MessageModel, out.ConsumeFromWhere = c.ConsumeType, c.MessageModel, c.ConsumeFromWhere
		for _, s := range c.Subscriptions {
			subs[s.Topic] = AdminSubscription{Topic: s.Topic, Expression: s.SubString, ExpressionType: s.ExpressionType}
		}
	}
	for _, t := range slices.Sorted(maps.Keys(subs)) {
		out.Subscriptions = append(out.Subscriptions, subs[t])
	}
	return out, nil
}

// AdminProducerConnection is a producer group's clients as this node
// knows them from their heartbeats (the remoting view asks the leader).
type AdminProducerConnection struct {
	Group   string            `json:"group"`
	Clients []AdminConnection `json:"clients"`
}

// AdminProducerConnection returns group's online producers, or an error
// wrapping ErrProducerNotOnline.
func (b *Broker) AdminProducerConnection(group string) (AdminProducerConnection, error) {
	ps := b.members.Producers(group)
	if len(ps) == 0 {
		return AdminProducerConnection{}, fmt.Errorf("%w: %s", ErrProducerNotOnline, group)
	}
	out := AdminProducerConnection{Group: group}
	for _, p := range ps {
		out.Clients = append(out.Clients, AdminConnection{ClientID: p.ClientID, Addr: p.Addr, Language: p.Language, Version: p.Version, LastSeen: p.LastSeen})
	}
	return out, nil
}

// AdminResetQueue is one queue of a reset: the group's offset before and
// after (Changed false: left as it was).
type AdminResetQueue struct {
	QueueID int32 `json:"queueId"`
	Old     int64 `json:"oldOffset"`
	New     int64 `json:"newOffset"`
	Changed bool  `json:"changed"`
}

// AdminReset is the outcome of AdminResetOffsetByTime.
type AdminReset struct {
	Group     string            `json:"group"`
	Topic     string            `json:"topic"`
	Timestamp int64             `json:"timestamp"`
	Queues    []AdminResetQueue `json:"queues"`
	// Notified is how many online consumers were sent
	// RESET_CONSUMER_CLIENT_OFFSET.
	Notified int `json:"notified"`
}

// AdminResetOffsetByTime sets group's offset in every queue of topic to
// the first message stored at or after ts (Unix ms; -1: the end of each
// queue), all queues in one raft entry, and then tells the group's online
// consumers (RESET_CONSUMER_CLIENT_OFFSET). Without force an offset only
// moves back. Leader only (ErrNotLeader elsewhere). Errors wrap
// ErrUnknownGroup or store.ErrUnknownTopic.
func (b *Broker) AdminResetOffsetByTime(ctx context.Context, group, topic string, ts int64, force bool) (AdminReset, error) {
	if !b.rep.Node().IsLeader() {
		return AdminReset{}, ErrNotLeader
	}
	if err := b.barrier(ctx); err != nil {
		return AdminReset{}, err
	}
	st := b.rep.Store()
	tc, ok := st.Topic(topic)
	if !ok {
		return AdminReset{}, fmt.Errorf("%w: %s", store.ErrUnknownTopic, topic)
	}
	if !b.groupKnown(group) {
		return AdminReset{}, fmt.Errorf("%w: %s", ErrUnknownGroup, group)
	}
	out := AdminReset{Group: group, Topic: topic, Timestamp: ts}
	var commits []store.OffsetCommit
	offs := st.ConsumerOffsets(group, topic)
	for q := range max(tc.ReadQueueNums, tc.WriteQueueNums) {
		old, had := offs[q]
		next := st.MaxOffset(topic, q)
		if ts != -1 && next > 0 {
			o, err := st.SearchOffset(topic, q, ts)
			if err != nil {
				return AdminReset{}, fmt.Errorf("cluster: reset %s %s/%d: %w", group, topic, q, err)
			}
			next = o
		}
		rq := AdminResetQueue{QueueID: q, Old: old, New: next}
		if !force && had && next >= old {
			rq.New = old // RocketMQ: without force, never forward
		}
		rq.Changed = !had || rq.New != old
		if rq.Changed {
			commits = append(commits, store.OffsetCommit{Group: group, Topic: topic, QueueID: q, Offset: rq.New})
		}
		out.Queues = append(out.Queues, rq)
	}
	if len(commits) > 0 {
		b.offs.drop(commits)
		if err := b.exec(ctx, &store.Command{Op: store.OpCommitOffsets, Offsets: commits}); err != nil {
			return AdminReset{}, fmt.Errorf("cluster: reset %s in %s: %w", group, topic, err)
		}
	}
	b.log.Info("cluster: consumer offsets reset by time", "group", group, "topic", topic, "timestamp", ts, "queues", len(commits))
	out.Notified = b.notifyReset(group, topic, ts, out.Queues)
	if out.Notified > 0 {
		b.offs.fence.set(commits, time.Now().Add(resetFenceTime))
	}
	return out, nil
}

// resetFenceTime bounds how long a reset's fence drops stale commits.
// RocketMQ's clients apply a reset about 10 s after they are told
// (rocketmq-client-go and the Java client pause the queues, wait 10 s,
// then take the new offsets and commit them).
const resetFenceTime = 30 * time.Second

// resetFence protects a reset by time from the group's live consumers.
// Until a consumer applies the reset it still holds its old positions
// and commits them (every 5 s, and with its pulls); consumer commits only
// move offsets forward, so one such commit would undo the reset. So, on
// the leader that made the reset, a consumer commit of a reset queue
// above the reset offset is dropped until a commit at or below it shows
// the client took the new offset, or until resetFenceTime passes. A new
// leader has no fence (its consumers' stale commits may then win: stop
// the consumers first for a reset that must hold).
type resetFence struct {
	mu sync.Mutex
	m  map[offsetKey]fenceEntry
}

type fenceEntry struct {
	offset int64
	until  time.Time
}

func (f *resetFence) set(cs []store.OffsetCommit, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[offsetKey]fenceEntry{}
	}
	for _, c := range cs {
		f.m[offsetKey{c.Group, c.Topic, c.QueueID}] = fenceEntry{offset: c.Offset, until: until}
	}
}

// pass reports whether a consumer commit may be replicated.
func (f *resetFence) pass(c store.OffsetCommit) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.m) == 0 {
		return true
	}
	k := offsetKey{c.Group, c.Topic, c.QueueID}
	e, ok := f.m[k]
	switch {
	case !ok:
		return true
	case time.Now().After(e.until) || c.Offset <= e.offset:
		delete(f.m, k) // expired, or the client took the reset
		return true
	}
	return false
}

// drop forgets pending (not yet replicated) commits of those queues, so a
// reset is not followed by an older commit batched before it.
func (o *offsetCommitter) drop(cs []store.OffsetCommit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range cs {
		delete(o.m, offsetKey{c.Group, c.Topic, c.QueueID})
	}
}

// AdminImport is the outcome of AdminImportConfig.
type AdminImport struct {
	Topics  int `json:"topics"`
	Groups  int `json:"groups"`
	Offsets int `json:"offsets"`
	// Clamped counts offsets lowered to their queue's end on this group
	// (an offset past the end would make consumers skip what comes).
	Clamped int `json:"clamped"`
	// Index is the raft index the import was applied at.
	Index uint64 `json:"appliedIndex"`
}

// AdminImportConfig replicates a RocketMQ config (topics, subscription
// groups, consumer offsets) into the group as one raft entry: every node
// applies all of it or none. An offset past its queue's end on this group
// is lowered to the end. Leader only (ErrNotLeader elsewhere).
func (b *Broker) AdminImportConfig(ctx context.Context, cs offsets.ConfigSet) (AdminImport, error) {
	if !b.rep.Node().IsLeader() {
		return AdminImport{}, ErrNotLeader
	}
	if err := b.barrier(ctx); err != nil {
		return AdminImport{}, err
	}
	st := b.rep.Store()
	c := &store.Command{Op: store.OpImportConfig, Topics: cs.Topics, Groups: cs.Groups}
	out := AdminImport{Topics: len(cs.Topics), Groups: len(cs.Groups), Offsets: len(cs.Offsets)}
	for _, o := range cs.Offsets {
		end := st.MaxOffset(o.Topic, o.QueueID)
		off := o.Offset
		if off > end {
			off = end
			out.Clamped++
		}
		c.Offsets = append(c.Offsets, store.OffsetCommit{Group: o.Group, Topic: o.Topic, QueueID: o.QueueID, Offset: off})
	}
	b.offs.drop(c.Offsets)
	if err := b.exec(ctx, c); err != nil {
		return AdminImport{}, fmt.Errorf("cluster: import config: %w", err)
	}
	out.Index = b.rep.Node().Status().Applied
	b.log.Debug("cluster: config imported", "topics", out.Topics, "groups", out.Groups, "offsets", out.Offsets, "clamped", out.Clamped)
	return out, nil
}

// AdminRuntime is this node's runtime figures (GET_BROKER_RUNTIME_INFO).
func (b *Broker) AdminRuntime() map[string]string {
	st := b.rep.Node().Status()
	l := b.rep.Store().Log()
	return map[string]string{
		"brokerVersionDesc":  "raftmq",
		"brokerActive":       strconv.FormatBool(b.rep.Node().LeaderReady()),
		"raftRole":           st.Role,
		"raftTerm":           strconv.FormatUint(st.Term, 10),
		"raftLeader":         strconv.FormatUint(st.Leader, 10),
		"raftCommitIndex":    strconv.FormatUint(st.Commit, 10),
		"raftAppliedIndex":   strconv.FormatUint(st.Applied, 10),
		"commitLogMinOffset": strconv.FormatInt(l.MinPosition(), 10),
		"commitLogMaxOffset": strconv.FormatInt(l.EndPosition(), 10),
		"commitLogDiskRatio": strconv.FormatFloat(b.rep.Store().DiskUsedRatio(), 'f', 4, 64),
		"diskFull":           strconv.FormatBool(b.rep.Store().DiskFull()),
	}
}
