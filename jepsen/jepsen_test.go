package jepsen

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/failpoint"
)

func TestParseNemeses(t *testing.T) {
	got, err := ParseNemeses("kill, partition,kill")
	require.NoError(t, err)
	require.Equal(t, []string{NemKill, NemPartition}, got)

	got, err = ParseNemeses("all")
	require.NoError(t, err)
	require.ElementsMatch(t, generalNemeses(), got)
	require.Contains(t, got, NemHostile)
	require.NotContains(t, got, NemKillLeader, "all means the general kinds")

	got, err = ParseNemeses("none")
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = ParseNemeses("kill,meteor")
	require.ErrorContains(t, err, "meteor")
}

// The CI set must exercise every nemesis and every workload; the standard
// set every nemesis alone.
func TestScenarioSetsCoverEverything(t *testing.T) {
	ci, err := Scenarios("ci")
	require.NoError(t, err)
	seen := map[string]bool{}
	workloads := map[string]bool{}
	for _, s := range ci {
		for _, n := range s.Nemesis {
			seen[n] = true
		}
		workloads[s.Workload] = true
	}
	all, _ := ParseNemeses("all")
	for _, n := range all {
		require.True(t, seen[n], "ci set lacks nemesis %s", n)
	}
	for _, w := range Workloads() {
		require.True(t, workloads[w], "ci set lacks workload %s", w)
	}
	std, err := Scenarios("standard")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(std), 10)
	for _, n := range all {
		require.True(t, slices.ContainsFunc(std, func(s Scenario) bool { return len(s.Nemesis) == 1 && s.Nemesis[0] == n }) ||
			n == NemDelay || n == NemLoss, "standard set lacks %s alone", n)
	}
	_, err = Scenarios("nope")
	require.Error(t, err)
}

func TestEveryMutantHasACampaign(t *testing.T) {
	if !failpoint.Built {
		require.Empty(t, Campaigns(), "a default build has no mutant, so no campaign")
		t.Skip("the mutants and their campaigns are compiled only with -tags mutant")
	}
	var names []string
	for _, c := range Campaigns() {
		names = append(names, c.Mutant)
		_, err := failpoint.Parse(c.Mutant)
		require.NoError(t, err)
		require.Contains(t, Workloads(), c.Workload)
		for _, n := range c.Nemesis {
			require.Contains(t, Nemeses(), n)
		}
	}
	require.ElementsMatch(t, failpoint.Names(), names)
}

func TestSelftestPassed(t *testing.T) {
	c := Campaign{Mutant: "ack-before-commit", Workload: WorkloadQueue}
	rows := []SelftestRow{{Campaign: c, Mutant: c.Mutant, Runs: 10, Flagged: 9}, {Campaign: c, Runs: 10}}
	require.True(t, SelftestPassed(rows))
	rows[0].Flagged = 8
	require.False(t, SelftestPassed(rows), "8 of 10 is not enough")
	rows[0].Flagged = 10
	rows[1].Flagged = 1
	require.False(t, SelftestPassed(rows), "the correct build must never be flagged")
	rows[1].Flagged, rows[1].Errors = 0, 1
	require.False(t, SelftestPassed(rows), "nor fail to run")
	require.False(t, SelftestPassed(nil))
}
