//go:build mutant

package raftlog

import (
	"testing"

	"github.com/raftmq/raftmq/internal/failpoint"
)

// simAckBudget is how many seeds TestSimCatchesAckBeforeCommit may try.
const simAckBudget = 100

// simAckCatches is how many seeds must catch it (each also run against the
// correct loop).
const simAckCatches = 5

// The simulator catches the product's ack-before-commit failpoint: every
// node runs the product's owner loop (loop.go), whose failpoint hands the
// applier what a leader has appended before a quorum holds it, so the
// product's applier answers the proposal early. A leader that loses its
// term then has acknowledged (and applied) entries the next leader
// overwrites, which the simulator's checks see. The correct loop passes
// the same seeds.
func TestSimCatchesAckBeforeCommit(t *testing.T) {
	if *simSeed != 0 {
		out := runSeed(t, *simSeed, simHooks{failpoints: failpoint.Of(failpoint.AckBeforeCommit)}, testing.Verbose())
		if testing.Verbose() {
			t.Logf("trace of seed %d with the mutant:\n%s", *simSeed, out.trace)
		}
		t.Logf("seed %d with the ack-before-commit mutant: %v", *simSeed, out.err)
		return
	}
	caught := 0
	for seed := uint64(1); seed <= simAckBudget && caught < simAckCatches; seed++ {
		out := runSeed(t, seed, simHooks{failpoints: failpoint.Of(failpoint.AckBeforeCommit)}, false)
		if out.err == nil {
			continue
		}
		caught++
		t.Logf("seed %d caught the product's ack-before-commit mutant: %v\nreplay: go test -tags mutant ./raftlog -run 'TestSimCatchesAckBeforeCommit$' -sim.seed %d -v",
			seed, out.err, seed)
		if out := runSeed(t, seed, simHooks{}, false); out.err != nil {
			t.Fatalf("seed %d: the correct owner loop failed too: %v", seed, out.err)
		}
	}
	if caught == simAckCatches {
		t.Logf("the correct owner loop passed each of those %d seeds", caught)
		return
	}
	t.Fatalf("no seed among %d caught the ack-before-commit mutant", simAckBudget)
}
