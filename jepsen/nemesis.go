package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/jepsen/history"
	"github.com/raftmq/raftmq/jepsen/netfault"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Nemesis kinds (the --nemesis list).
const (
	NemPartition  = "partition"  // isolate one, isolate the leader, halves, bridge, majorities ring, one-way
	NemKill       = "kill"       // kill -9 a random node, the leader, or all, then restart
	NemPause      = "pause"      // SIGSTOP a random node or the leader, then SIGCONT
	NemPowerLoss  = "power-loss" // kill -9 every node with unsynced writes lost (brokers in --power-loss mode)
	NemCorrupt    = "corrupt"    // stop a follower, flip bits in / truncate its log, restart it
	NemClock      = "clock"      // tick-rate and wall-clock skew through the fault endpoint
	NemDelay      = "delay"      // latency on a node's links (proxies)
	NemLoss       = "loss"       // connection resets on a node's links (proxies)
	NemMembership = "membership" // remove a follower, wipe it, add it back
	NemHostile    = "hostile"    // hundreds of misbehaving client connections against one node

	// Targeted variants, for campaigns that must hit the leader.
	NemPartitionLeader = "partition-leader" // isolate the leader
	NemKillLeader      = "kill-leader"      // kill -9 the leader
	NemPauseLeader     = "pause-leader"     // SIGSTOP the leader
	NemBitflip         = "bitflip"          // corrupt by bit flips only

	// NemDiskFull fills a node's disk (a tmpfs per node as root, else a
	// virtual ballast through the fault endpoint), at once or slowly, then
	// frees it (nemesis_disk.go). Not in "all": it changes where the
	// nodes' data lives, and power-loss mode reports a full device only
	// at fsync.
	NemDiskFull = "disk-full"
)

// generalNemeses are the kinds "all" stands for.
func generalNemeses() []string {
	return []string{NemPartition, NemKill, NemPause, NemPowerLoss, NemCorrupt, NemClock, NemDelay, NemLoss, NemMembership, NemHostile}
}

// Nemeses lists every nemesis kind: the general ones, then the targeted
// variants.
func Nemeses() []string {
	return append(generalNemeses(), NemPartitionLeader, NemKillLeader, NemPauseLeader, NemBitflip, NemDiskFull, NemPowerLossElection)
}

// ParseNemeses parses a comma-separated list ("all" = every kind, "none" or
// "" = no faults).
func ParseNemeses(list string) ([]string, error) {
	var out []string
	for _, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "" || k == "none":
		case k == "all":
			out = append(out, generalNemeses()...)
		case slices.Contains(Nemeses(), k):
			out = append(out, k)
		default:
			return nil, fmt.Errorf("jepsen: unknown nemesis %q (known: %s, all, none)", k, strings.Join(Nemeses(), ", "))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// env is what the nemesis acts on.
type env struct {
	g     *localgroup.Group
	net   *netfault.Net
	rec   *recorder
	admin *client.Client
	rng   *rand.Rand
	log   func(msg string, args ...any)

	// members adds and removes members (the admin client; a stand-in in
	// unit tests).
	members memberAdmin

	mu sync.Mutex
	// stopped holds the processes (pids) the harness stopped on purpose,
	// or whose exit it expects (a corrupted node refusing to start): any
	// other process that exits is a crash the cluster-health check
	// reports. A mark names one process, so whatever the harness starts in
	// a node's place later is watched without anyone clearing it; a mark
	// per node, cleared by hand, once left the member the membership
	// nemesis re-added unwatched for the rest of the run.
	stopped map[int]bool
	// corrupted marks nodes the harness corrupted: refusing to start (exit
	// status 3) is then the expected answer.
	corrupted map[int]bool
	crashes   []string
	refusals  int
	joinArgs  map[int]bool // nodes that must start with --join
	// diskTmpfs: the nodes' data is on tmpfs mounts (disk-full nemesis);
	// otherwise that nemesis sets a virtual ballast (nemesis_disk.go).
	diskTmpfs bool
	// powerLoss: the brokers run with --power-loss, so every open file's
	// content sits in their anonymous memory (vfs.LazyFS's overlay).
	powerLoss bool
}

func (e *env) nodes() []int {
	out := make([]int, len(e.g.Nodes))
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// memberAdmin is the part of the admin client that changes membership.
type memberAdmin interface {
	RemoveNode(ctx context.Context, id uint64) error
	AddNode(ctx context.Context, id uint64, clientAddr, raftAddr string) error
}

// stopping marks node n's current process as one the harness ends on
// purpose. Call it before signalling the process.
func (e *env) stopping(n int) {
	pid := e.g.Node(uint64(n)).LastPID()
	e.mu.Lock()
	defer e.mu.Unlock()
	if pid != 0 {
		e.stopped[pid] = true
	}
}

// expectedExit reports whether the exit of process pid is one the harness
// caused or expects.
func (e *env) expectedExit(pid int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopped[pid]
}

// leader returns the current ready leader (0 if none).
func (e *env) leader() int { return int(e.g.Leader()) }

// pick returns the leader when wantLeader is set and there is one, else a
// random node, with a word saying which.
func (e *env) pick(wantLeader bool) (int, string) {
	if wantLeader {
		if l := e.leader(); l != 0 {
			return l, "leader"
		}
	}
	return 1 + e.rng.IntN(len(e.g.Nodes)), "node"
}

// fault is one injected fault: heal undoes it.
type fault struct {
	ev   history.Event
	heal func() error
}

// inject starts one fault of kind.
func (e *env) inject(ctx context.Context, kind string) (*fault, error) {
	ev := history.Event{Kind: kind, Start: e.rec.now()}
	switch kind {
	case NemPartition:
		return e.partition(ev, -1)
	case NemPartitionLeader:
		ev.Kind = NemPartition
		return e.partition(ev, 1)
	case NemKill:
		return e.kill(ctx, ev, false, -1)
	case NemKillLeader:
		ev.Kind = NemKill
		return e.kill(ctx, ev, false, 0)
	case NemPowerLoss:
		return e.kill(ctx, ev, true, -1)
	case NemPowerLossElection:
		return e.powerLossElection(ctx, ev)
	case NemPause, NemPauseLeader:
		ev.Kind = NemPause
		n, what := e.pick(kind == NemPauseLeader || e.rng.IntN(2) == 0)
		if err := e.g.Pause(uint64(n)); err != nil {
			return nil, err
		}
		ev.Nodes, ev.Description = []int{n}, fmt.Sprintf("pause %s n%d (SIGSTOP)", what, n)
		return &fault{ev: ev, heal: func() error { return e.g.Resume(uint64(n)) }}, nil
	case NemClock:
		return e.clock(ctx, ev)
	case NemDelay, NemLoss:
		n := 1 + e.rng.IntN(len(e.g.Nodes))
		ev.Nodes = []int{n}
		for _, m := range e.nodes() {
			if m == n {
				continue
			}
			if kind == NemDelay {
				d := time.Duration(20+e.rng.IntN(80)) * time.Millisecond
				e.net.SetDelay(n, m, d, d/2)
				e.net.SetDelay(m, n, d, d/2)
				ev.Description = fmt.Sprintf("delay n%d's links ~%v", n, d)
			} else {
				p := 0.01 + e.rng.Float64()*0.04
				e.net.SetLoss(n, m, p)
				e.net.SetLoss(m, n, p)
				ev.Description = fmt.Sprintf("reset n%d's links with p=%.3f per chunk", n, p)
			}
		}
		return &fault{ev: ev, heal: func() error { e.net.ClearLinkFaults(); return nil }}, nil
	case NemCorrupt:
		return e.corrupt(ctx, ev, e.rng.IntN(4) == 0)
	case NemBitflip:
		ev.Kind = NemCorrupt
		return e.corrupt(ctx, ev, false)
	case NemMembership:
		return e.membership(ctx, ev)
	case NemHostile:
		return e.hostile(ev)
	case NemDiskFull:
		return e.diskFull(ctx, ev)
	}
	return nil, fmt.Errorf("jepsen: no nemesis %q", kind)
}

// partition cuts links; shape picks the partition (-1: random).
func (e *env) partition(ev history.Event, shape int) (*fault, error) {
	n := len(e.g.Nodes)
	var cut [][2]int
	var desc string
	if shape < 0 {
		shape = e.rng.IntN(6)
	}
	switch shape {
	case 0:
		node := 1 + e.rng.IntN(n)
		cut, desc = netfault.IsolateOne(n, node)
	case 1:
		node, _ := e.pick(true)
		cut, desc = netfault.IsolateOne(n, node)
		desc += " (the leader)"
	case 2:
		cut, desc = netfault.Halves(n, e.rng)
	case 3:
		cut, desc = netfault.Bridge(n, e.rng)
	case 4:
		cut, desc = netfault.MajoritiesRing(n, e.rng)
	default:
		from := 1 + e.rng.IntN(n)
		to := 1 + (from+e.rng.IntN(n-1))%n
		cut, desc = netfault.OneWay(n, from, to)
	}
	if err := e.net.Partition(cut); err != nil {
		return nil, err
	}
	ev.Description = desc
	for _, c := range cut {
		ev.Nodes = append(ev.Nodes, c[0])
	}
	slices.Sort(ev.Nodes)
	ev.Nodes = slices.Compact(ev.Nodes)
	return &fault{ev: ev, heal: e.net.Heal}, nil
}

// kill stops nodes with SIGKILL; which picks them (-1: random choice of
// leader, random node or all).
func (e *env) kill(ctx context.Context, ev history.Event, power bool, which int) (*fault, error) {
	var targets []int
	if which < 0 {
		which = e.rng.IntN(3)
	}
	if power {
		targets = e.nodes()
		ev.Description = "power loss of every node (kill -9, unsynced writes lost)"
	} else {
		switch which {
		case 0:
			n, what := e.pick(true)
			targets, ev.Description = []int{n}, fmt.Sprintf("kill -9 %s n%d", what, n)
		case 1:
			n := 1 + e.rng.IntN(len(e.g.Nodes))
			targets, ev.Description = []int{n}, fmt.Sprintf("kill -9 n%d", n)
		default:
			targets, ev.Description = e.nodes(), "kill -9 every node"
		}
	}
	for _, n := range targets {
		e.stopping(n)
		if err := e.g.Kill(uint64(n)); err != nil {
			e.log("kill", "node", n, "err", err)
		}
	}
	ev.Nodes = targets
	return &fault{ev: ev, heal: func() error {
		var errs []error
		for _, n := range targets {
			errs = append(errs, e.restart(ctx, n))
		}
		return errors.Join(errs...)
	}}, nil
}

// restart starts node n again (it must be stopped). A node the harness
// corrupted may refuse with exit status 3: it is then wiped and started
// empty, to be refilled by the leader.
func (e *env) restart(ctx context.Context, n int) error {
	if e.g.Node(uint64(n)).Running() {
		return nil
	}
	if err := e.g.StartNode(uint64(n)); err != nil {
		return err
	}
	e.mu.Lock()
	corrupted := e.corrupted[n]
	e.mu.Unlock()
	if corrupted {
		// Refusing to start is this process's expected answer. (It
		// cannot exit before this mark: it has to open its log first,
		// and the watcher looks again 50 ms after seeing an exit.)
		e.stopping(n)
		// Give it time to open its log and either refuse or come up.
		node := e.g.Node(uint64(n))
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && node.Running() {
			if st, err := e.g.Status(uint64(n)); err == nil && st != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !node.Running() {
			code := node.ExitCode()
			if code != 3 {
				return fmt.Errorf("jepsen: corrupted n%d exited with status %d (want 3: refused, corrupt): %s", n, code, localgroup.Tail(node.LogPath, 5))
			}
			e.mu.Lock()
			e.refusals++
			e.mu.Unlock()
			e.log("corrupted node refused to start, as it should; replacing it with an empty member", "node", n)
			if err := e.rejoin(ctx, n); err != nil {
				return err
			}
		}
		e.mu.Lock()
		delete(e.corrupted, n)
		e.mu.Unlock()
	}
	return nil
}

// wipe removes a node's data but keeps its log file.
func wipe(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("jepsen: wipe %s: %w", dir, err)
	}
	for _, de := range ents {
		if de.Name() == "broker.log" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, de.Name())); err != nil {
			return fmt.Errorf("jepsen: wipe %s: %w", dir, err)
		}
	}
	return nil
}

// follower returns a running node that is not the leader.
func (e *env) follower() int {
	l := e.leader()
	var cands []int
	for _, n := range e.nodes() {
		if n != l && e.g.Node(uint64(n)).Running() {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return 0
	}
	return cands[e.rng.IntN(len(cands))]
}

// corrupt stops a follower and damages its log: a bit flip inside a
// synced entry's body of the last segment, or a truncation of it.
func (e *env) corrupt(ctx context.Context, ev history.Event, truncate bool) (*fault, error) {
	n := e.follower()
	if n == 0 {
		return nil, errors.New("jepsen: corrupt: no running follower")
	}
	node := e.g.Node(uint64(n))
	e.stopping(n)
	if err := e.g.Kill(uint64(n)); err != nil {
		return nil, err
	}
	dir := filepath.Join(node.Dir, "commitlog")
	type ref struct {
		pos   int64
		size  int
		index uint64
	}
	var refs []ref
	rep, err := commitlog.Inspect(vfs.ReadOnly(vfs.Default()), dir, func(r commitlog.EntryRef) error {
		if len(r.Body) > 0 {
			refs = append(refs, ref{r.Pos, len(r.Body), r.Index})
		}
		return nil
	})
	if err != nil || len(rep.Segments) == 0 || len(refs) < 4 {
		ev.Description = fmt.Sprintf("corrupt n%d: nothing to corrupt yet", n)
		ev.Nodes = []int{n}
		return &fault{ev: ev, heal: func() error { return e.restart(ctx, n) }}, nil
	}
	seg := rep.Segments[len(rep.Segments)-1]
	// Only entries the checkpoint says were synced: damage to them is
	// corruption, not a torn tail.
	var cands []ref
	for _, r := range refs {
		if r.pos >= seg.Base && r.index <= rep.DurableIndex {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		ev.Description = fmt.Sprintf("corrupt n%d: no synced entry in the last segment", n)
		ev.Nodes = []int{n}
		return &fault{ev: ev, heal: func() error { return e.restart(ctx, n) }}, nil
	}
	r := cands[e.rng.IntN(len(cands))]
	f, err := os.OpenFile(seg.Path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("jepsen: corrupt: %w", err)
	}
	defer f.Close()
	at := r.pos - seg.Base + commitlog.HeaderSize
	if truncate {
		// Truncate inside the entry: synced entries are missing.
		if err := f.Truncate(at); err != nil {
			return nil, fmt.Errorf("jepsen: corrupt: %w", err)
		}
		ev.Description = fmt.Sprintf("truncate n%d's %s at entry %d", n, filepath.Base(seg.Path), r.index)
	} else {
		off := at + int64(e.rng.IntN(r.size))
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off); err != nil {
			return nil, fmt.Errorf("jepsen: corrupt: %w", err)
		}
		b[0] ^= 1 << e.rng.IntN(8)
		if _, err := f.WriteAt(b, off); err != nil {
			return nil, fmt.Errorf("jepsen: corrupt: %w", err)
		}
		ev.Description = fmt.Sprintf("flip a bit of n%d's entry %d (%s offset %d)", n, r.index, filepath.Base(seg.Path), off)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("jepsen: corrupt: %w", err)
	}
	e.mu.Lock()
	e.corrupted[n] = true
	e.mu.Unlock()
	ev.Nodes = []int{n}
	return &fault{ev: ev, heal: func() error { return e.restart(ctx, n) }}, nil
}

// fault sends a FAULT request to node n.
func (e *env) faultReq(ctx context.Context, n int, fr cluster.FaultRequest) error {
	body, _ := json.Marshal(fr)
	req := remoting.NewRequest(remoting.Fault, map[string]string{}, body)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := e.admin.Invoke(cctx, e.g.Node(uint64(n)).Client, req)
	if err != nil {
		return fmt.Errorf("jepsen: fault request to n%d: %w", n, err)
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("jepsen: fault request to n%d: code %d %s", n, resp.Code, resp.Remark)
	}
	return nil
}

func (e *env) clock(ctx context.Context, ev history.Event) (*fault, error) {
	n, what := e.pick(e.rng.IntN(2) == 0)
	rates := []float64{0.25, 0.5, 2, 4}
	fr := cluster.FaultRequest{TickRate: rates[e.rng.IntN(len(rates))], ClockOffsetMillis: int64(e.rng.IntN(120_000) - 60_000)}
	if err := e.faultReq(ctx, n, fr); err != nil {
		return nil, err
	}
	ev.Nodes = []int{n}
	ev.Description = fmt.Sprintf("skew %s n%d: tick rate ×%g, clock %+ds", what, n, fr.TickRate, fr.ClockOffsetMillis/1000)
	return &fault{ev: ev, heal: func() error {
		if !e.g.Node(uint64(n)).Running() {
			return nil // restarted nodes start unskewed
		}
		return e.faultReq(ctx, n, cluster.FaultRequest{Reset: true})
	}}, nil
}

// membership removes a follower from the group and adds it back as a
// new, empty member (rejoin).
func (e *env) membership(ctx context.Context, ev history.Event) (*fault, error) {
	n := e.follower()
	if n == 0 {
		return nil, errors.New("jepsen: membership: no running follower")
	}
	e.stopping(n)
	ev.Nodes = []int{n}
	ev.Description = fmt.Sprintf("remove n%d from the group, wipe it, add it back empty", n)
	if err := e.rejoin(ctx, n); err != nil {
		return nil, err
	}
	return &fault{ev: ev, heal: func() error { return nil }}, nil
}

// rejoin replaces node n by an empty member with the same id, the way an
// operator replaces a node whose disk was lost or corrupted: remove it from
// the group (raft must forget its progress: a member may never lose its
// log), wipe its data, add it back and start it with --join so that the
// leader refills it. The caller has marked n's process (stopping).
func (e *env) rejoin(ctx context.Context, n int) error {
	node := e.g.Node(uint64(n))
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := retry(rctx, 30*time.Second, func(ctx context.Context) error { return e.members.RemoveNode(ctx, uint64(n)) }); err != nil {
		return fmt.Errorf("jepsen: remove n%d: %w", n, err)
	}
	if node.Running() {
		_ = e.g.Kill(uint64(n))
	}
	if err := wipe(node.Dir); err != nil {
		return err
	}
	if err := retry(rctx, 30*time.Second, func(ctx context.Context) error {
		return e.members.AddNode(ctx, uint64(n), node.Client, node.Raft)
	}); err != nil {
		return fmt.Errorf("jepsen: add n%d back: %w", n, err)
	}
	e.mu.Lock()
	e.joinArgs[n] = true
	e.mu.Unlock()
	return e.g.StartNode(uint64(n))
}

// sum is the replica summary checksum of an entry: CRC-32C (table t) of
// its type, big-endian, then its body.
func sum(t *crc32.Table, typ uint32, body []byte) uint32 {
	h := crc32.Update(0, t, []byte{byte(typ >> 24), byte(typ >> 16), byte(typ >> 8), byte(typ)})
	return crc32.Update(h, t, body)
}
