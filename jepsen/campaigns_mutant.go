//go:build mutant

package jepsen

import "github.com/raftmq/raftmq/internal/failpoint"

// Campaigns returns the campaign for every mutant: one per failpoint
// (internal/failpoint), under its name.
func Campaigns() []Campaign {
	c := []Campaign{
		{"ack-before-commit", WorkloadQueue, []string{NemPartitionLeader},
			"an isolated leader keeps acknowledging; the majority side overwrites it: lost acked sends"},
		{"ack-before-fsync", WorkloadQueue, []string{NemPowerLoss},
			"acknowledged sends only in page cache are gone after a power cut of every node"},
		{"uncommitted-reads", WorkloadLog, []string{NemPartitionLeader},
			"reads see an isolated leader's uncommitted tail, later truncated"},
		{"offsets-in-memory", WorkloadOffsets, []string{NemKillLeader},
			"a new leader does not know committed offsets: they go backwards"},
		{"no-dedupe", WorkloadRetries, []string{NemKillLeader, NemPartitionLeader},
			"a retried send whose first attempt landed is stored twice"},
		{"crc-unchecked", WorkloadQueue, []string{NemBitflip},
			"a flipped bit in a follower's synced log goes unnoticed: its log and reads differ"},
		{"vote-not-fsynced", WorkloadQueue, []string{NemPowerLossElection},
			"a power cut right after an election: the nodes' raft state is behind their logs; they must not vote again, and refuse to start"},
		{"lock-two-owners", WorkloadGroup, nil,
			"a queue handed to a new member of an orderly group while its old owner is still consuming it: two owners at once"},
		{"forget-members", WorkloadGroup, []string{NemKillLeader},
			"the new leader's member lists lack consumers that heartbeated it before it led"},
		{"delay-early", WorkloadDelay, nil,
			"delayed and timer messages are delivered as soon as they are stored: polls see them before they are due"},
		{"deliver-half", WorkloadTransaction, nil,
			"half messages go straight to their topic: rolled-back transactions are consumed"},
		{"rollback-delivers", WorkloadTransaction, nil,
			"a rollback commits: rolled-back transactions' messages are in the topic"},
		{"schedule-in-memory", WorkloadDelay, []string{NemKillLeader},
			"a new leader starts the schedule over: delayed messages its predecessor delivered are delivered again"},
		{"no-client-deadlines", WorkloadQueue, []string{NemHostile},
			"connections that stop mid-frame are never closed: hostile clients hold the node's connections for ever"},
		{"readded-node-crash", WorkloadQueue, []string{NemMembership},
			"the member the membership nemesis re-adds exits a few seconds later: cluster-health must count the crash"},
		{"ack-in-memory", WorkloadPop, []string{NemKillLeader},
			"pop acks live in the leader's memory: a new leader delivers acked messages again"},
		{"revive-early", WorkloadPop, nil,
			"popped messages are visible again after a third of their invisible time: handed to a second consumer while the first holds them"},
		{"pop-before-commit", WorkloadPop, nil,
			"pops are answered before their entry commits: concurrent pops of a queue hand out the same messages"},
	}
	if len(c) != len(failpoint.Names()) {
		panic("jepsen: a mutant without a campaign")
	}
	return c
}
