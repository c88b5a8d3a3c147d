package checker

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/jepsen/history"
)

var allCheckers = []string{
	FinalLogChecker, LinearizableChecker, TotalQueueChecker, ReadConsistencyChecker,
	ConsumerChecker, ReplicaAgreementChecker, AvailabilityChecker, ConsumerGroupChecker,
	DelayChecker, TransactionChecker, RetryChecker, PopChecker,
}

func TestValidConcurrentHistory(t *testing.T) {
	b := validBuilder()
	res := check(t, &b.run)
	for _, name := range allCheckers {
		requireValid(t, res, name)
	}
	require.True(t, res.Valid)

	assert.Equal(t, int64(5), res.Ops["send.ok"])
	assert.Equal(t, int64(5), res.Ops["send.info"])
	assert.Equal(t, int64(1), res.Ops["send.fail"])
	assert.Equal(t, map[string]int64{"partition": 1, "kill": 1}, res.Faults)

	fl := res.Checkers[FinalLogChecker]
	assert.Equal(t, int64(6), fl.Counts["messages"])
	assert.Equal(t, int64(5), fl.Counts["queue-0"])
	assert.Equal(t, int64(3), fl.Counts["nodes-drained"])

	lin := res.Checkers[LinearizableChecker]
	assert.Equal(t, int64(2), lin.Counts["patched-in"], "p7-1 and the commit of 5")
	// p3-1 attempt 1 (owned by the acknowledged retry), both p5-1
	// attempts and p12-1
	assert.Equal(t, int64(4), lin.Counts["patched-dropped"])
	assert.Equal(t, int64(1), lin.Counts["widened"])

	tq := res.Checkers[TotalQueueChecker]
	assert.Equal(t, int64(11), tq.Counts["attempts"])
	assert.Equal(t, int64(5), tq.Counts["acknowledged"])
	assert.Equal(t, int64(6), tq.Counts["ok"])
	assert.Equal(t, int64(1), tq.Counts["recovered"])
	assert.Zero(t, tq.Counts["lost"])

	av := res.Checkers[AvailabilityChecker]
	assert.Equal(t, int64(510), av.Counts["heal-to-first-ok-ms"])
	assert.Equal(t, int64(454), av.Counts["ok-permille"]) // 5 of 11 sends
}

func TestLostAckedSend(t *testing.T) {
	b := validBuilder()
	b.send(13, 1, "p13-1", 10, 20, history.OK, 1) // never drained
	res := check(t, &b.run)
	tq := requireInvalid(t, res, TotalQueueChecker)
	assert.Equal(t, int64(1), tq.Counts["lost"])
	assert.Equal(t, int64(1), tq.Counts["lost-prefix"])
	assert.Contains(t, tq.Errors[0], "p13-1")
	rc := requireInvalid(t, res, ReadConsistencyChecker)
	assert.Contains(t, rc.Errors[0], "queue 1 offset 1: acked p13-1")
	// polls (drains too) may return a prefix, so porcupine alone does not
	// see a lost tail
	requireValid(t, res, LinearizableChecker)
}

func TestLostMiddle(t *testing.T) {
	b := validBuilder()
	b.send(13, 1, "p13-1", 10, 20, history.OK, 1)
	b.send(13, 1, "p13-2", 30, 40, history.OK, 2)
	b.send(13, 1, "p13-3", 50, 60, history.OK, 3)
	for i := range b.run.Ops {
		if op := &b.run.Ops[i]; op.Drain && op.Queue == 1 {
			op.Msgs = append(op.Msgs, history.Msg{Offset: 1, Value: "p13-1"}, history.Msg{Offset: 2, Value: "p13-3"})
			op.Next = 3
		}
	}
	res := check(t, &b.run)
	tq := requireInvalid(t, res, TotalQueueChecker)
	assert.Equal(t, int64(1), tq.Counts["lost-middle"])
	assert.Contains(t, strings.Join(tq.Errors, "\n"), "lost-middle: p13-2")
}

func TestDivergentDrain(t *testing.T) {
	b := validBuilder()
	i := b.find(t, func(op *history.Op) bool { return op.Drain && op.Node == 3 && op.Queue == 0 })
	b.run.Ops[i].Msgs[3].Value = "p5-1" // node 3 has the lost send at offset 3
	res := check(t, &b.run)
	fl := requireInvalid(t, res, FinalLogChecker)
	assert.Contains(t, fl.Errors[0], "queue 0 offset 3: node 3 drained p5-1 but node 1 drained p7-1")
	// the majority wins: the other checkers see the agreed log
	requireValid(t, res, TotalQueueChecker)
}

func TestShortDrain(t *testing.T) {
	b := validBuilder()
	i := b.find(t, func(op *history.Op) bool { return op.Drain && op.Node == 2 && op.Queue == 0 })
	b.run.Ops[i].Msgs = b.run.Ops[i].Msgs[:3]
	b.run.Ops[i].Next = 3
	res := check(t, &b.run)
	fl := requireInvalid(t, res, FinalLogChecker)
	assert.Contains(t, fl.Errors[0], "queue 0: node 2 drained 3 messages but node 1 drained 5")
	assert.Equal(t, int64(1), fl.Counts["short-drains"])
}

func TestDrainGapAndMissingNode(t *testing.T) {
	b := validBuilder()
	i := b.find(t, func(op *history.Op) bool { return op.Drain && op.Node == 1 && op.Queue == 0 })
	b.run.Ops[i].Msgs = append(b.run.Ops[i].Msgs[:2:2], b.run.Ops[i].Msgs[3:]...)
	j := b.find(t, func(op *history.Op) bool { return op.Drain && op.Node == 3 && op.Queue == 1 })
	b.run.Ops[j].Outcome = history.Info
	b.run.Ops[j].Msgs = nil
	res := check(t, &b.run)
	fl := requireInvalid(t, res, FinalLogChecker)
	all := strings.Join(fl.Errors, "\n")
	assert.Contains(t, all, "node 1 queue 0: drain is not contiguous: offsets 2..2 missing")
	assert.Contains(t, all, "node 3 queue 1: no successful drain read (1 failed)")
}

func TestDuplicateWithDedupe(t *testing.T) {
	b := validBuilder()
	// the retry of p3-1 was appended again at offset 5
	for i := range b.run.Ops {
		if op := &b.run.Ops[i]; op.Drain && op.Queue == 0 {
			op.Msgs = append(op.Msgs, history.Msg{Offset: 5, Value: "p3-1"})
			op.Next = 6
		}
	}
	res := check(t, &b.run)
	tq := requireInvalid(t, res, TotalQueueChecker)
	assert.Equal(t, int64(1), tq.Counts["duplicated"])
	assert.Contains(t, tq.Errors[0], "duplicated: p3-1 is in the final log 2 times (queue 0 offset 2, queue 0 offset 5)")

	// without dedupe a duplicate is counted, not a violation
	b.run.Meta.Dedupe = false
	res = check(t, &b.run)
	tq = requireValid(t, res, TotalQueueChecker)
	assert.Equal(t, int64(1), tq.Counts["duplicated"])
}

func TestDuplicateRetryWithoutDedupeIsLinearizable(t *testing.T) {
	b := validBuilder()
	b.run.Meta.Dedupe = false
	// without dedupe the retry of p3-1 appends again, at offset 5
	i := b.find(t, func(op *history.Op) bool { return op.Value == "p3-1" && op.Outcome == history.OK })
	b.run.Ops[i].Offset = 5
	for i := range b.run.Ops {
		if op := &b.run.Ops[i]; op.Drain && op.Queue == 0 {
			op.Msgs = append(op.Msgs, history.Msg{Offset: 5, Value: "p3-1"})
			op.Next = 6
		}
	}
	res := check(t, &b.run)
	for _, name := range allCheckers {
		requireValid(t, res, name)
	}
}

func TestReadOfValueNotInFinalLog(t *testing.T) {
	b := validBuilder()
	// a follower served p5-1 (which never committed) at offset 5
	b.poll(9, 0, 5, 104, 105, "p5-1")
	res := check(t, &b.run)
	rc := requireInvalid(t, res, ReadConsistencyChecker)
	assert.Equal(t, int64(1), rc.Counts["uncommitted-reads"])
	assert.Contains(t, rc.Errors[0], "queue 0 offset 5: poll by process 9 on node 2 at 0.105s read p5-1, which is not in the final log (read of uncommitted/lost data")
	requireInvalid(t, res, LinearizableChecker)
}

func TestInconsistentOffsetRead(t *testing.T) {
	b := validBuilder()
	b.poll(9, 0, 3, 104, 105, "p1-2") // p1-2 is at offset 4
	res := check(t, &b.run)
	rc := requireInvalid(t, res, ReadConsistencyChecker)
	assert.Equal(t, int64(1), rc.Counts["inconsistent-offsets"])
	assert.Contains(t, rc.Errors[0], "read p1-2 but final log has p7-1 (p1-2 is at queue 0 offset 4)")
}

func TestG1aReadOfFailedSend(t *testing.T) {
	b := validBuilder()
	b.poll(20, 1, 0, 100, 101, "p10-1", "p11-1")
	res := check(t, &b.run)
	rc := requireInvalid(t, res, ReadConsistencyChecker)
	assert.Equal(t, int64(1), rc.Counts["g1a"])
	assert.Contains(t, strings.Join(rc.Errors, "\n"), "read p11-1, whose send failed (G1a)")
}

func TestOffsetRegressionAfterRestart(t *testing.T) {
	b := validBuilder()
	// process 9 committed 5, then after a broker restart a new consumer
	// process reads back 3
	b.commit(9, 0, 110, 111, history.OK, 5)
	b.fetch(21, 0, 400, 401, history.OK, 3)
	b.poll(21, 0, 3, 402, 403, "p7-1", "p1-2")
	res := check(t, &b.run)
	c := requireInvalid(t, res, ConsumerChecker)
	assert.Equal(t, int64(1), c.Counts["regressions"])
	assert.Contains(t, c.Errors[0], `group "g" queue 0: fetch at 0.400s (process 21, node 1) returned 3 but commit 5 was acknowledged at 0.111s (process 9): offset regression`)
	requireInvalid(t, res, LinearizableChecker)
}

func TestUnexpectedCommittedOffset(t *testing.T) {
	b := validBuilder()
	b.fetch(21, 0, 400, 401, history.OK, 42)
	res := check(t, &b.run)
	c := requireInvalid(t, res, ConsumerChecker)
	assert.Equal(t, int64(1), c.Counts["unexpected-offsets"])
	assert.Contains(t, c.Errors[0], "returned 42, which no process tried to commit")
}

func TestPollSkip(t *testing.T) {
	b := validBuilder()
	// process 9 polled from 5 (next 5), then jumps to 6
	b.poll(9, 0, 6, 104, 105)
	res := check(t, &b.run)
	c := requireInvalid(t, res, ConsumerChecker)
	assert.Equal(t, int64(1), c.Counts["skips"])
	assert.Contains(t, c.Errors[0], "process 9 queue 0: poll at 0.104s (node 2) started at offset 6 but the poll at 0.102s said next 5: offsets 5..5 skipped (poll-skip)")
}

func TestPollAfterFetchMustStartAtCommitted(t *testing.T) {
	b := validBuilder()
	i := b.find(t, func(op *history.Op) bool { return op.Process == 9 && op.Kind == history.Poll })
	b.run.Ops[i].Offset, b.run.Ops[i].Next = 4, 4 // fetched 5 but polled from 4
	res := check(t, &b.run)
	c := requireInvalid(t, res, ConsumerChecker)
	assert.Equal(t, int64(1), c.Counts["nonmonotonic"])
	assert.Contains(t, c.Errors[0], "a fetch at 0.101s returned 5 (nonmonotonic-poll)")
}

func TestIntPollSkipAndNext(t *testing.T) {
	b := validBuilder()
	i := b.poll(9, 0, 0, 104, 105, "p1-1", "p2-1")
	b.run.Ops[i].Msgs[1].Offset = 2 // offset 1 skipped within the poll
	b.run.Ops[i].Next = 5           // and next is not one past the last
	i = b.find(t, func(op *history.Op) bool { return op.Process == 9 && op.Kind == history.Poll })
	b.run.Ops[i].Next = 0 // so that the poll from 0 follows next
	res := check(t, &b.run)
	c := requireInvalid(t, res, ConsumerChecker)
	all := strings.Join(c.Errors, "\n")
	assert.Contains(t, all, "returned offset 2 where 1 was due: offsets 1..1 skipped (int-poll-skip)")
	assert.Contains(t, all, "returned messages up to offset 2 but next 5")
}

func TestReplicaTermMismatch(t *testing.T) {
	b := validBuilder()
	b.run.Replicas[2].Entries[6].Term = 99 // index 7
	res := check(t, &b.run)
	c := requireInvalid(t, res, ReplicaAgreementChecker)
	assert.Equal(t, int64(1), c.Counts["mismatches"])
	assert.Contains(t, c.Errors[0], "index 7: node 1 has term 2 sum")
	assert.Contains(t, c.Errors[0], "but node 3 has term 99")

	// above the lowest commit index (9) entries may differ
	b = validBuilder()
	b.run.Replicas[2].Entries[9].Term = 99 // index 10
	res = check(t, &b.run)
	requireValid(t, res, ReplicaAgreementChecker)
}

func TestReplicaHole(t *testing.T) {
	b := validBuilder()
	es := b.run.Replicas[0].Entries
	b.run.Replicas[0].Entries = append(es[:3:3], es[4:]...) // index 4 missing
	res := check(t, &b.run)
	c := requireInvalid(t, res, ReplicaAgreementChecker)
	assert.Equal(t, int64(1), c.Counts["holes"])
	assert.Contains(t, c.Errors[0], "node 1 log: no entry at index 4, below the commit index 9 (hole)")
}

func TestReplicaProblemAndSingleReplica(t *testing.T) {
	b := validBuilder()
	b.run.Replicas[1].Problem = "corrupt entry at segment 3 offset 4096"
	res := check(t, &b.run)
	c := requireInvalid(t, res, ReplicaAgreementChecker)
	assert.Equal(t, "node 2 log: corrupt entry at segment 3 offset 4096", c.Errors[0])

	b = validBuilder()
	b.run.Replicas = b.run.Replicas[:1]
	res = check(t, &b.run)
	c = requireValid(t, res, ReplicaAgreementChecker)
	assert.Contains(t, c.Note, "only 1 replica")
}

func TestNoOkSendAfterHeal(t *testing.T) {
	b := validBuilder()
	b.run.Meta.Healed = 2500 * ms
	b.send(30, 1, "p30-1", 2600, 2700, history.Info, 0)
	res := check(t, &b.run)
	c := requireInvalid(t, res, AvailabilityChecker)
	assert.Contains(t, c.Errors[0], "no send was acknowledged after the faults healed at 2.500s (1 sends attempted after)")

	// too late is a violation too
	b = validBuilder()
	b.run.Meta.Healed = 2500 * ms
	b.send(30, 1, "p30-1", 2600, 2700, history.OK, 1)
	for i := range b.run.Ops {
		if op := &b.run.Ops[i]; op.Drain {
			op.Invoke, op.Complete = op.Invoke+20_000*ms, op.Complete+20_000*ms
			if op.Queue == 1 {
				op.Msgs = append(op.Msgs, history.Msg{Offset: 1, Value: "p30-1"})
				op.Next = 2
			}
		}
	}
	b.run.Ops[len(b.run.Ops)-1].Complete = 18_000 * ms
	res = Check(&b.run, Options{AvailabilityWindow: 15 * time.Second})
	c = requireInvalid(t, res, AvailabilityChecker)
	assert.Contains(t, c.Errors[0], "completed at 18.000s, 15.500s later (limit 15s)")
}

func TestRealTimeOrderViolation(t *testing.T) {
	// Send A is acknowledged at offset 5 and completes before send B is
	// invoked, but B got offset 3: the final log agrees with every ack, so
	// only the linearizability check can see it.
	b := newBuilder()
	b.run.Meta.Queues = 1
	vals := []string{"p1-1", "p2-1", "p3-1", "p9-1", "p4-1", "p5-1"}
	for o, v := range vals {
		if o == 3 {
			continue
		}
		b.send(o+1, 0, v, 0, 100, history.OK, int64(o))
	}
	b.send(9, 0, "p9-1", 200, 210, history.OK, 3) // B
	b.drainAll(0, 1000, vals...)
	res := check(t, &b.run)
	c := requireInvalid(t, res, LinearizableChecker)
	assert.Contains(t, c.Errors[0], "queue 0: not linearizable")
	assert.Contains(t, c.Errors[0], "offset 3 was acknowledged to send p9-1 → 3 [0.200s, 0.210s]")
	for _, name := range []string{FinalLogChecker, TotalQueueChecker, ReadConsistencyChecker, ConsumerChecker, AvailabilityChecker} {
		requireValid(t, res, name)
	}
}

func TestLinearizableTimeoutIsFailure(t *testing.T) {
	// Twenty unresolved indeterminate sends (no drain, so no final log to
	// patch them against) and a read that nothing explains: porcupine has
	// to try every order of the sends and cannot finish in time.
	b := newBuilder()
	b.run.Meta.Queues = 1
	for p := 1; p <= 20; p++ {
		b.send(p, 0, "v"+string(rune('a'+p)), 0, 10, history.Info, 0)
	}
	b.poll(30, 0, 0, 20, 30, "ghost")
	res := Check(&b.run, Options{Timeout: 100 * time.Millisecond})
	c := requireInvalid(t, res, LinearizableChecker)
	assert.Contains(t, c.Note, "timeout")
	assert.Contains(t, c.Errors[0], "timed out")
	assert.Equal(t, int64(20), c.Counts["unresolved"])
}

func TestPatch(t *testing.T) {
	b := validBuilder()
	final, errs := BuildFinalLog(b.run.Ops)
	require.Empty(t, errs)
	patched, st := Patch(b.run.Ops, final, true)
	assert.Equal(t, PatchStats{Kept: len(patched), PatchedIn: 2, Dropped: 4, Removed: 1, Widened: 1}, st)

	byValue := func(v string) []history.Op {
		var out []history.Op
		for _, op := range patched {
			if op.Kind == history.Send && op.Value == v {
				out = append(out, op)
			}
		}
		return out
	}
	// landed, observed by the poll that completed at 90 ms
	z := byValue("p7-1")
	require.Len(t, z, 1)
	assert.Equal(t, int64(3), z[0].Offset)
	assert.Equal(t, 90*ms, z[0].Complete)
	// retried: the acknowledged attempt owns the append and starts at
	// the first attempt
	x := byValue("p3-1")
	require.Len(t, x, 1)
	assert.Equal(t, history.OK, x[0].Outcome)
	assert.Equal(t, 8*ms, x[0].Invoke)
	// never landed: dropped
	assert.Empty(t, byValue("p5-1"))
	assert.Empty(t, byValue("p12-1"))
	assert.Empty(t, byValue("p11-1"), "failed sends are removed")
	// the indeterminate commit was observed by the fetch at 101 ms
	for _, op := range patched {
		if op.Kind == history.Commit && op.Outcome == history.Info {
			assert.Equal(t, 101*ms, op.Complete)
		}
	}

	// an indeterminate send nothing observed is patched in with Return +inf
	final.Queues[1] = append(final.Queues[1], "p12-1")
	final = NewFinalLog(final.Queues)
	patched, _ = Patch(b.run.Ops, final, true)
	d := byValue("p12-1")
	require.Len(t, d, 1)
	assert.Equal(t, int64(1), d[0].Offset)
	assert.Equal(t, int64(math.MaxInt64), d[0].Complete)

	// two indeterminate attempts and no ack: the first owns the append
	patched, _ = Patch([]history.Op{
		{ID: 1, Kind: history.Send, Value: "v", Attempt: 1, Invoke: 10, Complete: 20, Outcome: history.Info},
		{ID: 2, Kind: history.Send, Value: "v", Attempt: 2, Invoke: 30, Complete: 40, Outcome: history.Info},
	}, NewFinalLog(map[int][]string{0: {"v"}}), true)
	require.Len(t, patched, 1)
	assert.Equal(t, int64(1), patched[0].ID)

	// no final log: indeterminate sends stay open
	patched, st = Patch(b.run.Ops, nil, true)
	assert.Equal(t, 3, st.Unresolved) // p7-1, p12-1, the first p5-1
	patched, st = Patch(b.run.Ops, nil, false)
	assert.Equal(t, 5, st.Unresolved)
	for _, op := range patched {
		if op.Kind == history.Send && op.Outcome == history.Info {
			assert.Equal(t, int64(-1), op.Offset)
			assert.Equal(t, int64(math.MaxInt64), op.Complete)
		}
	}
}

func TestEmptyAndMissingInputs(t *testing.T) {
	for name, run := range map[string]*history.Run{
		"nil":   nil,
		"empty": {},
		"meta":  {Meta: history.Meta{Queues: 4, Nodes: 3, Healed: 5 * ms}},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "viz.html")
			res := Check(run, Options{VisualizePath: path})
			_, err := os.Stat(path)
			require.NoError(t, err)
			require.Len(t, res.Checkers, len(allCheckers))
			for _, n := range allCheckers {
				c := res.Checkers[n]
				assert.True(t, c.Valid, "%s: %v", n, c.Errors)
				assert.NotEmpty(t, c.Note, n)
			}
			assert.True(t, res.Valid)
		})
	}

	// operations but no drain: the final log is unknown
	b := validBuilder()
	var ops []history.Op
	for _, op := range b.run.Ops {
		if !op.Drain {
			ops = append(ops, op)
		}
	}
	b.run.Ops = ops
	b.run.Replicas = nil
	res := check(t, &b.run)
	fl := requireInvalid(t, res, FinalLogChecker)
	assert.Equal(t, "no drain reads: the final log is unknown", fl.Errors[0])
	assert.Contains(t, res.Checkers[TotalQueueChecker].Note, "skipped")
	assert.Contains(t, res.Checkers[ReplicaAgreementChecker].Note, "no replica logs")
	requireValid(t, res, ReadConsistencyChecker)
	requireValid(t, res, LinearizableChecker)
}

func TestMaxErrors(t *testing.T) {
	b := validBuilder()
	for i := 0; i < 10; i++ {
		b.poll(9, 0, 5, 104, 105, "ghost")
	}
	res := Check(&b.run, Options{MaxErrors: 3})
	rc := requireInvalid(t, res, ReadConsistencyChecker)
	assert.Len(t, rc.Errors, 3)
	assert.Contains(t, rc.Note, "more errors not listed")
}

func TestVisualizePath(t *testing.T) {
	b := validBuilder()
	path := filepath.Join(t.TempDir(), "linearizability.html")
	res := Check(&b.run, Options{VisualizePath: path})
	requireValid(t, res, LinearizableChecker)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	html := string(data)
	assert.True(t, strings.HasPrefix(strings.TrimSpace(html), "<!DOCTYPE html>") || strings.Contains(html, "<html"))
	assert.Contains(t, html, `"Tag":"nemesis"`)
	assert.Contains(t, html, "kill -9 n2")
	assert.Contains(t, html, "send p7-1 → 3 (indeterminate, patched)")

	// an illegal history is visualized too
	b.poll(9, 0, 5, 104, 105, "ghost")
	res = Check(&b.run, Options{VisualizePath: path})
	requireInvalid(t, res, LinearizableChecker)
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(data), "ghost")
}

func TestSummary(t *testing.T) {
	b := validBuilder()
	b.run.Replicas[2].Entries[6].Term = 99
	res := Check(&b.run, Options{})
	s := Summary(res)
	assert.True(t, strings.HasPrefix(s, "verdict: INVALID\n"))
	assert.Contains(t, s, "faults: kill=1 partition=1")
	assert.Regexp(t, `replica-agreement +FAIL .*mismatches=1`, s)
	assert.Regexp(t, `linearizable +ok `, s)
	assert.Contains(t, s, "- index 7: node 1 has term 2")

	s = Summary(Check(&validBuilder().run, Options{}))
	assert.True(t, strings.HasPrefix(s, "verdict: VALID\n"))
}

func TestGuardTurnsPanicIntoViolation(t *testing.T) {
	r := guard(func() history.CheckerResult { panic("boom") })
	assert.False(t, r.Valid)
	assert.Equal(t, []string{"checker panicked: boom"}, r.Errors)
	assert.Contains(t, r.Note, "internal error")
}

func TestFinalLogAccessors(t *testing.T) {
	f := NewFinalLog(map[int][]string{0: {"a", "", "b"}, 1: {"b"}})
	assert.Equal(t, int64(3), f.Size())
	assert.Equal(t, int64(3), f.Len(0))
	v, ok := f.At(0, 2)
	assert.True(t, ok)
	assert.Equal(t, "b", v)
	_, ok = f.At(0, 1) // a hole
	assert.False(t, ok)
	_, ok = f.At(0, 3)
	assert.False(t, ok)
	assert.Equal(t, []Loc{{Queue: 0, Offset: 2}, {Queue: 1, Offset: 0}}, f.Locations("b"))
	assert.Equal(t, []int64{0}, f.OffsetsIn(1, "b"))

	var nilLog *FinalLog
	assert.Zero(t, nilLog.Size())
	assert.Nil(t, nilLog.Locations("a"))
	_, ok = nilLog.At(0, 0)
	assert.False(t, ok)
}

func TestSendsHeldUnderHostileClients(t *testing.T) {
	hostile := history.Event{Kind: "hostile", Start: 3000 * ms, End: 8000 * ms, Nodes: []int{1}, Description: "hostile clients against leader n1"}

	// Sends attempted while hostile clients held the leader, none acked:
	// the group stalled under them.
	b := validBuilder()
	b.run.Events = append(b.run.Events, hostile)
	b.send(30, 1, "p30-1", 3500, 8000, history.Info, 0)
	b.send(31, 0, "p31-1", 4000, 7000, history.Fail, 0)
	c := requireInvalid(t, check(t, &b.run), AvailabilityChecker)
	assert.Contains(t, c.Errors[0], "no send was acknowledged from 5.000s to 8.000s while hostile clients held hostile clients against leader n1 (2 attempted)")

	// One ack in the window is enough; an ack before the settle time is not.
	b = validBuilder()
	b.run.Events = append(b.run.Events, hostile)
	b.send(30, 1, "p30-1", 3500, 4000, history.OK, 1)
	b.send(31, 0, "p31-1", 4000, 7000, history.Fail, 0)
	requireInvalid(t, check(t, &b.run), AvailabilityChecker)
	b.send(32, 0, "p32-1", 5500, 6000, history.OK, 1)
	c = requireValid(t, check(t, &b.run), AvailabilityChecker)
	assert.Equal(t, int64(1), c.Counts["ok-sends-under-hostile-clients"])

	// A window too short to judge, or with nothing attempted, is not judged.
	b = validBuilder()
	short := hostile
	short.End = short.Start + 3000*ms
	b.run.Events = append(b.run.Events, short)
	b.send(30, 1, "p30-1", 3500, 5900, history.Info, 0)
	requireValid(t, check(t, &b.run), AvailabilityChecker)
}

func TestHostileClientsMemoryBound(t *testing.T) {
	hostile := history.Event{Kind: "hostile", Start: 3000 * ms, End: 4000 * ms, Description: "hostile clients against node n2",
		Measures: map[string]int64{"rss-anon-before-bytes": 100 << 20, "rss-anon-peak-bytes": 300 << 20}}
	b := validBuilder()
	b.run.Events = append(b.run.Events, hostile)
	c := requireValid(t, check(t, &b.run), AvailabilityChecker)
	assert.Equal(t, int64(200), c.Counts["hostile-rss-growth-max-mib"])

	hostile.Measures["rss-anon-peak-bytes"] = 100<<20 + HostileMemoryBound + 1<<20
	b = validBuilder()
	b.run.Events = append(b.run.Events, hostile)
	c = requireInvalid(t, check(t, &b.run), AvailabilityChecker)
	assert.Contains(t, c.Errors[0], "grew the node's anonymous memory by 1025 MiB (bound 1024 MiB)")

	// A broker in power-loss mode holds its open files in that memory:
	// the growth is recorded, not judged.
	hostile.Measures["rss-anon-holds-files"] = 1
	b = validBuilder()
	b.run.Events = append(b.run.Events, hostile)
	c = requireValid(t, check(t, &b.run), AvailabilityChecker)
	assert.Equal(t, int64(1025), c.Counts["hostile-rss-growth-max-mib"])
}

func TestHostileStallsClosedByDeadline(t *testing.T) {
	hostile := history.Event{Kind: "hostile", Start: 3000 * ms, End: 8000 * ms, Description: "hostile clients against node n2",
		Measures: map[string]int64{"stalled-conns": 120, "stalled-closed-by-node": 0}}
	b := validBuilder()
	b.run.Events = append(b.run.Events, hostile)
	c := requireInvalid(t, check(t, &b.run), AvailabilityChecker)
	assert.Contains(t, c.Errors[0], "the node closed none of the 120 connections that stalled mid-frame")

	hostile.Measures["stalled-closed-by-node"] = 240
	b = validBuilder()
	b.run.Events = append(b.run.Events, hostile)
	c = requireValid(t, check(t, &b.run), AvailabilityChecker)
	assert.Equal(t, int64(240), c.Counts["hostile-stalled-closed"])
}
