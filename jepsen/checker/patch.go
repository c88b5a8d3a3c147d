package checker

import (
	"math"
	"sort"

	"github.com/raftmq/raftmq/jepsen/history"
)

// PatchStats counts what Patch did.
type PatchStats struct {
	// Kept is the number of operations left for the linearizability check.
	Kept int
	// PatchedIn counts indeterminate sends (and commits) resolved as
	// applied: a send whose value is in the final log, a commit whose
	// offset a fetch returned.
	PatchedIn int
	// Dropped counts indeterminate sends and commits resolved as never
	// applied, and retried attempts whose append another attempt of the
	// same value owns.
	Dropped int
	// Removed counts failed operations and indeterminate polls and
	// fetches, which have no effect to check.
	Removed int
	// Unresolved counts indeterminate sends kept open because there is no
	// final log: they may land anywhere after their invocation.
	Unresolved int
	// Widened counts acknowledged sends whose invocation was moved back to
	// an earlier indeterminate attempt of the same value (with dedupe the
	// append may have happened during that attempt).
	Widened int
}

// Patch resolves the indeterminate operations of ops against the final log,
// which keeps porcupine's search tractable (an unresolved indeterminate
// append can be linearized anywhere after its call, which makes the search
// exponential). It returns the operations to check, copied and adjusted:
//
//   - failed operations and indeterminate polls and fetches are removed;
//   - the attempts of one logical send (same queue and value) share the
//     value's offsets in the final log. Acknowledged attempts own their
//     acknowledged offsets (a second ack of the same offset, a dedupe
//     reply, is dropped). With dedupe, the owning acknowledged attempt is
//     invoked at the first indeterminate attempt before it, since the
//     append may have happened then. Offsets no acknowledged attempt owns
//     go to the indeterminate attempts in invocation order: such an
//     attempt gets Offset = the final offset and Complete = the earliest
//     completion of a poll that returned the value there (math.MaxInt64
//     if none did). Indeterminate attempts left over are dropped;
//   - with a nil final log indeterminate sends are kept unresolved:
//     Offset = -1 and Complete = math.MaxInt64. With dedupe only one
//     attempt of a value is kept: the first acknowledged one (invoked at
//     the first attempt), else the first indeterminate one;
//   - an indeterminate commit is dropped if no fetch of its group and
//     queue ever returned its offset (it was then unobservable); otherwise
//     it is kept with Complete = the earliest completion of such a fetch
//     if no other commit carried that offset, else math.MaxInt64.
//
// Kept indeterminate operations keep Outcome Info. The input is not
// modified.
func Patch(ops []history.Op, final *FinalLog, dedupe bool) ([]history.Op, PatchStats) {
	var st PatchStats
	out := make([]history.Op, 0, len(ops))
	idx := make([]int, 0, len(ops)) // ops kept as they are, by index

	type sendKey struct {
		queue int
		value string
	}
	type offKey struct {
		group string
		queue int
	}
	sends := make(map[sendKey][]int)
	var sendOrder []sendKey
	// earliest completion of an ok poll returning (queue, offset, value)
	type obsKey struct {
		queue  int
		offset int64
		value  string
	}
	observed := make(map[obsKey]int64)
	// per (group, queue): earliest completion of an ok fetch returning an
	// offset, and how many commits that were not failed carried it
	fetched := make(map[offKey]map[int64]int64)
	commits := make(map[offKey]map[int64]int)
	var infoCommits []int

	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case history.Send:
			if op.Outcome == history.Fail {
				st.Removed++
				continue
			}
			k := sendKey{op.Queue, op.Value}
			if _, ok := sends[k]; !ok {
				sendOrder = append(sendOrder, k)
			}
			sends[k] = append(sends[k], i)
		case history.Poll:
			if op.Outcome != history.OK {
				st.Removed++
				continue
			}
			for _, m := range op.Msgs {
				k := obsKey{op.Queue, m.Offset, m.Value}
				if t, ok := observed[k]; !ok || op.Complete < t {
					observed[k] = op.Complete
				}
			}
			idx = append(idx, i)
		case history.Commit:
			if op.Outcome == history.Fail {
				st.Removed++
				continue
			}
			k := offKey{op.Group, op.Queue}
			if commits[k] == nil {
				commits[k] = make(map[int64]int)
			}
			commits[k][op.Offset]++
			if op.Outcome == history.Info {
				infoCommits = append(infoCommits, i)
				continue
			}
			idx = append(idx, i)
		case history.Fetch:
			if op.Outcome != history.OK {
				st.Removed++
				continue
			}
			k := offKey{op.Group, op.Queue}
			if fetched[k] == nil {
				fetched[k] = make(map[int64]int64)
			}
			if t, ok := fetched[k][op.Offset]; !ok || op.Complete < t {
				fetched[k][op.Offset] = op.Complete
			}
			idx = append(idx, i)
		default:
			st.Removed++
		}
	}
	for _, i := range idx {
		out = append(out, ops[i])
	}

	// sends, one logical send at a time
	for _, k := range sendOrder {
		attempts := append([]int(nil), sends[k]...)
		sort.SliceStable(attempts, func(a, b int) bool { return ops[attempts[a]].Invoke < ops[attempts[b]].Invoke })
		if final == nil {
			// unresolved; with dedupe one value is appended at most once,
			// so an acknowledged attempt owns it, else the first
			// indeterminate attempt may
			owned := false
			for j, i := range attempts {
				op := ops[i]
				if op.Outcome == history.OK {
					if dedupe && j > 0 && !owned {
						op.Invoke = ops[attempts[0]].Invoke
						st.Widened++
					}
					if !dedupe || !owned {
						out = append(out, op)
					} else {
						st.Dropped++
					}
					owned = true
				}
			}
			for _, i := range attempts {
				op := ops[i]
				if op.Outcome != history.Info {
					continue
				}
				if dedupe && owned {
					st.Dropped++
					continue
				}
				op.Offset, op.Complete = -1, math.MaxInt64
				st.Unresolved++
				out = append(out, op)
				owned = owned || dedupe
			}
			continue
		}
		claimed := make(map[int64]bool)
		firstOpen := 0 // first attempt after the previous acknowledged one
		var infos []int
		for j, i := range attempts {
			op := ops[i]
			if op.Outcome != history.OK {
				infos = append(infos, i)
				continue
			}
			if claimed[op.Offset] {
				st.Dropped++ // a second acknowledgement of the same append
				firstOpen = j + 1
				continue
			}
			claimed[op.Offset] = true
			if dedupe && firstOpen < j {
				op.Invoke = ops[attempts[firstOpen]].Invoke
				st.Widened++
			}
			firstOpen = j + 1
			out = append(out, op)
		}
		var free []int64
		for _, o := range final.OffsetsIn(k.queue, k.value) {
			if !claimed[o] {
				free = append(free, o)
			}
		}
		for n, i := range infos {
			if n >= len(free) {
				st.Dropped++
				continue
			}
			op := ops[i]
			op.Offset = free[n]
			op.Complete = math.MaxInt64
			if t, ok := observed[obsKey{k.queue, free[n], k.value}]; ok {
				op.Complete = max(t, op.Invoke)
			}
			st.PatchedIn++
			out = append(out, op)
		}
	}

	// indeterminate commits
	for _, i := range infoCommits {
		op := ops[i]
		k := offKey{op.Group, op.Queue}
		t, seen := fetched[k][op.Offset]
		if !seen {
			st.Dropped++
			continue
		}
		op.Complete = math.MaxInt64
		if commits[k][op.Offset] == 1 {
			op.Complete = max(t, op.Invoke)
		}
		st.PatchedIn++
		out = append(out, op)
	}
	st.Kept = len(out)
	return out, st
}
