//go:build !mutant

package store

import (
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/store/pop"
	"github.com/raftmq/raftmq/store/schedule"
)

// Stubs of the failpoints in failpoints_mutant.go: the default build never
// calls them (failpoint.On is constant false there).

func ackBeforeFsync(*commitlog.Options) {
	panic("failpoint ack-before-fsync: built without -tags mutant")
}

func noDedupe(bool) bool { panic("failpoint no-dedupe: built without -tags mutant") }

func reviveEarly(*pop.Op) { panic("failpoint revive-early: built without -tags mutant") }

func scheduleInMemory(int64, schedule.Delivery) int64 {
	panic("failpoint schedule-in-memory: built without -tags mutant")
}
