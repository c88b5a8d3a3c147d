package jepsen

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The power-loss-election nemesis needs the brokers in power-loss mode
// (without it kill -9 loses nothing), and is a targeted kind, not in
// "all".
func TestPowerLossElectionNemesis(t *testing.T) {
	got, err := ParseNemeses("power-loss-election")
	require.NoError(t, err)
	require.Equal(t, []string{NemPowerLossElection}, got)
	require.True(t, powerLossMode(got))
	require.True(t, powerLossMode([]string{NemKill, NemPowerLoss}))
	require.False(t, powerLossMode([]string{NemKill, NemPartition}))
	all, err := ParseNemeses("all")
	require.NoError(t, err)
	require.NotContains(t, all, NemPowerLossElection)
	ci, err := Scenarios("ci")
	require.NoError(t, err)
	found := false
	for _, s := range ci {
		for _, n := range s.Nemesis {
			found = found || n == NemPowerLossElection
		}
	}
	require.True(t, found, "the ci set must run the correct build under power-loss-election")
}
