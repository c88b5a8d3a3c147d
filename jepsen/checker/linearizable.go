package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/raftmq/raftmq/jepsen/history"
)

// checkLinearizable is the linearizable checker: it patches the history
// against the final log, checks it with porcupine on logModel and, if
// opts.VisualizePath is set, writes porcupine's visualization there.
func checkLinearizable(run *history.Run, final *FinalLog, opts Options) history.CheckerResult {
	r := newReport(opts.MaxErrors)
	if len(run.Ops) == 0 {
		r.notef("empty history")
		if opts.VisualizePath != "" {
			writeVisualization(r, run, nil, porcupine.LinearizationInfo{}, opts.VisualizePath)
		}
		return r.done()
	}
	patched, st := Patch(run.Ops, final, run.Meta.Dedupe)
	if final == nil {
		r.notef("no final log: %d indeterminate sends left unresolved", st.Unresolved)
	}
	ops := make([]porcupine.Operation, len(patched))
	for i := range patched {
		note := ""
		op := &patched[i]
		switch {
		case op.Kind == history.Send && op.Outcome == history.Info && op.Offset >= 0:
			note = "patched in from the final log"
		case op.Kind == history.Send && op.Outcome == history.Info:
			note = "unresolved: may or may not have been applied"
		case op.Kind == history.Commit && op.Outcome == history.Info:
			note = "patched in: a fetch returned its offset"
		}
		ops[i] = toOperation(op, note)
	}
	clients := remapClients(ops, run.Ops)

	result, info := porcupine.CheckOperationsVerbose(logModel, ops, opts.Timeout)

	r.set("ops", int64(len(ops)))
	r.set("patched-in", int64(st.PatchedIn))
	r.set("patched-dropped", int64(st.Dropped))
	r.set("removed", int64(st.Removed))
	if st.Unresolved > 0 {
		r.set("unresolved", int64(st.Unresolved))
	}
	if st.Widened > 0 {
		r.set("widened", int64(st.Widened))
	}
	parts, keys := partition(ops)
	r.set("partitions", int64(len(parts)))

	switch result {
	case porcupine.Ok:
	case porcupine.Unknown:
		r.errorf("linearizability check timed out after %s", opts.Timeout)
		r.notef("porcupine returned Unknown (timeout): treated as a failure")
	case porcupine.Illegal:
		explainIllegal(r, parts, keys, info)
	default:
		r.errorf("porcupine returned %q", result)
	}

	if opts.VisualizePath != "" {
		writeVisualization(r, run, clients, info, opts.VisualizePath)
	}
	return r.done()
}

// remapClients renumbers the operations' client ids (processes) densely
// from 0, as porcupine's visualization expects, and returns the mapping
// from process to client id (covering every process of all, so
// annotations of operations left out can use it too).
func remapClients(ops []porcupine.Operation, all []history.Op) map[int]int {
	set := make(map[int]bool)
	for i := range all {
		set[all[i].Process] = true
	}
	procs := make([]int, 0, len(set))
	for p := range set {
		procs = append(procs, p)
	}
	sort.Ints(procs)
	m := make(map[int]int, len(procs))
	for i, p := range procs {
		m[p] = i
	}
	for i := range ops {
		ops[i].ClientId = m[ops[i].ClientId]
	}
	return m
}

// explainIllegal reports, for each partition that has no linearization,
// the longest linearizable prefix porcupine found and the operations that
// could not be linearized after it.
func explainIllegal(r *report, parts [][]porcupine.Operation, keys []partKey, info porcupine.LinearizationInfo) {
	partials := info.PartialLinearizationsOperations()
	found := 0
	for p := range parts {
		if p >= len(partials) {
			break
		}
		var longest []porcupine.Operation
		for _, l := range partials[p] {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(parts[p]) {
			continue
		}
		found++
		r.add("illegal-partitions", 1)
		in := make(map[*opMeta]bool, len(longest))
		for _, op := range longest {
			in[op.Metadata.(*opMeta)] = true
		}
		var rest []porcupine.Operation
		minReturn := int64(1<<63 - 1)
		for _, op := range parts[p] {
			if !in[op.Metadata.(*opMeta)] {
				rest = append(rest, op)
				minReturn = min(minReturn, op.Return)
			}
		}
		// the candidates for the next linearization point: invoked before
		// any remaining operation returned
		var next []string
		sort.Slice(rest, func(a, b int) bool { return rest[a].Call < rest[b].Call })
		for _, op := range rest {
			if op.Call <= minReturn && len(next) < 3 {
				next = append(next, describeTimed(op))
			}
		}
		last := "nothing"
		if len(longest) > 0 {
			last = describeTimed(longest[len(longest)-1])
		}
		r.errorf("%s: not linearizable: the longest linearizable prefix has %d of %d ops and ends with %s (state: %s); none of these can come next: %s%s",
			keys[p], len(longest), len(parts[p]), last, describeState(replay(longest)), strings.Join(next, "; "),
			hint(keys[p], replay(longest), rest))
	}
	if found == 0 {
		r.errorf("not linearizable")
	}
}

// writeVisualization writes porcupine's HTML visualization of info to
// path, with one annotation per nemesis event (tag "nemesis") and one per
// operation left out of the check (on its process's row).
func writeVisualization(r *report, run *history.Run, clients map[int]int, info porcupine.LinearizationInfo, path string) {
	end := maxTime(run)
	var anns []porcupine.Annotation
	for _, e := range run.Events {
		stop := e.End
		if stop <= 0 {
			stop = end
		}
		desc := e.Kind
		if len(e.Nodes) > 0 {
			desc += fmt.Sprintf(" %v", e.Nodes)
		}
		details := e.Description
		if e.Error != "" {
			details += " (error: " + e.Error + ")"
		}
		anns = append(anns, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           e.Start,
			End:             stop,
			Description:     desc,
			Details:         details,
			BackgroundColor: "#fbe3e0",
		})
	}
	for i := range run.Ops {
		op := &run.Ops[i]
		if op.Outcome == history.OK || (op.Outcome == history.Info && (op.Kind == history.Send || op.Kind == history.Commit)) {
			continue
		}
		c, ok := clients[op.Process]
		if !ok {
			continue
		}
		details := fmt.Sprintf("op %d, node %d, not checked", op.ID, op.Node)
		if op.Error != "" {
			details += ", error: " + op.Error
		}
		anns = append(anns, porcupine.Annotation{
			ClientId:        c,
			Start:           op.Invoke,
			End:             max(op.Complete, op.Invoke),
			Description:     fmt.Sprintf("%s %s", op.Kind, op.Outcome),
			Details:         details,
			BackgroundColor: "#e8e8e8",
		})
	}
	info.AddAnnotations(anns)
	if err := visualize(info, path); err != nil {
		r.notef("visualization not written: %v", err)
	}
}

// visualize writes the visualization, turning a panic of porcupine's
// replay into an error.
func visualize(info porcupine.LinearizationInfo, path string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("porcupine visualization panicked: %v", p)
		}
	}()
	return porcupine.VisualizePath(logModel, info, path)
}

// replay returns the model state after a linearization.
func replay(ops []porcupine.Operation) logState {
	s := initState()
	for _, op := range ops {
		_, next := step(s, op.Input, op.Output)
		s = next.(logState)
	}
	return s
}

// hint names, for a queue partition, the send acknowledged at the offset
// the stuck state needs next (often the culprit of a real-time order
// violation).
func hint(k partKey, s logState, rest []porcupine.Operation) string {
	if k.offsets {
		return ""
	}
	for _, op := range rest {
		in, out := op.Input.(*input), op.Output.(*output)
		if in.kind == sendOp && !out.unknown && out.offset == s.n {
			return fmt.Sprintf("; offset %d was acknowledged to %s", s.n, describeTimed(op))
		}
	}
	return fmt.Sprintf("; no remaining send claims offset %d", s.n)
}
