//go:build mutant

package failpoint

import (
	"fmt"
	"strings"
)

// Built is true: this build carries the failpoints and the fault endpoint.
const Built = true

// Set says which failpoints are on: bit p for Point p.
type Set struct{ bits uint32 }

// On reports whether failpoint p is on in s.
func On(s Set, p Point) bool { return s.bits&(1<<p) != 0 }

// Of returns the Set with exactly the failpoints ps on (for tests built
// with the tag).
func Of(ps ...Point) Set {
	var s Set
	for _, p := range ps {
		s.bits |= 1 << p
	}
	return s
}

// Any reports whether any failpoint is on.
func (s Set) Any() bool { return s.bits != 0 }

// String lists the names of the failpoints on, comma-separated.
func (s Set) String() string {
	var on []string
	for p := range count {
		if On(s, p) {
			on = append(on, table()[p])
		}
	}
	return strings.Join(on, ",")
}

// table names every failpoint, indexed by Point; a name is its mutant's.
func table() [count]string {
	return [count]string{
		AckBeforeCommit:   "ack-before-commit",
		AckBeforeFsync:    "ack-before-fsync",
		UncommittedReads:  "uncommitted-reads",
		OffsetsInMemory:   "offsets-in-memory",
		NoDedupe:          "no-dedupe",
		CRCUnchecked:      "crc-unchecked",
		VoteNotFsynced:    "vote-not-fsynced",
		LockTwoOwners:     "lock-two-owners",
		ForgetMembers:     "forget-members",
		DelayEarly:        "delay-early",
		DeliverHalf:       "deliver-half",
		RollbackDelivers:  "rollback-delivers",
		ScheduleInMemory:  "schedule-in-memory",
		NoClientDeadlines: "no-client-deadlines",
		ReaddedNodeCrash:  "readded-node-crash",
		AckInMemory:       "ack-in-memory",
		ReviveEarly:       "revive-early",
		PopBeforeCommit:   "pop-before-commit",
	}
}

// Names lists every failpoint, in a fixed order.
func Names() []string {
	t := table()
	return append([]string(nil), t[:]...)
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
		for p, n := range table() {
			if n == name {
				s.bits |= 1 << p
				found = true
			}
		}
		if !found {
			return Set{}, fmt.Errorf("failpoint: unknown mutant %q (known: %s)", name, strings.Join(Names(), ", "))
		}
	}
	return s, nil
}
