package raftlog

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	pb "go.etcd.io/raft/v3/raftpb"
)

// The interaction tests are transcripts (testdata/*.txt) of a group of
// Cores, each run by the product's owner loop over a real Storage on a
// MemFS, driven one command at a time, in the style of etcd raft's
// interaction tests. Each command prints what the nodes did: every Work a
// Ready handed out (Core.Ready's split of the messages, the held
// commit-only appends, what was persisted and committed), messages
// delivered, reads answered, writes stalled on a full disk. Regenerate the
// expected output after a deliberate change with
//
//	go test ./raftlog -run TestInteraction -rewrite
//
// and read the diff: it is the change in behaviour.
//
// Commands (ids are node ids):
//
//	new-group size=3              a bootstrapped group (prints nothing)
//	campaign 1                    node 1 starts an election
//	propose 1 a b                 node 1 proposes entries "a" and "b"
//	tick 1 [n=k]                  node 1 ticks k times (default 1)
//	deliver [1 2]                 one round: the messages sent so far are
//	                              stepped into their recipients (all, or
//	                              only those to the listed nodes)
//	stabilize                     deliver and fire held-append timers
//	                              until nothing more is sent
//	fill 1 n=60 size=900          node 1 proposes 60 entries of 900 bytes,
//	                              each delivered (prints only last indexes)
//	compact 1                     node 1 drops its log up to its applied
//	                              index (Storage.Compact)
//	fire-held 1                   node 1's held-append timer fires
//	read-index 1                  node 1 starts a read-index request
//	cut 1 / heal 1                messages to and from node 1 are dropped,
//	                              or no longer
//	disk-full 1 on|off            node 1's writes fail for lack of space
//	retry 1                       node 1's stalled write is tried again
//	status 1                      node 1's raft state, applied data, held
//	                              appends

// TestInteraction runs every transcript in testdata.
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasSuffix(path, ".txt") {
			return
		}
		e := &interactionEnv{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

type interactionEnv struct {
	g *coreGroup
	// out collects what a command prints; seen is how many of each node's
	// Works have been printed.
	out  strings.Builder
	seen map[uint64]int
}

func (e *interactionEnv) printf(format string, args ...any) {
	fmt.Fprintf(&e.out, format, args...)
	e.out.WriteByte('\n')
}

// ids returns the node ids among d's arguments (keys that are numbers).
func ids(d *datadriven.TestData) []uint64 {
	var out []uint64
	for _, a := range d.CmdArgs {
		if id, err := strconv.ParseUint(a.Key, 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// words returns d's arguments that are neither ids nor key=value pairs.
func words(d *datadriven.TestData) []string {
	var out []string
	for _, a := range d.CmdArgs {
		if _, err := strconv.ParseUint(a.Key, 10, 64); err == nil || len(a.Vals) > 0 {
			continue
		}
		out = append(out, a.Key)
	}
	return out
}

func (e *interactionEnv) handle(t *testing.T, d *datadriven.TestData) string {
	e.out.Reset()
	if d.Cmd != "new-group" && e.g == nil {
		d.Fatalf(t, "no group yet: new-group first")
	}
	one := func() uint64 {
		is := ids(d)
		if len(is) != 1 {
			d.Fatalf(t, "%s needs one node id", d.Cmd)
		}
		if _, ok := e.g.nodes[is[0]]; !ok {
			d.Fatalf(t, "no node %d", is[0])
		}
		return is[0]
	}
	switch d.Cmd {
	case "new-group":
		size := 3
		if d.HasArg("size") {
			d.ScanArgs(t, "size", &size)
		}
		e.g = newCoreGroup(t, size)
		e.g.withSnapshots()
		e.g.outbox()
		e.seen = map[uint64]int{}
		for _, id := range e.g.ids {
			e.seen[id] = len(*e.g.works[id])
		}
	case "campaign":
		id := one()
		if err := e.g.core(id).Campaign(); err != nil {
			e.printf("%d: campaign: %v", id, err)
		}
		e.handleNode(t, id)
	case "propose":
		id := one()
		if e.g.nodes[id].stalled() {
			// Node refuses requests while it waits for space (loop.refuse).
			e.printf("%d: stalled: the proposal is refused", id)
			break
		}
		var ents []*pb.Entry
		for _, w := range words(d) {
			ents = append(ents, &pb.Entry{Data: []byte(w)})
		}
		if err := e.g.core(id).Propose(ents); err != nil {
			e.printf("%d: propose: %v", id, err)
		}
		e.handleNode(t, id)
	case "tick":
		id := one()
		k := 1
		if d.HasArg("n") {
			d.ScanArgs(t, "n", &k)
		}
		for range k {
			n := e.g.nodes[id]
			if n.stalled() {
				e.printf("%d: stalled: no tick", id)
				continue
			}
			n.loop.tick()
			e.handleNode(t, id)
		}
	case "deliver":
		e.deliver(t, ids(d))
	case "stabilize":
		e.stabilize(t, d)
	case "fill":
		// Silently: k proposals of size bytes, each stabilized.
		id := one()
		k, size := 1, 100
		if d.HasArg("n") {
			d.ScanArgs(t, "n", &k)
		}
		if d.HasArg("size") {
			d.ScanArgs(t, "size", &size)
		}
		for i := range k {
			data := fmt.Sprintf("f%d.", i)
			data += strings.Repeat("x", max(0, size-len(data)))
			if err := e.g.core(id).Propose([]*pb.Entry{{Data: []byte(data)}}); err != nil {
				d.Fatalf(t, "fill: %v", err)
			}
			e.handleNode(t, id)
			e.stabilize(t, d)
		}
		e.out.Reset()
		for _, n := range e.g.ids {
			last, _ := e.g.nodes[n].st.LastIndex()
			e.printf("%d: last index %d", n, last)
		}
	case "compact":
		id := one()
		n := e.g.nodes[id]
		at, err := n.st.Compact(n.applied)
		if err != nil {
			d.Fatalf(t, "compact: %v", err)
		}
		first, _ := n.st.FirstIndex()
		e.printf("%d: compacted through %d: the log starts at %d", id, at, first)
	case "fire-held":
		e.fireHeld(t, one())
	case "read-index":
		id := one()
		e.g.core(id).ReadIndex(func(index uint64) { e.printf("%d: read answered: index %d", id, index) })
		e.handleNode(t, id)
	case "cut", "heal":
		for _, id := range ids(d) {
			e.g.cut[id] = d.Cmd == "cut"
		}
		return "ok"
	case "disk-full":
		id := one()
		w := words(d)
		if len(w) != 1 || (w[0] != "on" && w[0] != "off") {
			d.Fatalf(t, "disk-full %d on|off", id)
		}
		e.g.full[id] = w[0] == "on"
		return "ok"
	case "retry":
		id := one()
		if !e.g.nodes[id].stalled() {
			d.Fatalf(t, "node %d is not stalled", id)
		}
		e.handleNode(t, id)
	case "status":
		e.status(one())
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	if e.out.Len() == 0 {
		return "ok"
	}
	return e.out.String()
}

// handleNode runs node id's owner loop over every Ready it has (or its
// stalled write) and prints the Works.
func (e *interactionEnv) handleNode(t *testing.T, id uint64) {
	t.Helper()
	n := e.g.nodes[id]
	wasStalled := n.stalled()
	if err := n.handle(0); err != nil {
		t.Fatalf("node %d: %v", id, err)
	}
	if wasStalled && !n.stalled() {
		e.printf("%d: the stalled write is persisted; the Ready goes on", id)
	}
	works := *e.g.works[id]
	for _, w := range works[e.seen[id]:] {
		e.printWork(id, w)
	}
	e.seen[id] = len(works)
	if held := n.core.Held(); len(held) > 0 && len(works) > 0 {
		var hs []string
		for _, to := range slices.Sorted(maps.Keys(held)) {
			hs = append(hs, fmt.Sprintf("%d:c%d", to, held[to]))
		}
		e.printf("%d: holds commit-only appends to %s", id, strings.Join(hs, " "))
	}
	if n.stalled() {
		e.printf("%d: stalled: %v (next try in %v)", id, n.stallErr, n.loop.stallWait())
	}
}

// deliver steps the messages sent so far (to the nodes in to, or all)
// into their recipients, in send order, and runs their loops.
func (e *interactionEnv) deliver(t *testing.T, to []uint64) {
	var keep, now []*pb.Message
	for _, m := range e.g.outbox() {
		if len(to) > 0 && !slices.Contains(to, m.GetTo()) {
			keep = append(keep, m)
			continue
		}
		now = append(now, m)
	}
	e.g.out = keep
	for _, m := range now {
		n, ok := e.g.nodes[m.GetTo()]
		switch {
		case !ok || e.g.cut[m.GetFrom()] || e.g.cut[m.GetTo()]:
			e.printf("dropped %s", msgString(m))
		case n.stalled():
			e.printf("%d: stalled: steps %s", m.GetTo(), msgString(m))
			if n.loop.core.StepWhileStalled(m) {
				e.printf("%d: stepped down while stalled", m.GetTo())
			}
		default:
			e.printf("recv %s", msgString(m))
			n.core.Step(m)
			e.handleNode(t, m.GetTo())
			if m.GetType() == pb.MessageType_MsgSnap {
				// The transport reports a snapshot it delivered.
				e.printf("%d: snapshot to %d reported delivered", m.GetFrom(), m.GetTo())
				e.g.core(m.GetFrom()).ReportSnapshot(m.GetTo(), false)
				e.handleNode(t, m.GetFrom())
			}
		}
	}
}

// stabilize delivers and fires held-append timers until nothing more is
// sent.
func (e *interactionEnv) stabilize(t *testing.T, d *datadriven.TestData) {
	for round := 0; ; round++ {
		if round == 100 {
			d.Fatalf(t, "the group kept sending for 100 rounds")
		}
		if len(e.g.out) > 0 {
			e.deliver(t, nil)
			continue
		}
		fired := false
		for _, id := range e.g.ids {
			if n := e.g.nodes[id]; n.heldAt >= 0 && !n.stalled() {
				e.fireHeld(t, id)
				fired = true
			}
		}
		if !fired {
			return
		}
	}
}

func (e *interactionEnv) fireHeld(t *testing.T, id uint64) {
	n := e.g.nodes[id]
	if n.heldAt < 0 {
		e.printf("%d: no held-append timer armed", id)
		return
	}
	before := len(e.g.out)
	n.fireHeld(n.heldAt)
	e.printf("%d: held-append timer fired", id)
	for _, m := range e.g.out[before:] {
		e.printf("  send %s", msgString(m))
	}
}

func (e *interactionEnv) printWork(id uint64, w Work) {
	e.printf("%d: Ready", id)
	for _, m := range w.Send {
		e.printf("  send %s", msgString(m))
	}
	if s := w.Snapshot; s != nil {
		e.printf("  snapshot i%d t%d", s.GetMetadata().GetIndex(), s.GetMetadata().GetTerm())
	}
	if hs := w.HardState; hs != nil {
		e.printf("  hardstate term=%d vote=%d commit=%d", hs.GetTerm(), hs.GetVote(), hs.GetCommit())
	}
	if len(w.Entries) > 0 {
		e.printf("  entries %s", entString(w.Entries))
	}
	for _, m := range w.After {
		e.printf("  after %s", msgString(m))
	}
	if w.Commit > 0 {
		e.printf("  commit %d (term %d): %s", w.Commit, w.CommitTerm, entString(w.Committed))
	}
}

func (e *interactionEnv) status(id uint64) {
	n := e.g.nodes[id]
	st := n.core.Status()
	e.printf("%d: %s term=%d vote=%d leader=%d commit=%d last=%d applied=%d voters=%v", id, st.Role, st.Term, st.Vote,
		st.Leader, st.Commit, st.LastIndex, n.applied, st.Voters)
	var data []string
	for _, i := range slices.Sorted(maps.Keys(n.data)) {
		data = append(data, fmt.Sprintf("%d:%s", i, short(n.data[i])))
	}
	e.printf("  applied data: [%s]", strings.Join(data, " "))
	if n.stalled() {
		e.printf("  stalled: %v", n.stallErr)
	}
}

// entString is a short form of entries: index/term and the data of
// normal ones (conf changes by type).
func entString(ents []*pb.Entry) string {
	var parts []string
	for _, e := range ents {
		s := fmt.Sprintf("%d/%d", e.GetIndex(), e.GetTerm())
		switch {
		case e.GetType() != pb.EntryType_EntryNormal:
			s += " " + strings.TrimPrefix(e.GetType().String(), "Entry")
		case len(e.GetData()) > 0:
			s += " " + strconv.Quote(short(string(e.GetData())))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
