//go:build !mutant

package raftlog

import "go.etcd.io/raft/v3/raftpb"

// Stubs of the failpoints in failpoints_mutant.go: the default build never
// calls them (failpoint.On is constant false there).

func (l *loop) ackBeforeCommit([]*raftpb.Entry) {
	panic("failpoint ack-before-commit: built without -tags mutant")
}

func (s *Storage) voteNotFsynced() error {
	panic("failpoint vote-not-fsynced: built without -tags mutant")
}
