package client

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// allocInput is one random allocation problem: sorted queues over a few
// broker names (some in rooms), sorted client ids (some in rooms).
type allocInput struct {
	queues  []MessageQueue
	clients []string
}

func randomAllocInput(r *rand.Rand) allocInput {
	var in allocInput
	brokers := []string{"raftmq", "room1@b", "room2@b", "room1@c"}[:1+r.IntN(4)]
	for _, b := range brokers {
		for q := range r.IntN(9) {
			in.queues = append(in.queues, MessageQueue{Topic: "T", BrokerName: b, QueueID: int32(q)})
		}
	}
	rooms := []string{"room0@", "room1@", "room2@", "room3@"}
	seen := map[string]bool{}
	for range 1 + r.IntN(7) {
		id := fmt.Sprintf("%s10.0.0.%d@%d", rooms[r.IntN(len(rooms))], r.IntN(50), r.IntN(99999))
		if !seen[id] {
			seen[id] = true
			in.clients = append(in.clients, id)
		}
	}
	slices.SortFunc(in.queues, CompareQueues)
	slices.Sort(in.clients)
	return in
}

// allocateAll runs s for every client and returns each queue's owners.
func allocateAll(s AllocateStrategy, in allocInput) map[MessageQueue][]string {
	owners := map[MessageQueue][]string{}
	for _, c := range in.clients {
		for _, q := range s.Allocate("G", c, in.queues, in.clients) {
			owners[q] = append(owners[q], c)
		}
	}
	return owners
}

func coveringStrategies() []AllocateStrategy {
	return []AllocateStrategy{
		AllocateAveragely{},
		AllocateAveragelyByCircle{},
		&AllocateConsistentHash{},
		&AllocateConsistentHash{VirtualNodes: 3},
		&AllocateByMachineRoom{},
		&AllocateByMachineRoom{BrokerRoom: RoomByPrefix, ClientRoom: RoomByPrefix},
		&AllocateByMachineRoom{BrokerRoom: RoomByPrefix, ClientRoom: RoomByPrefix, Inner: AllocateAveragelyByCircle{}},
	}
}

// TestAllocateCoversDisjointly: when every client computes with the same
// input, every queue goes to exactly one client, for every strategy meant
// to cover; and the same input always gives the same output.
func TestAllocateCoversDisjointly(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for range 500 {
		in := randomAllocInput(r)
		for _, s := range coveringStrategies() {
			owners := allocateAll(s, in)
			for _, q := range in.queues {
				require.Len(t, owners[q], 1, "%s: queue %v owners %v (input %+v)", s.Name(), q, owners[q], in)
			}
			require.Len(t, owners, len(in.queues), "%s allocated queues not offered", s.Name())
			for _, c := range in.clients {
				a := s.Allocate("G", c, in.queues, in.clients)
				b := s.Allocate("G", c, slices.Clone(in.queues), slices.Clone(in.clients))
				require.Equal(t, a, b, "%s is not deterministic", s.Name())
			}
			require.Empty(t, s.Allocate("G", "not-a-member", in.queues, in.clients), s.Name())
		}
	}
}

// TestAllocateAveragelyBlocks: contiguous blocks whose sizes differ by at
// most one, larger blocks first.
func TestAllocateAveragelyBlocks(t *testing.T) {
	queues := make([]MessageQueue, 10)
	for i := range queues {
		queues[i] = MessageQueue{Topic: "T", BrokerName: "b", QueueID: int32(i)}
	}
	clients := []string{"a", "b", "c", "d"}
	var sizes []int
	next := 0
	for _, c := range clients {
		got := AllocateAveragely{}.Allocate("G", c, queues, clients)
		require.Equal(t, queues[next:next+len(got)], got, "client %s: not the next contiguous block", c)
		next += len(got)
		sizes = append(sizes, len(got))
	}
	require.Equal(t, []int{3, 3, 2, 2}, sizes)
	// More clients than queues: the first ones get one each.
	got := AllocateAveragely{}.Allocate("G", "c", queues[:2], clients)
	require.Empty(t, got)
	require.Equal(t, queues[1:2], AllocateAveragely{}.Allocate("G", "b", queues[:2], clients))
}

func TestAllocateByCircleDeals(t *testing.T) {
	queues := make([]MessageQueue, 7)
	for i := range queues {
		queues[i] = MessageQueue{Topic: "T", BrokerName: "b", QueueID: int32(i)}
	}
	clients := []string{"a", "b", "c"}
	got := AllocateAveragelyByCircle{}.Allocate("G", "b", queues, clients)
	require.Equal(t, []MessageQueue{queues[1], queues[4]}, got)
}

// TestAllocateConsistentHashStable: when a client joins, every queue that
// changes owner moves to the newcomer, and on average the share moved stays
// near 1/(n+1).
func TestAllocateConsistentHashStable(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	s := &AllocateConsistentHash{}
	var moved, total, expected float64
	for range 300 {
		in := randomAllocInput(r)
		for len(in.queues) < 16 {
			in.queues = append(in.queues, MessageQueue{Topic: "U", BrokerName: "x", QueueID: int32(len(in.queues))})
		}
		slices.SortFunc(in.queues, CompareQueues)
		before := allocateAll(s, in)
		joiner := fmt.Sprintf("192.168.1.%d@%d", r.IntN(250), r.IntN(99999))
		if slices.Contains(in.clients, joiner) {
			continue
		}
		grown := allocInput{queues: in.queues, clients: append(slices.Clone(in.clients), joiner)}
		slices.Sort(grown.clients)
		after := allocateAll(s, grown)
		for _, q := range in.queues {
			if before[q][0] != after[q][0] {
				require.Equal(t, joiner, after[q][0], "queue %v moved between old clients", q)
				moved++
			}
		}
		total += float64(len(in.queues))
		expected += float64(len(in.queues)) / float64(len(grown.clients))
	}
	require.Less(t, moved, 1.5*expected, "moved %v of %v queues; a fair share is %v", moved, total, expected)
}

// TestAllocateByMachineRoomPrefersLocal: a room's queues stay with that
// room's consumers; a room without consumers is shared by all.
func TestAllocateByMachineRoomPrefersLocal(t *testing.T) {
	var queues []MessageQueue
	for _, b := range []string{"east@b1", "west@b1", "north@b1"} {
		for i := range 4 {
			queues = append(queues, MessageQueue{Topic: "T", BrokerName: b, QueueID: int32(i)})
		}
	}
	slices.SortFunc(queues, CompareQueues)
	clients := []string{"east@c1", "east@c2", "west@c3"}
	s := &AllocateByMachineRoom{BrokerRoom: RoomByPrefix, ClientRoom: RoomByPrefix}
	owners := allocateAll(s, allocInput{queues: queues, clients: clients})
	for q, o := range owners {
		switch RoomByPrefix(q.BrokerName) {
		case "east":
			require.Contains(t, []string{"east@c1", "east@c2"}, o[0])
		case "west":
			require.Equal(t, "west@c3", o[0])
		}
	}
	north := 0
	for _, c := range clients {
		for _, q := range s.Allocate("G", c, queues, clients) {
			if RoomByPrefix(q.BrokerName) == "north" {
				north++
			}
		}
	}
	require.Equal(t, 4, north)
	require.Len(t, s.Allocate("G", "west@c3", queues, clients), 4+1, "all of west and one of north's four")
}

func TestAllocateByConfig(t *testing.T) {
	qs := []MessageQueue{{"T", "b", 0}, {"T", "b", 1}, {"T", "b", 2}}
	s := AllocateByConfig{Queues: []MessageQueue{{"T", "b", 2}, {"T", "b", 0}, {"U", "b", 0}, {"T", "b", 2}}}
	require.Equal(t, []MessageQueue{{"T", "b", 0}, {"T", "b", 2}}, s.Allocate("G", "x", qs, []string{"x", "y"}))
}
