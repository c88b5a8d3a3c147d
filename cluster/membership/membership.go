// Package membership keeps the producer and consumer groups a broker knows
// from its clients' heartbeats: which clients belong to which group, over
// which connection, with which subscriptions.
//
// It is a node's own view, as in RocketMQ, not replicated state: every
// consumer heartbeats every node of a group's route (leader and followers
// alike), so each node builds the same consumer tables from the clients
// themselves, and a new leader already knows the consumers when it takes
// over. Producers heartbeat only the leader (broker id 0); a new leader
// learns them from their next heartbeat.
//
// A client leaves a group when it unregisters (UNREGISTER_CLIENT), when the
// connection its last heartbeat came on closes, or when it has not
// heartbeated for Expiry (120 s by default, RocketMQ's
// channelExpiredTimeout). Every change of a consumer group's set of client
// ids is reported to the caller, which tells the group's clients
// (NOTIFY_CONSUMER_IDS_CHANGED) so that they rebalance at once.
//
// One mutex guards the tables; no method blocks on I/O while holding it.
package membership

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// DefaultExpiry is how long a client stays registered without a heartbeat.
const DefaultExpiry = 120 * time.Second

// Channel is a client's connection, as the registry needs it:
// *remoting.ServerConn implements it.
type Channel interface {
	// Oneway sends a request that expects no answer.
	Oneway(req *remoting.Command) error
}

// Consumer is one client of a consumer group.
type Consumer struct {
	ClientID         string
	Channel          Channel
	Addr             string // the client's remote address
	Language         string
	Version          int32
	ConsumeType      string // CONSUME_PASSIVELY (push), CONSUME_ACTIVELY (pull), CONSUME_POP
	MessageModel     string // CLUSTERING or BROADCASTING
	ConsumeFromWhere string
	Subscriptions    []remoting.SubscriptionData
	LastSeen         time.Time
}

// Producer is one client of a producer group.
type Producer struct {
	ClientID string
	Channel  Channel
	Addr     string
	Language string
	Version  int32
	LastSeen time.Time
}

// Client describes the connection a heartbeat arrived on.
type Client struct {
	Channel  Channel
	Addr     string
	Language string
	Version  int32
}

// Registry holds the groups. The zero value is not usable: use New.
type Registry struct {
	expiry time.Duration

	mu        sync.Mutex
	consumers map[string]map[string]*Consumer // group -> client id -> consumer
	producers map[string]map[string]*Producer // group -> client id -> producer
}

// New returns an empty registry whose clients expire after expiry without
// a heartbeat (DefaultExpiry if expiry <= 0).
func New(expiry time.Duration) *Registry {
	if expiry <= 0 {
		expiry = DefaultExpiry
	}
	return &Registry{
		expiry:    expiry,
		consumers: map[string]map[string]*Consumer{},
		producers: map[string]map[string]*Producer{},
	}
}

// Expiry returns how long a client stays registered without a heartbeat.
func (r *Registry) Expiry() time.Duration { return r.expiry }

// Heartbeat records a client's heartbeat, received at now on c. It returns
// the consumer groups whose set of client ids changed (sorted). A heartbeat
// replaces the client's earlier subscriptions of a group and moves the
// client to c.
func (r *Registry) Heartbeat(c Client, hb *remoting.HeartbeatData, now time.Time) (changed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pd := range hb.ProducerDataSet {
		if pd.GroupName == "" {
			continue
		}
		g := r.producers[pd.GroupName]
		if g == nil {
			g = map[string]*Producer{}
			r.producers[pd.GroupName] = g
		}
		g[hb.ClientID] = &Producer{ClientID: hb.ClientID, Channel: c.Channel, Addr: c.Addr, Language: c.Language, Version: c.Version, LastSeen: now}
	}
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		g := r.consumers[cd.GroupName]
		if g == nil {
			g = map[string]*Consumer{}
			r.consumers[cd.GroupName] = g
		}
		if _, ok := g[hb.ClientID]; !ok {
			changed = append(changed, cd.GroupName)
		}
		g[hb.ClientID] = &Consumer{
			ClientID: hb.ClientID, Channel: c.Channel, Addr: c.Addr, Language: c.Language, Version: c.Version,
			ConsumeType: cd.ConsumeType, MessageModel: cd.MessageModel, ConsumeFromWhere: cd.ConsumeFromWhere,
			Subscriptions: slices.Clone(cd.SubscriptionDataSet), LastSeen: now,
		}
	}
	return sortedUnique(changed)
}

// Unregister removes clientID from the named groups (an empty name is
// skipped) and returns the consumer groups that changed.
func (r *Registry) Unregister(clientID, producerGroup, consumerGroup string) (changed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if producerGroup != "" {
		r.removeProducer(producerGroup, clientID)
	}
	if consumerGroup != "" && r.removeConsumer(consumerGroup, clientID) {
		changed = append(changed, consumerGroup)
	}
	return changed
}

// ChannelClosed removes every client whose last heartbeat came on ch and
// returns the consumer groups that changed.
func (r *Registry) ChannelClosed(ch Channel) (changed []string) {
	return r.removeWhere(func(c Channel, _ time.Time) bool { return c == ch })
}

// Expire removes every client not heard from since now-Expiry and returns
// the consumer groups that changed.
func (r *Registry) Expire(now time.Time) (changed []string) {
	cut := now.Add(-r.expiry)
	return r.removeWhere(func(_ Channel, seen time.Time) bool { return seen.Before(cut) })
}

func (r *Registry) removeWhere(drop func(Channel, time.Time) bool) (changed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, g := range r.producers {
		for id, p := range g {
			if drop(p.Channel, p.LastSeen) {
				r.removeProducer(name, id)
			}
		}
	}
	for name, g := range r.consumers {
		for id, c := range g {
			if drop(c.Channel, c.LastSeen) && r.removeConsumer(name, id) {
				changed = append(changed, name)
			}
		}
	}
	return sortedUnique(changed)
}

func (r *Registry) removeProducer(group, clientID string) {
	if g := r.producers[group]; g != nil {
		delete(g, clientID)
		if len(g) == 0 {
			delete(r.producers, group)
		}
	}
}

func (r *Registry) removeConsumer(group, clientID string) bool {
	g := r.consumers[group]
	if g == nil {
		return false
	}
	if _, ok := g[clientID]; !ok {
		return false
	}
	delete(g, clientID)
	if len(g) == 0 {
		delete(r.consumers, group)
	}
	return true
}

// Reset forgets every client (the chaos harness's forget-members mutant
// uses it; a correct broker never does).
func (r *Registry) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.consumers)
	clear(r.producers)
}

// ConsumerIDs returns the client ids of a consumer group, sorted: every
// consumer allocates queues over this list, so all must see one order.
func (r *Registry) ConsumerIDs(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.consumers[group]))
	for id := range r.consumers[group] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// ConsumerChannels returns the distinct connections of a consumer group's
// clients.
func (r *Registry) ConsumerChannels(group string) []Channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Channel
	for _, c := range r.consumers[group] {
		if !slices.Contains(out, c.Channel) {
			out = append(out, c.Channel)
		}
	}
	return out
}

// Consumers returns a copy of a consumer group's clients, sorted by id.
func (r *Registry) Consumers(group string) []Consumer {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Consumer, 0, len(r.consumers[group]))
	for _, c := range r.consumers[group] {
		cc := *c
		cc.Subscriptions = slices.Clone(c.Subscriptions)
		out = append(out, cc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out
}

// Producers returns a copy of a producer group's clients, sorted by id.
func (r *Registry) Producers(group string) []Producer {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Producer, 0, len(r.producers[group]))
	for _, p := range r.producers[group] {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out
}

// ConsumerGroups returns the names of the consumer groups with at least
// one client, sorted.
func (r *Registry) ConsumerGroups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.consumers))
	for g := range r.consumers {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Subscription returns the subscription of topic that a consumer group's
// clients sent in their heartbeats: the one with the highest SubVersion,
// so a client that changed its expression wins over one that has not
// heartbeated since.
func (r *Registry) Subscription(group, topic string) (remoting.SubscriptionData, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best remoting.SubscriptionData
	found := false
	for _, c := range r.consumers[group] {
		for _, s := range c.Subscriptions {
			if s.Topic == topic && (!found || s.SubVersion > best.SubVersion) {
				best, found = s, true
			}
		}
	}
	return best, found
}

func sortedUnique(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}
