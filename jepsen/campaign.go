package jepsen

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// Scenario is one run of a campaign.
type Scenario struct {
	Name     string
	Workload string
	Nemesis  []string
	// TimeLimit overrides the campaign's time limit when set.
	TimeLimit time.Duration
}

// Scenarios returns a named scenario set: "ci" (short, every nemesis at
// least once), "standard" (every nemesis alone, combinations, every
// workload) or "soak" (standard, five times longer each).
func Scenarios(set string) ([]Scenario, error) {
	sc := func(w string, n ...string) Scenario {
		return Scenario{Name: w + "-" + strings.Join(n, "+"), Workload: w, Nemesis: n}
	}
	switch set {
	case "ci":
		return []Scenario{
			sc(WorkloadQueue, NemPartition, NemKill),
			sc(WorkloadRetries, NemPowerLoss, NemPowerLossElection, NemPartitionLeader),
			sc(WorkloadLog, NemCorrupt, NemPause, NemClock),
			sc(WorkloadOffsets, NemKillLeader, NemDelay, NemLoss),
			// The delay workload runs the queue workload's clients too.
			sc(WorkloadDelay, NemMembership, NemPartition),
			sc(WorkloadBatched, NemKill, NemPartitionLeader, NemHostile),
			sc(WorkloadGroup, NemKillLeader, NemPartition),
			sc(WorkloadTransaction, NemKillLeader, NemPause),
			sc(WorkloadRetry, NemKill, NemPartitionLeader),
			sc(WorkloadPop, NemKillLeader, NemPartition, NemPause),
			sc(WorkloadQueue, NemDiskFull),
		}, nil
	case "standard", "soak":
		out := []Scenario{
			sc(WorkloadQueue, NemPartition),
			sc(WorkloadQueue, NemKill),
			sc(WorkloadQueue, NemPause),
			sc(WorkloadQueue, NemPowerLoss),
			sc(WorkloadQueue, NemPowerLossElection),
			sc(WorkloadQueue, NemCorrupt),
			sc(WorkloadLog, NemClock),
			sc(WorkloadLog, NemDelay, NemLoss),
			sc(WorkloadQueue, NemMembership),
			sc(WorkloadQueue, NemHostile),
			sc(WorkloadBatched, NemHostile, NemKillLeader),
			sc(WorkloadQueue, NemDiskFull),
			sc(WorkloadBatched, NemDiskFull, NemKillLeader, NemPartition),
			sc(WorkloadRetries, NemKillLeader, NemPartitionLeader),
			sc(WorkloadBatched, NemKillLeader, NemPartitionLeader),
			sc(WorkloadOffsets, NemKill, NemPause),
			sc(WorkloadGroup, NemKill, NemPartition),
			sc(WorkloadGroup, NemPause, NemDelay, NemLoss),
			sc(WorkloadDelay, NemKillLeader, NemPartition),
			sc(WorkloadTransaction, NemKillLeader, NemPause),
			sc(WorkloadRetry, NemKill, NemPartition),
			sc(WorkloadPop, NemKillLeader, NemPartitionLeader),
			sc(WorkloadPop, NemClock, NemDelay, NemLoss),
			sc(WorkloadLog, NemPartition, NemKill, NemPause, NemClock),
			sc(WorkloadQueue, NemPartition, NemKill, NemPause, NemPowerLoss, NemCorrupt, NemClock, NemDelay, NemLoss, NemMembership, NemHostile),
			// Every nemesis at once for the workloads of delayed, timer,
			// retried, transactional and popped messages.
			sc(WorkloadDelay, NemPartition, NemKill, NemPause, NemPowerLoss, NemCorrupt, NemClock, NemDelay, NemLoss, NemMembership, NemHostile, NemPartitionLeader, NemKillLeader),
			sc(WorkloadTransaction, NemPartition, NemKill, NemPause, NemPowerLoss, NemCorrupt, NemClock, NemDelay, NemLoss, NemMembership, NemHostile, NemPartitionLeader, NemKillLeader),
			sc(WorkloadRetry, NemPartition, NemKill, NemPause, NemPowerLoss, NemCorrupt, NemClock, NemDelay, NemLoss, NemMembership, NemHostile, NemPartitionLeader, NemKillLeader),
			sc(WorkloadPop, NemPartition, NemKill, NemPause, NemPowerLoss, NemCorrupt, NemClock, NemDelay, NemLoss, NemMembership, NemHostile, NemPartitionLeader, NemKillLeader),
		}
		if set == "soak" {
			for i := range out {
				out[i].TimeLimit = 5 * time.Minute
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("jepsen: unknown scenario set %q (known: ci, standard, soak)", set)
}

// ScenarioResult is one scenario's outcome.
type ScenarioResult struct {
	Scenario Scenario
	Dir      string
	Results  history.Results
	Err      error
	Took     time.Duration
}

// CampaignSummary is every scenario's outcome.
type CampaignSummary struct {
	Results []ScenarioResult
	Took    time.Duration
}

// Valid reports whether every scenario ran and was valid.
func (s CampaignSummary) Valid() bool {
	for _, r := range s.Results {
		if r.Err != nil || !r.Results.Valid {
			return false
		}
	}
	return len(s.Results) > 0
}

// RunCampaign runs the scenarios one after another, each in its own
// directory under base.Out with seed base.Seed+i. It stops early only when
// ctx ends; the error is the first harness failure.
func RunCampaign(ctx context.Context, base Options, scs []Scenario) (CampaignSummary, error) {
	start := time.Now()
	var sum CampaignSummary
	var first error
	for i, sc := range scs {
		if ctx.Err() != nil {
			break
		}
		o := base
		o.Workload, o.Nemesis, o.Seed = sc.Workload, sc.Nemesis, base.Seed+int64(i)
		if sc.TimeLimit > 0 {
			o.TimeLimit = sc.TimeLimit
		}
		o.Out = filepath.Join(base.Out, fmt.Sprintf("%02d-%s", i+1, sc.Name))
		o.BasePort = base.BasePort
		fmt.Fprintf(base.Progress, "campaign: scenario %d/%d %s (seed %d, %v)\n", i+1, len(scs), sc.Name, o.Seed, o.TimeLimit)
		t0 := time.Now()
		res, err := Run(ctx, o)
		r := ScenarioResult{Scenario: sc, Dir: o.Out, Results: res, Err: err, Took: time.Since(t0)}
		sum.Results = append(sum.Results, r)
		switch {
		case err != nil:
			fmt.Fprintf(base.Progress, "campaign:   harness failure: %v\n", err)
			if first == nil {
				first = err
			}
		case !res.Valid:
			fmt.Fprintf(base.Progress, "campaign:   INVALID: %s\n", strings.Join(invalidCheckers(res), ", "))
			// The run directory may not outlive the machine (a CI run):
			// the first violations go to the log as well.
			for _, n := range invalidCheckers(res) {
				c := res.Checkers[n]
				for _, e := range c.Errors[:min(len(c.Errors), 5)] {
					fmt.Fprintf(base.Progress, "campaign:     %s: %s\n", n, e)
				}
				fmt.Fprintf(base.Progress, "campaign:     %s counts: %v\n", n, c.Counts)
			}
		default:
			fmt.Fprintf(base.Progress, "campaign:   valid (%d ops, %d faults)\n", totalOps(res), totalFaults(res))
		}
	}
	sum.Took = time.Since(start)
	return sum, first
}

func invalidCheckers(r history.Results) []string {
	var out []string
	for n, c := range r.Checkers {
		if !c.Valid {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func totalFaults(r history.Results) int64 { return sumMap(r.Faults) }

// WriteCampaignTable prints the campaign as a Markdown table with totals:
// operations checked, faults by kind, lost/duplicated/unexpected.
func WriteCampaignTable(w io.Writer, s CampaignSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| scenario\t| verdict\t| ops\t| acked sends\t| faults\t| lost\t| duplicated\t| unexpected\t| took\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
	faults := map[string]int64{}
	var ops, acked, lost, dup, unexp int64
	for _, r := range s.Results {
		verdict := "valid"
		switch {
		case r.Err != nil:
			verdict = "HARNESS ERROR"
		case !r.Results.Valid:
			verdict = "INVALID: " + strings.Join(invalidCheckers(r.Results), ",")
		}
		tq := r.Results.Checkers["total-queue"].Counts
		n := totalOps(r.Results)
		ops += n
		acked += r.Results.Ops["send.ok"]
		lost += tq["lost"]
		dup += tq["duplicated"]
		unexp += tq["unexpected"]
		for k, v := range r.Results.Faults {
			faults[k] += v
		}
		fmt.Fprintf(tw, "| %s\t| %s\t| %d\t| %d\t| %d\t| %d\t| %d\t| %d\t| %v\t|\n", r.Scenario.Name, verdict, n,
			r.Results.Ops["send.ok"], totalFaults(r.Results), tq["lost"], tq["duplicated"], tq["unexpected"], r.Took.Round(time.Second))
	}
	fmt.Fprintf(tw, "| **total** (%d scenarios)\t| %s\t| %d\t| %d\t| %d\t| %d\t| %d\t| %d\t| %v\t|\n", len(s.Results),
		map[bool]string{true: "valid", false: "INVALID"}[s.Valid()], ops, acked, sumMap(faults), lost, dup, unexp, s.Took.Round(time.Second))
	tw.Flush()
	var kinds []string
	for k, v := range faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "\nfaults injected by kind: %s\n", strings.Join(kinds, ", "))
}

func sumMap(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
