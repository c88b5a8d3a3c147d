// Package mutant holds the known-bad behaviours a broker can be started with
// (the hidden broker flag --mutant NAME), so that the chaos harness can prove
// it detects each of them (raftmq jepsen selftest). A mutant is never
// enabled unless asked for by name; the zero Set is the correct broker.
//
// Mutants exist only in binaries built with the mutant build tag
// (go build -tags mutant ./cmd/raftmq). Enabled is a constant, true only in
// such builds, and every branch of the product that carries a bad
// behaviour tests it first (mutant.Enabled && cfg.Mutants.X), so the
// compiler drops those branches from the default build. The table of names
// (Names, Parse) is compiled only with the tag too: in the default build
// Names is empty and Parse refuses every name with ErrNotBuilt. The same
// holds for the broker's fault endpoint (tick-rate and clock skew).
package mutant

import "errors"

// ErrNotBuilt is the answer of a default build asked for a mutant or for
// the fault endpoint.
var ErrNotBuilt = errors.New("this binary was built without -tags mutant; build one with: go build -tags mutant ./cmd/raftmq")

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
	// DelayEarly: the leader delivers delayed and timer messages as soon
	// as they are stored, not when due.
	DelayEarly bool
	// DeliverHalf: a transactional half message goes straight to its
	// topic, visible before its producer commits it.
	DeliverHalf bool
	// RollbackDelivers: a rollback is lost: the transaction ends as if
	// committed, its message delivered.
	RollbackDelivers bool
	// ScheduleInMemory: the schedule's progress is kept in the leader's
	// memory and deliveries are plain sends, so a new leader starts the
	// schedule over and delivers again what its predecessor delivered.
	ScheduleInMemory bool
	// NoClientDeadlines: client connections have no read or idle deadline,
	// so a connection that stops mid-frame holds its goroutine and buffer
	// for ever.
	NoClientDeadlines bool
	// ReaddedNodeCrash: a node started with --join on an empty data
	// directory (a member added to a running group, as the membership
	// nemesis re-adds one) exits with an error a second after it starts;
	// started again, it runs.
	ReaddedNodeCrash bool
}

// Any reports whether any mutant is on.
func (s Set) Any() bool { return s != Set{} }
