//go:build mutant

package mutant

import (
	"fmt"
	"strings"
)

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
		{"delay-early", func(s *Set) { s.DelayEarly = true }},
		{"deliver-half", func(s *Set) { s.DeliverHalf = true }},
		{"rollback-delivers", func(s *Set) { s.RollbackDelivers = true }},
		{"schedule-in-memory", func(s *Set) { s.ScheduleInMemory = true }},
		{"no-client-deadlines", func(s *Set) { s.NoClientDeadlines = true }},
		{"readded-node-crash", func(s *Set) { s.ReaddedNodeCrash = true }},
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
