// Package mutant names the known-bad behaviours a broker can be started with
// (the hidden broker flag --mutant NAME), so that the chaos harness can prove
// it detects each of them (raftmq jepsen selftest). A mutant is never
// enabled unless asked for by name; the zero Set is the correct broker.
package mutant

import (
	"fmt"
	"strings"
)

// Set says which bad behaviours are on.
type Set struct {
	// AckBeforeCommit: the leader applies entries, and so answers sends,
	// as soon as its own copy is durable, before a quorum holds them.
	AckBeforeCommit bool
	// AckBeforeFsync: the commit log is not synced before an append is
	// acknowledged (it is written to the page cache and synced later).
	AckBeforeFsync bool
	// UncommittedReads: pulls also return messages from the log's
	// uncommitted tail.
	UncommittedReads bool
	// OffsetsInMemory: consumer offset commits are kept in the memory of the
	// node that took them and never replicated.
	OffsetsInMemory bool
	// NoDedupe: a retried send with a UNIQ_KEY already stored is queued again.
	NoDedupe bool
	// CRCUnchecked: the commit log does not verify entry checksums when it
	// recovers or reads.
	CRCUnchecked bool
	// VoteNotFsynced: raft's term and vote are written but not fsynced.
	VoteNotFsynced bool
	// LockTwoOwners: LOCK_BATCH_MQ grants every queue asked for, even one
	// another client of the group holds.
	LockTwoOwners bool
	// ForgetMembers: a node that becomes leader forgets every client that
	// heartbeated it, and tells nobody.
	ForgetMembers bool
}

// names maps each mutant's name to the field it sets.
func names() []struct {
	name string
	set  func(*Set)
} {
	return []struct {
		name string
		set  func(*Set)
	}{
		{"ack-before-commit", func(s *Set) { s.AckBeforeCommit = true }},
		{"ack-before-fsync", func(s *Set) { s.AckBeforeFsync = true }},
		{"uncommitted-reads", func(s *Set) { s.UncommittedReads = true }},
		{"offsets-in-memory", func(s *Set) { s.OffsetsInMemory = true }},
		{"no-dedupe", func(s *Set) { s.NoDedupe = true }},
		{"crc-unchecked", func(s *Set) { s.CRCUnchecked = true }},
		{"vote-not-fsynced", func(s *Set) { s.VoteNotFsynced = true }},
		{"lock-two-owners", func(s *Set) { s.LockTwoOwners = true }},
		{"forget-members", func(s *Set) { s.ForgetMembers = true }},
	}
}

// Names lists every mutant, in a fixed order.
func Names() []string {
	var out []string
	for _, n := range names() {
		out = append(out, n.name)
	}
	return out
}

// Parse turns a comma-separated list of names ("" = none) into a Set.
func Parse(list string) (Set, error) {
	var s Set
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		found := false
		for _, n := range names() {
			if n.name == name {
				n.set(&s)
				found = true
			}
		}
		if !found {
			return Set{}, fmt.Errorf("mutant: unknown mutant %q (known: %s)", name, strings.Join(Names(), ", "))
		}
	}
	return s, nil
}

// Any reports whether any mutant is on.
func (s Set) Any() bool { return s != Set{} }
