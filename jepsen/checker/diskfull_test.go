package checker

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/raftmq/raftmq/jepsen/history"
)

func TestSendsHeldUnderFullDisk(t *testing.T) {
	full := history.Event{Kind: "disk-full", Start: 3000 * ms, End: 9000 * ms, Nodes: []int{1}, Description: "fill leader n1's disk at once"}

	// Sends attempted while the leader's disk was full, none acked after
	// the bound: the group stalled.
	b := validBuilder()
	b.run.Events = append(b.run.Events, full)
	b.send(30, 1, "p30-1", 3500, 9000, history.Info, 0)
	b.send(31, 0, "p31-1", 4000, 8000, history.Fail, 0)
	c := requireInvalid(t, check(t, &b.run), AvailabilityChecker)
	assert.Contains(t, c.Errors[0], "no send was acknowledged from 6.000s to 9.000s while fill leader n1's disk at once (2 attempted")

	// An ack within the window is enough.
	b = validBuilder()
	b.run.Events = append(b.run.Events, full)
	b.send(31, 0, "p31-1", 4000, 8000, history.Fail, 0)
	b.send(32, 0, "p32-1", 6500, 6600, history.OK, 1)
	c = requireValid(t, check(t, &b.run), AvailabilityChecker)
	assert.Equal(t, int64(1), c.Counts["ok-sends-with-a-full-disk"])

	// A window shorter than the bound plus half a second is not judged.
	b = validBuilder()
	short := full
	short.End = short.Start + 3400*ms
	b.run.Events = append(b.run.Events, short)
	b.send(30, 1, "p30-1", 3500, 6400, history.Info, 0)
	requireValid(t, check(t, &b.run), AvailabilityChecker)
}
