package checker

import (
	"os"
	"testing"
	"time"
)

func TestTmpStress(t *testing.T) {
	run := genRun(genConfig{seed: 1, ops: 20000, queues: 4, producers: 12, infoFrac: 0.03, failFrac: 0.01})
	start := time.Now()
	res := Check(run, Options{VisualizePath: "/tmp/viz.html"})
	fi, _ := os.Stat("/tmp/viz.html")
	t.Logf("valid=%v in %s size %d", res.Valid, time.Since(start), fi.Size())
	// without drains
	var ops = run.Ops[:0:0]
	for _, op := range run.Ops {
		if !op.Drain {
			ops = append(ops, op)
		}
	}
	run.Ops = ops
	start = time.Now()
	res = Check(run, Options{Timeout: 5 * time.Second})
	t.Logf("no drain: lin %v in %s", res.Checkers[LinearizableChecker], time.Since(start))
}
