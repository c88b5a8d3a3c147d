package checker

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/raftmq/raftmq/jepsen/history"
)

// opKind is the type of a porcupine operation of the log model.
type opKind uint8

const (
	sendOp opKind = iota
	pollOp
	commitOp
	fetchOp
)

// input is the porcupine Input of one operation.
type input struct {
	kind  opKind
	queue int
	group string // commit, fetch
	value string // send
	// offset: a poll's start offset, a commit's offset.
	offset int64
}

// output is the porcupine Output of one operation.
type output struct {
	// offset: a send's acknowledged (or patched-in) offset, a fetch's
	// result.
	offset int64
	// unknown: an indeterminate send that could not be resolved against a
	// final log; the model appends it without checking an offset (its
	// Return is +inf, so "never happened" is covered too).
	unknown bool
	// patched: an indeterminate send or commit resolved as applied.
	patched bool
	msgs    []history.Msg // poll: as returned
	desc    []history.Msg // poll: sorted by offset, descending
}

// opMeta is the porcupine Metadata of one operation: the recorded op it
// came from and what patching did to it.
type opMeta struct {
	op   *history.Op
	note string
}

// entryNode is one message of a persistent (shared-suffix) queue log. The
// jump pointer (Myers' skew-binary ancestor links) finds the node at any
// offset in O(log n) steps without copying anything.
type entryNode struct {
	value  string
	offset int64
	prev   *entryNode
	jump   *entryNode
}

// logState is the model state of one partition. A queue partition uses the
// log (tail, n, h); a (group, queue) partition uses committed. States are
// values: Step never mutates one.
type logState struct {
	tail      *entryNode
	n         int64  // length of the log
	h         uint64 // rolling hash of the log's values, in order
	committed int64  // committed offset, -1: none
}

// initState is the empty log with no committed offset.
func initState() logState { return logState{committed: -1} }

// appendValue returns s with value appended.
func (s logState) appendValue(value string) logState {
	nd := &entryNode{value: value, offset: s.n, prev: s.tail}
	switch p := s.tail; {
	case p == nil:
		nd.jump = nd
	case p.jump.jump != nil && p.offset-p.jump.offset == p.jump.offset-p.jump.jump.offset:
		nd.jump = p.jump.jump
	default:
		nd.jump = p
	}
	s.tail = nd
	s.n++
	s.h = mixHash(s.h, value)
	return s
}

// find returns the ancestor of nd (or nd itself) at offset o, which must
// be in [0, nd.offset].
func find(nd *entryNode, o int64) *entryNode {
	for nd.offset > o {
		if nd.jump.offset >= o {
			nd = nd.jump
		} else {
			nd = nd.prev
		}
	}
	return nd
}

// holds reports whether every message of msgs (sorted by offset,
// descending) is in the log at its offset.
func (s logState) holds(desc []history.Msg) bool {
	cur := s.tail
	for _, m := range desc {
		if m.Offset < 0 || m.Offset >= s.n {
			return false
		}
		cur = find(cur, m.Offset)
		if cur.value != m.Value {
			return false
		}
	}
	return true
}

// mixHash folds value into the rolling hash h.
func mixHash(h uint64, value string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(value))
	x := h ^ f.Sum64()
	// splitmix64 finalizer
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// stateEqual compares two states exactly: lengths, hashes and committed
// offsets first, then the logs node by node back to their shared suffix.
func stateEqual(a, b logState) bool {
	if a.n != b.n || a.h != b.h || a.committed != b.committed {
		return false
	}
	p, q := a.tail, b.tail
	for p != q {
		if p == nil || q == nil || p.value != q.value {
			return false
		}
		p, q = p.prev, q.prev
	}
	return true
}

// stateHash is consistent with stateEqual.
func stateHash(s logState) uint64 {
	return s.h ^ uint64(s.n)<<1 ^ uint64(s.committed+1)*0x9e3779b97f4a7c15
}

// step is the model's transition function (pure).
func step(st, in, out any) (bool, any) {
	s := st.(logState)
	i := in.(*input)
	o := out.(*output)
	switch i.kind {
	case sendOp:
		if !o.unknown && o.offset != s.n {
			return false, s
		}
		return true, s.appendValue(i.value)
	case pollOp:
		return s.holds(o.desc), s
	case commitOp:
		s.committed = i.offset
		return true, s
	case fetchOp:
		return o.offset == s.committed, s
	}
	return false, s
}

// partKey identifies a porcupine partition: a queue's log, or one
// consumer group's committed offset of a queue.
type partKey struct {
	offsets bool
	group   string
	queue   int
}

// String names a partition in errors.
func (k partKey) String() string {
	if k.offsets {
		return fmt.Sprintf("group %q queue %d offsets", k.group, k.queue)
	}
	return fmt.Sprintf("queue %d", k.queue)
}

// keyOf is the partition of an input.
func keyOf(i *input) partKey {
	if i.kind == commitOp || i.kind == fetchOp {
		return partKey{offsets: true, group: i.group, queue: i.queue}
	}
	return partKey{queue: i.queue}
}

// partition splits a history by partKey, in a deterministic order (queues
// first, then offsets by group and queue).
func partition(ops []porcupine.Operation) ([][]porcupine.Operation, []partKey) {
	idx := make(map[partKey]int)
	var keys []partKey
	var parts [][]porcupine.Operation
	for _, op := range ops {
		k := keyOf(op.Input.(*input))
		i, ok := idx[k]
		if !ok {
			i = len(parts)
			idx[k] = i
			keys = append(keys, k)
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ka, kb := keys[order[a]], keys[order[b]]
		if ka.offsets != kb.offsets {
			return !ka.offsets
		}
		if ka.group != kb.group {
			return ka.group < kb.group
		}
		return ka.queue < kb.queue
	})
	sortedParts := make([][]porcupine.Operation, len(order))
	sortedKeys := make([]partKey, len(order))
	for i, j := range order {
		sortedParts[i], sortedKeys[i] = parts[j], keys[j]
	}
	return sortedParts, sortedKeys
}

// logModel is the porcupine model of the broker: per queue an append-only
// log with dense offsets (sends append at the next offset, polls return
// messages at their offsets, possibly only a prefix), and per (group,
// queue) a last-writer-wins committed offset (commit stores, fetch reads).
var logModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		parts, _ := partition(ops)
		return parts
	},
	Init:  func() any { return initState() },
	Step:  step,
	Equal: func(a, b any) bool { return stateEqual(a.(logState), b.(logState)) },
	Hash:  func(s any) uint64 { return stateHash(s.(logState)) },
	DescribeOperation: func(in, out any) string {
		return describeOp(in.(*input), out.(*output))
	},
	DescribeState: func(st any) string { return describeState(st.(logState)) },
	DescribeOperationMetadata: func(info any) string {
		m, ok := info.(*opMeta)
		if !ok || m == nil || m.op == nil {
			return ""
		}
		return describeMeta(m)
	},
}

// describeOp renders an operation for errors and the visualization.
func describeOp(i *input, o *output) string {
	switch i.kind {
	case sendOp:
		switch {
		case o.unknown:
			return fmt.Sprintf("send %s → ? (indeterminate)", i.value)
		case o.patched:
			return fmt.Sprintf("send %s → %d (indeterminate, patched)", i.value, o.offset)
		}
		return fmt.Sprintf("send %s → %d", i.value, o.offset)
	case pollOp:
		return fmt.Sprintf("poll from %d → %s", i.offset, describeMsgs(o.msgs))
	case commitOp:
		if o.patched {
			return fmt.Sprintf("commit %s %d (indeterminate)", i.group, i.offset)
		}
		return fmt.Sprintf("commit %s %d", i.group, i.offset)
	case fetchOp:
		return fmt.Sprintf("fetch %s → %d", i.group, o.offset)
	}
	return "?"
}

// describeMsgs renders messages as "[3:p1-2 4:p0-7]", eliding the middle
// of long lists.
func describeMsgs(msgs []history.Msg) string {
	const edge = 3
	parts := make([]string, 0, 2*edge+1)
	for j, m := range msgs {
		if len(msgs) > 2*edge+1 && j == edge {
			parts = append(parts, fmt.Sprintf("…(%d more)…", len(msgs)-2*edge))
		}
		if len(msgs) > 2*edge+1 && j >= edge && j < len(msgs)-edge {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d:%s", m.Offset, m.Value))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// describeState renders a state: the log's length and last values, and the
// committed offset if set.
func describeState(s logState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "len %d", s.n)
	var tail []string
	for nd := s.tail; nd != nil && len(tail) < 4; nd = nd.prev {
		tail = append(tail, fmt.Sprintf("%d:%s", nd.offset, nd.value))
	}
	if len(tail) > 0 {
		for l, r := 0, len(tail)-1; l < r; l, r = l+1, r-1 {
			tail[l], tail[r] = tail[r], tail[l]
		}
		if s.n > int64(len(tail)) {
			b.WriteString(" […")
		} else {
			b.WriteString(" [")
		}
		b.WriteString(strings.Join(tail, " ") + "]")
	}
	if s.committed >= 0 {
		fmt.Fprintf(&b, ", committed %d", s.committed)
	}
	return b.String()
}

// describeMeta renders an operation's origin: id, process, node, outcome,
// error and what patching did.
func describeMeta(m *opMeta) string {
	op := m.op
	s := fmt.Sprintf("op %d, process %d, node %d, %s", op.ID, op.Process, op.Node, op.Outcome)
	if op.Attempt > 1 {
		s += fmt.Sprintf(", attempt %d", op.Attempt)
	}
	if op.Drain {
		s += ", drain"
	}
	if op.Error != "" {
		s += ", error: " + op.Error
	}
	if m.note != "" {
		s += "; " + m.note
	}
	return s
}

// describeTimed renders an operation with its interval, for errors.
func describeTimed(op porcupine.Operation) string {
	s := fmt.Sprintf("%s [%s, %s]", describeOp(op.Input.(*input), op.Output.(*output)), secs(op.Call), secs(op.Return))
	if m, ok := op.Metadata.(*opMeta); ok && m != nil && m.op != nil {
		s += fmt.Sprintf(" (op %d, process %d, node %d)", m.op.ID, m.op.Process, m.op.Node)
	}
	return s
}

// toOperation converts a (patched) op to a porcupine operation.
func toOperation(op *history.Op, note string) porcupine.Operation {
	in := &input{queue: op.Queue, group: op.Group}
	out := &output{}
	switch op.Kind {
	case history.Send:
		in.kind, in.value = sendOp, op.Value
		out.offset = op.Offset
		if op.Outcome == history.Info {
			if op.Offset < 0 {
				out.unknown = true
			} else {
				out.patched = true
			}
		}
	case history.Poll:
		in.kind, in.offset = pollOp, op.Offset
		out.msgs = op.Msgs
		out.desc = append([]history.Msg(nil), op.Msgs...)
		sort.SliceStable(out.desc, func(a, b int) bool { return out.desc[a].Offset > out.desc[b].Offset })
	case history.Commit:
		in.kind, in.offset = commitOp, op.Offset
		out.patched = op.Outcome == history.Info
	case history.Fetch:
		in.kind = fetchOp
		out.offset = op.Offset
	}
	ret := op.Complete
	if ret < op.Invoke {
		ret = op.Invoke
	}
	return porcupine.Operation{
		ClientId: op.Process,
		Input:    in,
		Call:     op.Invoke,
		Output:   out,
		Return:   ret,
		Metadata: &opMeta{op: op, note: note},
	}
}
