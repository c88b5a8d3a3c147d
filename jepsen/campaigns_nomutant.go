//go:build !mutant

package jepsen

// Campaigns returns no campaign: the mutants, and the campaigns that
// expose them, are compiled only with -tags mutant (campaigns_mutant.go).
func Campaigns() []Campaign { return nil }
