//go:build mutant

package raftlog

import "go.etcd.io/raft/v3/raftpb"

// The failpoints of raftlog (internal/failpoint), compiled only with -tags
// mutant. Their hooks: loop.begin (ack-before-commit) and
// Storage.persistLocked (vote-not-fsynced).

// ackBeforeCommit is the ack-before-commit failpoint: a leader applies
// (and so answers) what it has just appended, without waiting for a
// quorum. It has the owner loop hand the applier the last of appended,
// the entries of this Ready, when this node leads.
func (l *loop) ackBeforeCommit(appended []*raftpb.Entry) {
	if len(appended) == 0 || l.core.LeaderTerm() == 0 {
		return
	}
	last := appended[len(appended)-1]
	l.ackIdx, l.ackT = last.GetIndex(), last.GetTerm()
}

// voteNotFsynced is the vote-not-fsynced failpoint: the raft state (term,
// vote, membership) just written is left unsynced, so a power cut can take
// back a vote this node granted.
func (s *Storage) voteNotFsynced() error { return nil }
