package jepsen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// The power-loss-election nemesis aims a power cut at the window in which
// a raft node's new term and vote must already be durable: it asks the
// leader to hand leadership to a follower (the admin transfer: the
// follower campaigns at once in a higher term and the others grant their
// votes), watches every node's /status every few milliseconds, and the
// moment one of them leads a higher term (it has its majority of votes
// and has appended the term's first entry: a node publishes its status
// after persisting a Ready), cuts the power of every node at once (kill
// -9 in --power-loss mode), the new leader's first. The heal restarts
// them all.
//
// The plain power-loss nemesis rarely hits that window: the store's
// checkpoint syncs the whole file system (vfs.LazyFS.SyncAll in
// power-loss mode) about once a second, kicked by an apply when the last
// one is a second old, which makes a term or vote written without its own
// fsync durable anyway unless the power goes before it. An election after
// the leader's death fails the same way: the election takes most of a
// second without applies, so the new term's first apply kicks a
// checkpoint at once (1 to 4 seeds in 10 escaped that way). A transfer
// elects within milliseconds, while the workload's applies keep the
// checkpoints on their schedule, and the cut follows within milliseconds.
//
// A node whose term and vote were not synced comes back with its raft
// state behind its log and must refuse to start (raftlog.OpenStorage); had
// it started, it could vote a second time in a term it already voted in,
// and the replica and queue checkers would see two leaders' diverging logs
// or a committed entry lost. A correct build comes back with every term
// and vote it acted on, elects a leader and goes on.

// NemPowerLossElection is the nemesis described above. It is a targeted
// variant: not in "all", whose power-loss kind covers the random cut.
const NemPowerLossElection = "power-loss-election"

// electionPoll is how often the nemesis reads the survivors' status while
// it waits for the new leader; electionWait is how long it waits.
const (
	electionPoll = 2 * time.Millisecond
	electionWait = 10 * time.Second
)

// powerLossMode reports whether a run with these nemeses needs its brokers
// in --power-loss mode (unsynced writes kept in process memory).
func powerLossMode(nemeses []string) bool {
	return slices.Contains(nemeses, NemPowerLoss) || slices.Contains(nemeses, NemPowerLossElection)
}

// powerLossElection injects the fault; ev.Kind is reported as power-loss
// (the checkers allow for it as for any power cut).
func (e *env) powerLossElection(ctx context.Context, ev history.Event) (*fault, error) {
	ev.Kind = NemPowerLoss
	ev.Nodes = e.nodes()
	heal := func() error {
		var errs []error
		for _, n := range e.nodes() {
			errs = append(errs, e.restart(ctx, n))
		}
		return errors.Join(errs...)
	}
	var old, oldTerm uint64
	for _, st := range e.g.Statuses() {
		if st != nil && st.LeaderReady {
			old, oldTerm = st.Status.ID, st.Status.Term
		}
	}
	if old == 0 {
		return nil, errors.New("jepsen: power-loss-election: no ready leader")
	}
	var cands []int
	for _, n := range e.nodes() {
		if uint64(n) != old && e.g.Node(uint64(n)).Running() {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return nil, errors.New("jepsen: power-loss-election: no follower to elect")
	}
	to := uint64(cands[e.rng.IntN(len(cands))])
	// Watch every node for a leader of a higher term, each on its own
	// goroutine; the first to answer as one wins.
	found := make(chan [2]uint64, 1)
	wctx, cancel := context.WithTimeout(ctx, electionWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, n := range e.nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				if st, err := e.g.Status(uint64(n)); err == nil && st.Status.Leader == st.Status.ID && st.Status.Term > oldTerm {
					select {
					case found <- [2]uint64{uint64(n), st.Status.Term}:
					default:
					}
					cancel()
					return
				}
				time.Sleep(electionPoll)
			}
		}()
	}
	start := time.Now()
	tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
	terr := e.admin.TransferLeader(tctx, to)
	tcancel()
	if terr != nil {
		cancel() // unless a new leader was seen already
	}
	var leader, term uint64
	select {
	case lt := <-found:
		leader, term = lt[0], lt[1]
	case <-wctx.Done():
		select {
		case lt := <-found:
			leader, term = lt[0], lt[1]
		default:
		}
	}
	elected := time.Since(start)
	cancel()
	// The new leader first: it holds its first entry of the new term.
	e.powerCut(append([]int{int(leader)}, e.nodes()...))
	wg.Wait()
	switch {
	case terr != nil && leader == 0:
		ev.Description = fmt.Sprintf("hand leadership from n%d (term %d) to n%d failed (%v); power loss of every node", old, oldTerm, to, terr)
	case leader == 0:
		ev.Description = fmt.Sprintf("hand leadership from n%d (term %d) to n%d: no new leader within %v; power loss of every node",
			old, oldTerm, to, electionWait)
	default:
		ev.Description = fmt.Sprintf("hand leadership from n%d (term %d) to n%d: n%d led term %d after %v; power loss of every node",
			old, oldTerm, to, leader, term, elected.Round(time.Millisecond))
	}
	return &fault{ev: ev, heal: heal}, nil
}

// powerCut kills the given nodes (0 and repeats are skipped) at about
// the same moment, in order (kill -9 in power-loss mode: each loses its
// unsynced writes), and waits for them.
func (e *env) powerCut(nodes []int) {
	var wg sync.WaitGroup
	seen := map[int]bool{0: true}
	for _, n := range nodes {
		if seen[n] {
			continue
		}
		seen[n] = true
		e.stopping(n)
		if !e.g.Node(uint64(n)).Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.g.Kill(uint64(n)); err != nil {
				e.log("kill", "node", n, "err", err)
			}
		}()
	}
	wg.Wait()
}
