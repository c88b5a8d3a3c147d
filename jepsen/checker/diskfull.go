package checker

import (
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// DiskFullRecovery bounds how long a group with one node's disk full may
// acknowledge no send: the full node refuses writes at once (its space is
// checked on the write path), a full leader hands leadership to a member
// with space (or, if its log append already found no space, stops
// heartbeating and loses it to an election), and clients retry elsewhere.
// The process test measured 0.1-2.1 s (TestDiskFullProcesses).
const DiskFullRecovery = 3 * time.Second

// checkHeldUnderFullDisk: a full disk on one node does not stop the
// group. During every disk-full fault, from DiskFullRecovery after it
// began to its end, at least one send is acknowledged if any was
// attempted; a fault shorter than DiskFullRecovery plus half a second is
// not judged.
func checkHeldUnderFullDisk(run *history.Run, r *report) {
	settle := int64(DiskFullRecovery)
	for _, ev := range run.Events {
		if ev.Kind != "disk-full" || ev.Error != "" || ev.End-ev.Start < settle+int64(500*time.Millisecond) {
			continue
		}
		from := ev.Start + settle
		attempted, acked := sendsInWindow(run, from, ev.End)
		r.add("disk-full-windows", 1)
		r.add("ok-sends-with-a-full-disk", acked)
		if attempted > 0 && acked == 0 {
			r.errorf("no send was acknowledged from %s to %s while %s (%d attempted; bound %v after the disk filled)",
				secs(from), secs(ev.End), ev.Description, attempted, DiskFullRecovery)
		}
	}
}
