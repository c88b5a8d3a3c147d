package namesrv

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// errStale refuses a registration that claims a broker id a live
// registration at another address holds with a higher state version: a
// deposed raft leader claiming id 0 with its old term. REGISTER_BROKER
// answers it SYSTEM_ERROR, the remark starting with its text.
var errStale = errors.New("stale registration")

// table is the name server's routing state. It is not safe for concurrent
// use: Server keeps it under Server.mu.
//
// Invariants (check verifies them; the tests call it):
//   - live has exactly one entry per (broker name, address) listed in
//     brokers, with the id under which brokers lists it;
//   - every broker name in brokers has at least one address;
//   - every broker name in topics is in brokers, and no topic's map is
//     empty.
type table struct {
	brokers map[string]*brokerEntry           // broker name -> cluster and addresses
	topics  map[string]map[string]queueConfig // topic -> broker name -> queues
	live    map[liveKey]*liveEntry            // see the invariants
	kv      map[string]map[string]string      // namespace -> key -> value
}

type brokerEntry struct {
	cluster string
	addrs   map[int64]string // broker id -> address
}

// queueConfig is one broker name's queues of a topic, as its master
// registered them (or as an admin changed their permission since).
type queueConfig struct {
	read, write, perm, sysFlag int32
}

// liveKey names a registration. An address may be registered under
// several broker names (a raftmq node registers its group's name and its
// failover name), so the key has both.
type liveKey struct{ broker, addr string }

type liveEntry struct {
	id      int64
	version remoting.DataVersion
	ha      string // haServerAddr
	last    time.Time
	timeout time.Duration
	conn    connKey // the connection it came on; zero if none
}

// connKey identifies a client connection; the zero value is none.
type connKey any

// registration is one REGISTER_BROKER, decoded.
type registration struct {
	cluster, broker, addr, ha string
	id                        int64
	version                   remoting.DataVersion
	timeout                   time.Duration
	// topics is nil when the request had no body: the registration then
	// only renews the broker's liveness.
	topics map[string]queueConfig
	// full: topics is the broker name's whole table, so the master's
	// registration also removes the topics it leaves out.
	full bool
	conn connKey
}

func newTable() table {
	return table{brokers: map[string]*brokerEntry{}, topics: map[string]map[string]queueConfig{},
		live: map[liveKey]*liveEntry{}, kv: map[string]map[string]string{}}
}

func (e *liveEntry) alive(now time.Time) bool { return !now.After(e.last.Add(e.timeout)) }

// registered is what register did.
type registered struct {
	// master and masterHA are the broker name's master address and HA
	// address, for a registration of another id (empty if it has none).
	master, masterHA string
	first            bool   // the (broker name, address) was not registered
	displaced        string // the address that held the id before, if another
}

// register applies a registration at time now. It refuses, changing nothing, a registration
// whose id a live registration at another address holds with a higher
// state version (errStale).
//
// As RocketMQ's name server does, an address registering under a new id of
// its broker name leaves its old id first; an address that held the id
// before is displaced and forgotten (its next registration says what it
// is now). Queues come only from the master's (id 0) registration, and
// only when its data version changed, when it was not the master before,
// or for topics without queues of its broker name: an admin's change of
// write permission stays until the broker's configuration changes.
func (t *table) register(now time.Time, r registration) (registered, error) {
	var res registered
	b := t.brokers[r.broker]
	if b != nil {
		if holder, ok := b.addrs[r.id]; ok && holder != r.addr {
			if le := t.live[liveKey{r.broker, holder}]; le != nil && le.alive(now) && le.version.StateVersion > r.version.StateVersion {
				return res, fmt.Errorf("%w: %s claims id %d of %s with state version %d, but %s holds it with %d",
					errStale, r.addr, r.id, r.broker, r.version.StateVersion, holder, le.version.StateVersion)
			}
		}
	}
	if b == nil {
		b = &brokerEntry{addrs: map[int64]string{}}
		t.brokers[r.broker] = b
	}
	b.cluster = r.cluster // the latest registration names the cluster
	key := liveKey{r.broker, r.addr}
	prev := t.live[key]
	if prev != nil && prev.id != r.id && b.addrs[prev.id] == r.addr {
		delete(b.addrs, prev.id) // the address moved to another id
	}
	if holder, ok := b.addrs[r.id]; ok && holder != r.addr {
		delete(t.live, liveKey{r.broker, holder})
		res.displaced = holder
	}
	res.first = prev == nil
	b.addrs[r.id] = r.addr
	t.live[key] = &liveEntry{id: r.id, version: r.version, ha: r.ha, last: now, timeout: r.timeout, conn: r.conn}

	if r.id == remoting.MasterID && r.topics != nil {
		changed := prev == nil || prev.id != remoting.MasterID || prev.version != r.version
		t.applyTopics(r.broker, r.topics, changed, r.full && changed)
	}
	if r.id != remoting.MasterID {
		if m, ok := b.addrs[remoting.MasterID]; ok {
			res.master = m
			if le := t.live[liveKey{r.broker, m}]; le != nil {
				res.masterHA = le.ha
			}
		}
	}
	return res, nil
}

// applyTopics records a master's queues: all of them if changed, else
// only those of topics its broker name has no queues of yet. With prune,
// the broker name's queues of topics not in topics go.
func (t *table) applyTopics(broker string, topics map[string]queueConfig, changed, prune bool) {
	for name, q := range topics {
		qs := t.topics[name]
		if qs == nil {
			qs = map[string]queueConfig{}
			t.topics[name] = qs
		}
		if _, ok := qs[broker]; changed || !ok {
			qs[broker] = q
		}
	}
	if !prune {
		return
	}
	for name := range t.topics {
		if _, ok := topics[name]; !ok {
			t.removeQueues(name, broker)
		}
	}
}

// removeQueues removes broker's queues of topic, and the topic if no
// broker name has queues of it left.
func (t *table) removeQueues(topic, broker string) {
	qs := t.topics[topic]
	delete(qs, broker)
	if len(qs) == 0 {
		delete(t.topics, topic)
	}
}

// drop forgets one registration. A broker name left without addresses
// leaves the cluster and every route; while it has any address left, its
// queues stay, so consumers keep reading from the followers during an
// election (producers write only to broker names with an id 0 address).
// It returns the dropped entry, or nil if there was none.
func (t *table) drop(k liveKey) *liveEntry {
	le := t.live[k]
	if le == nil {
		return nil
	}
	delete(t.live, k)
	b := t.brokers[k.broker]
	if b == nil {
		return le
	}
	if b.addrs[le.id] == k.addr {
		delete(b.addrs, le.id)
	}
	if len(b.addrs) == 0 {
		delete(t.brokers, k.broker)
		for name := range t.topics {
			t.removeQueues(name, k.broker)
		}
	}
	return le
}

// touch renews a registration's liveness; it reports whether there was
// one.
func (t *table) touch(now time.Time, k liveKey) bool {
	le := t.live[k]
	if le != nil {
		le.last = now
	}
	return le != nil
}

// expired returns the registrations not renewed within their timeout.
func (t *table) expired(now time.Time) []liveKey {
	var out []liveKey
	for k, le := range t.live {
		if !le.alive(now) {
			out = append(out, k)
		}
	}
	return out
}

// onConn returns the registrations made over conn.
func (t *table) onConn(conn connKey) []liveKey {
	var out []liveKey
	for k, le := range t.live {
		if le.conn == conn {
			out = append(out, k)
		}
	}
	return out
}

// route returns a topic's route, broker names in order, or false if no
// broker name serves it.
func (t *table) route(topic string) (remoting.TopicRouteData, bool) {
	qs := t.topics[topic]
	if len(qs) == 0 {
		return remoting.TopicRouteData{}, false
	}
	var rd remoting.TopicRouteData
	for _, n := range slices.Sorted(maps.Keys(qs)) {
		b := t.brokers[n]
		if b == nil {
			continue
		}
		q := qs[n]
		rd.QueueDatas = append(rd.QueueDatas, remoting.QueueData{BrokerName: n, ReadQueueNums: int(q.read),
			WriteQueueNums: int(q.write), Perm: int(q.perm), TopicSysFlag: int(q.sysFlag)})
		rd.BrokerDatas = append(rd.BrokerDatas, b.data(n))
	}
	return rd, len(rd.QueueDatas) > 0
}

func (b *brokerEntry) data(name string) remoting.BrokerData {
	return remoting.BrokerData{Cluster: b.cluster, BrokerName: name, BrokerAddrs: maps.Clone(b.addrs)}
}

// clusterInfo returns every broker name and every cluster.
func (t *table) clusterInfo() remoting.ClusterInfo {
	ci := remoting.ClusterInfo{BrokerAddrTable: map[string]remoting.BrokerData{}, ClusterAddrTable: map[string][]string{}}
	for _, n := range slices.Sorted(maps.Keys(t.brokers)) {
		b := t.brokers[n]
		ci.BrokerAddrTable[n] = b.data(n)
		ci.ClusterAddrTable[b.cluster] = append(ci.ClusterAddrTable[b.cluster], n)
	}
	return ci
}

// topicList returns the topics for which keep is true, sorted; keep gets
// the topic's queues by broker name.
func (t *table) topicList(keep func(qs map[string]queueConfig) bool) []string {
	out := []string{}
	for name, qs := range t.topics {
		if keep(qs) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// inCluster reports whether a broker name of cluster has queues in qs.
func (t *table) inCluster(cluster string, qs map[string]queueConfig) bool {
	for n := range qs {
		if b := t.brokers[n]; b != nil && b.cluster == cluster {
			return true
		}
	}
	return false
}

// deleteTopic removes a topic from every route, or, with cluster set, the
// queues of that cluster's broker names only.
func (t *table) deleteTopic(topic, cluster string) {
	if cluster == "" {
		delete(t.topics, topic)
		return
	}
	for n := range t.topics[topic] {
		if b := t.brokers[n]; b != nil && b.cluster == cluster {
			t.removeQueues(topic, n)
		}
	}
}

// registerTopic adds queues to a topic's route. Every broker name must be
// registered; if one is not, nothing changes and it is returned.
func (t *table) registerTopic(topic string, qds []remoting.QueueData) (unknown string) {
	for _, qd := range qds {
		if t.brokers[qd.BrokerName] == nil {
			return qd.BrokerName
		}
	}
	for _, qd := range qds {
		qs := t.topics[topic]
		if qs == nil {
			qs = map[string]queueConfig{}
			t.topics[topic] = qs
		}
		qs[qd.BrokerName] = queueConfig{read: int32(qd.ReadQueueNums), write: int32(qd.WriteQueueNums),
			perm: int32(qd.Perm), sysFlag: int32(qd.TopicSysFlag)}
	}
	return ""
}

// setWritePerm clears (wipe) or restores (RocketMQ sets read and write)
// the write permission of broker's queues of every topic, and returns how
// many topics it changed. A later registration of the broker name's
// master with a new data version sets the permissions it sends.
func (t *table) setWritePerm(broker string, wipe bool) int {
	n := 0
	for _, qs := range t.topics {
		q, ok := qs[broker]
		if !ok {
			continue
		}
		if wipe {
			q.perm &^= remoting.PermWrite
		} else {
			q.perm = remoting.PermRead | remoting.PermWrite
		}
		qs[broker] = q
		n++
	}
	return n
}

// check verifies the invariants; tests call it after every step.
func (t *table) check() error {
	for k, le := range t.live {
		b := t.brokers[k.broker]
		if b == nil || b.addrs[le.id] != k.addr {
			return fmt.Errorf("live %v (id %d) is not listed by its broker name", k, le.id)
		}
	}
	n := 0
	for name, b := range t.brokers {
		if len(b.addrs) == 0 {
			return fmt.Errorf("broker name %s has no address", name)
		}
		for id, a := range b.addrs {
			le := t.live[liveKey{name, a}]
			if le == nil || le.id != id {
				return fmt.Errorf("broker name %s lists %d=%s without a live registration of that id", name, id, a)
			}
			n++
		}
	}
	if n != len(t.live) {
		return fmt.Errorf("%d addresses listed, %d live registrations", n, len(t.live))
	}
	for name, qs := range t.topics {
		if len(qs) == 0 {
			return fmt.Errorf("topic %s has an empty queue map", name)
		}
		for n := range qs {
			if t.brokers[n] == nil {
				return fmt.Errorf("topic %s has queues of unregistered broker name %s", name, n)
			}
		}
	}
	return nil
}
