//go:build mutant

package mutant

// Enabled is true: this build carries the mutants and the fault endpoint.
const Enabled = true
