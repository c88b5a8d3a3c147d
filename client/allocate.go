package client

import (
	"cmp"
	"crypto/md5"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
)

// MessageQueue names one queue of a topic on one broker name (RocketMQ's
// MessageQueue). A raftmq group has a single broker name.
type MessageQueue struct {
	Topic      string
	BrokerName string
	QueueID    int32
}

func (q MessageQueue) String() string {
	return q.Topic + "@" + q.BrokerName + "@" + strconv.Itoa(int(q.QueueID))
}

// CompareQueues orders queues by topic, broker name and queue id, the
// order every consumer of a group sorts them in before allocating.
func CompareQueues(a, b MessageQueue) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
		return c
	}
	return cmp.Compare(a.QueueID, b.QueueID)
}

// AllocateStrategy decides which of a topic's queues a consumer of a
// clustering group owns. Every consumer of the group runs it over the same
// input, sorted the same way (queues by CompareQueues, client ids as
// strings), and takes its own share; the broker takes no part. An
// implementation must be a pure function of its arguments: deterministic,
// and, for every strategy but AllocateByConfig, such that the shares of
// all clients are disjoint and cover every queue.
type AllocateStrategy interface {
	// Name identifies the strategy in logs (RocketMQ's names).
	Name() string
	// Allocate returns self's share of queues among clients. queues and
	// clients are sorted; clients contains self. The result must not
	// alias queues' backing array in a way the caller could observe.
	Allocate(group, self string, queues []MessageQueue, clients []string) []MessageQueue
}

// Compile-time checks.
var (
	_ AllocateStrategy = AllocateAveragely{}
	_ AllocateStrategy = AllocateAveragelyByCircle{}
	_ AllocateStrategy = (*AllocateConsistentHash)(nil)
	_ AllocateStrategy = (*AllocateByMachineRoom)(nil)
	_ AllocateStrategy = AllocateByConfig{}
)

// AllocateAveragely gives each client a contiguous block of the sorted
// queues: with q queues and c clients, the first q%c clients get q/c+1
// queues and the others q/c (RocketMQ's default,
// AllocateMessageQueueAveragely). Clients past the q-th get none.
type AllocateAveragely struct{}

// Name implements AllocateStrategy.
func (AllocateAveragely) Name() string { return "AVG" }

// Allocate implements AllocateStrategy.
func (AllocateAveragely) Allocate(_, self string, queues []MessageQueue, clients []string) []MessageQueue {
	i := slices.Index(clients, self)
	if i < 0 || len(queues) == 0 {
		return nil
	}
	q, c := len(queues), len(clients)
	size, rem := q/c, q%c
	start := i*size + min(i, rem)
	if i < rem {
		size++
	}
	return slices.Clone(queues[start : start+size])
}

// AllocateAveragelyByCircle deals the sorted queues out one at a time, as
// cards: queue k goes to client k % c (AllocateMessageQueueAveragelyByCircle).
type AllocateAveragelyByCircle struct{}

// Name implements AllocateStrategy.
func (AllocateAveragelyByCircle) Name() string { return "AVG_BY_CIRCLE" }

// Allocate implements AllocateStrategy.
func (AllocateAveragelyByCircle) Allocate(_, self string, queues []MessageQueue, clients []string) []MessageQueue {
	i := slices.Index(clients, self)
	if i < 0 {
		return nil
	}
	var out []MessageQueue
	for k := i; k < len(queues); k += len(clients) {
		out = append(out, queues[k])
	}
	return out
}

// DefaultVirtualNodes is the virtual node count of a consistent-hash
// strategy built with zero VirtualNodes (RocketMQ's default).
const DefaultVirtualNodes = 10

// AllocateConsistentHash places VirtualNodes points per client on a hash
// ring and gives each queue to the client of the first point at or after
// the queue's hash, wrapping around (AllocateMessageQueueConsistentHash).
// When a client joins, only queues whose nearest point becomes one of the
// newcomer's move, and they all move to it; when one leaves, only its
// queues move. Shares are less even than AllocateAveragely's.
//
// Hashes are the first 4 bytes of an MD5 digest, big-endian; a client's
// points hash "<clientID>-<i>" and a queue hashes
// "MessageQueue [topic=T, brokerName=B, queueId=N]", the keys RocketMQ's
// Java client forms, so that mixed groups can agree (not verified against
// it).
type AllocateConsistentHash struct {
	// VirtualNodes is the number of ring points per client; <= 0 means
	// DefaultVirtualNodes.
	VirtualNodes int
}

// Name implements AllocateStrategy.
func (*AllocateConsistentHash) Name() string { return "CONSISTENT_HASH" }

// ringPoint is one virtual node.
type ringPoint struct {
	hash   uint32
	client string
}

// Allocate implements AllocateStrategy.
func (a *AllocateConsistentHash) Allocate(_, self string, queues []MessageQueue, clients []string) []MessageQueue {
	if !slices.Contains(clients, self) {
		return nil
	}
	vn := a.VirtualNodes
	if vn <= 0 {
		vn = DefaultVirtualNodes
	}
	ring := make([]ringPoint, 0, vn*len(clients))
	for _, c := range clients {
		for i := range vn {
			ring = append(ring, ringPoint{ringHash(c + "-" + strconv.Itoa(i)), c})
		}
	}
	// Equal hashes (rare) are ordered by client id, so every consumer
	// builds the same ring.
	slices.SortFunc(ring, func(x, y ringPoint) int {
		if c := cmp.Compare(x.hash, y.hash); c != 0 {
			return c
		}
		return strings.Compare(x.client, y.client)
	})
	var out []MessageQueue
	for _, q := range queues {
		h := ringHash("MessageQueue [topic=" + q.Topic + ", brokerName=" + q.BrokerName + ", queueId=" + strconv.Itoa(int(q.QueueID)) + "]")
		k, _ := slices.BinarySearchFunc(ring, h, func(p ringPoint, h uint32) int { return cmp.Compare(p.hash, h) })
		if k == len(ring) {
			k = 0
		}
		if ring[k].client == self {
			out = append(out, q)
		}
	}
	return out
}

// ringHash is the first 4 bytes of key's MD5 digest, big-endian.
func ringHash(key string) uint32 {
	sum := md5.Sum([]byte(key))
	return binary.BigEndian.Uint32(sum[:4])
}

// AllocateByMachineRoom keeps consumption near the data: queues are
// grouped by the machine room of their broker, and a room's queues are
// shared, with Inner, among the consumers in the same room; the queues of a
// room without consumers are shared among all consumers (RocketMQ's
// AllocateMachineRoomNearby). RoomByPrefix reads rooms from names of the
// form "room@rest", as RocketMQ's AllocateMessageQueueByMachineRoom names
// brokers.
type AllocateByMachineRoom struct {
	// BrokerRoom maps a broker name to its room; nil puts every broker in
	// room "".
	BrokerRoom func(brokerName string) string
	// ClientRoom maps a client id to its consumer's room; nil puts every
	// consumer in room "".
	ClientRoom func(clientID string) string
	// Inner shares one room's queues; nil means AllocateAveragely.
	Inner AllocateStrategy
}

// RoomByPrefix returns the part of name before its first '@', or "" if
// name has none: the room of a broker named "room@broker".
func RoomByPrefix(name string) string {
	room, _, ok := strings.Cut(name, "@")
	if !ok {
		return ""
	}
	return room
}

// Name implements AllocateStrategy.
func (a *AllocateByMachineRoom) Name() string {
	return "MACHINE_ROOM_NEARBY-" + a.inner().Name()
}

func (a *AllocateByMachineRoom) inner() AllocateStrategy {
	if a.Inner == nil {
		return AllocateAveragely{}
	}
	return a.Inner
}

// Allocate implements AllocateStrategy.
func (a *AllocateByMachineRoom) Allocate(group, self string, queues []MessageQueue, clients []string) []MessageQueue {
	if !slices.Contains(clients, self) {
		return nil
	}
	noRoom := func(string) string { return "" }
	brokerRoom, clientRoom := a.BrokerRoom, a.ClientRoom
	if brokerRoom == nil {
		brokerRoom = noRoom
	}
	if clientRoom == nil {
		clientRoom = noRoom
	}
	// Both groupings keep the sorted order of their input.
	queuesIn := map[string][]MessageQueue{}
	var rooms []string
	for _, q := range queues {
		r := brokerRoom(q.BrokerName)
		if _, ok := queuesIn[r]; !ok {
			rooms = append(rooms, r)
		}
		queuesIn[r] = append(queuesIn[r], q)
	}
	clientsIn := map[string][]string{}
	for _, c := range clients {
		r := clientRoom(c)
		clientsIn[r] = append(clientsIn[r], c)
	}
	inner := a.inner()
	var out []MessageQueue
	slices.Sort(rooms)
	for _, r := range rooms {
		if local, ok := clientsIn[r]; ok {
			if clientRoom(self) == r {
				out = append(out, inner.Allocate(group, self, queuesIn[r], local)...)
			}
			continue
		}
		out = append(out, inner.Allocate(group, self, queuesIn[r], clients)...)
	}
	slices.SortFunc(out, CompareQueues)
	return out
}

// AllocateByConfig gives a consumer the fixed list Queues, whatever the
// other consumers are (AllocateMessageQueueByConfig). Every consumer of the
// group needs its own list, and nothing checks that the lists are disjoint
// or cover the topic. Queues of other topics than the one allocated are
// ignored.
type AllocateByConfig struct {
	Queues []MessageQueue
}

// Name implements AllocateStrategy.
func (AllocateByConfig) Name() string { return "CONFIG" }

// Allocate implements AllocateStrategy.
func (a AllocateByConfig) Allocate(_, _ string, queues []MessageQueue, _ []string) []MessageQueue {
	var out []MessageQueue
	for _, q := range a.Queues {
		if slices.Contains(queues, q) {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, CompareQueues)
	return slices.Compact(out)
}
