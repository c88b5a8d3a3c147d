// Package failpoint is the registry of raftmq's named failure points: the
// known-bad behaviours a broker can be started with (the hidden broker flag
// --mutant NAME), so that the chaos harness can prove it detects each of
// them (raftmq jepsen selftest). A broker with a failpoint on is called a
// mutant, and each failpoint is named after its mutant.
//
// Failpoints exist only in binaries built with the mutant build tag
// (go build -tags mutant ./cmd/raftmq). A Set of failpoints travels with a
// node's configuration (store.Config.Failpoints, raftlog.Config.Failpoints,
// commitlog.Options.Failpoints, raftlog.Storage.Failpoints), so nodes of
// one process can run different ones; the zero Set is the correct node.
//
// Product code reaches a failpoint only through a one-line hook:
//
//	if failpoint.On(cfg.Failpoints, failpoint.NoDedupe) {
//		dedupe = noDedupe()
//	}
//
// where the body is one call into a file of the same package built only
// with the tag (failpoints_mutant.go), which holds the bad behaviour. The
// default build has a stub of that function in failpoints_nomutant.go that
// panics and is never called. In the default build Set is an empty struct
// without methods (product code can only ask On) and On is a constant
// false that the compiler inlines, so the hook and its body are compiled
// out; Built gates the fault endpoint the same way. The table of names
// (Names, Parse) is compiled only with the tag: in the default build Names
// is empty and Parse refuses every name with ErrNotBuilt. TestHooksOnly
// (hooks_test.go) holds the product's files to this form.
package failpoint

import "errors"

// ErrNotBuilt is the answer of a default build asked for a failpoint or for
// the fault endpoint.
var ErrNotBuilt = errors.New("this binary was built without -tags mutant; build one with: go build -tags mutant ./cmd/raftmq")

// Point is one named failure point. A new one is added at the end of the
// list, with its name in on.go's table and its campaign in
// jepsen/campaigns_mutant.go.
type Point uint8

const (
	// AckBeforeCommit: the leader applies entries, and so answers sends,
	// as soon as its own copy is durable, before a quorum holds them
	// (raftlog: the owner loop hands the applier what it appended).
	AckBeforeCommit Point = iota
	// AckBeforeFsync: the commit log is not synced before an append is
	// acknowledged (it is written to the page cache and synced later).
	AckBeforeFsync
	// UncommittedReads: pulls also return messages from the log's
	// uncommitted tail.
	UncommittedReads
	// OffsetsInMemory: consumer offset commits are kept in the memory of the
	// node that took them and never replicated.
	OffsetsInMemory
	// NoDedupe: a retried send with a UNIQ_KEY already stored is queued again.
	NoDedupe
	// CRCUnchecked: the commit log does not verify entry checksums when it
	// recovers or reads.
	CRCUnchecked
	// VoteNotFsynced: raft's term and vote are written but not fsynced.
	VoteNotFsynced
	// LockTwoOwners: LOCK_BATCH_MQ grants every queue asked for, even one
	// another client of the group holds.
	LockTwoOwners
	// ForgetMembers: a node that becomes leader forgets every client that
	// heartbeated it, and tells nobody.
	ForgetMembers
	// DelayEarly: the leader delivers delayed and timer messages as soon
	// as they are stored, not when due.
	DelayEarly
	// DeliverHalf: a transactional half message goes straight to its
	// topic, visible before its producer commits it.
	DeliverHalf
	// RollbackDelivers: a rollback is lost: the transaction ends as if
	// committed, its message delivered.
	RollbackDelivers
	// ScheduleInMemory: the schedule's progress is kept in the leader's
	// memory and deliveries are plain sends, so a new leader starts the
	// schedule over and delivers again what its predecessor delivered.
	ScheduleInMemory
	// NoClientDeadlines: client connections have no read or idle deadline,
	// so a connection that stops mid-frame holds its goroutine and buffer
	// for ever.
	NoClientDeadlines
	// ReaddedNodeCrash: a node started with --join on an empty data
	// directory (a member added to a running group, as the membership
	// nemesis re-adds one) exits with an error a second after it starts;
	// started again, it runs.
	ReaddedNodeCrash
	// AckInMemory: a pop consumer's ack is kept in the leader's memory and
	// answered at once, never replicated; the leader's revives pass over
	// the records it acked, a new leader revives and delivers them again.
	AckInMemory
	// ReviveEarly: a popped message is hidden for a third of its invisible
	// time (store: applyPop), so it is delivered again while its consumer
	// still holds it.
	ReviveEarly
	// PopBeforeCommit: the leader hands out a pop's messages as soon as it
	// proposed the pop entry, before it commits and applies, and lets the
	// queue's next pop decide from the state that lacks it.
	PopBeforeCommit

	// count is the number of failpoints.
	count
)
