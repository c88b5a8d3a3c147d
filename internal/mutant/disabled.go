//go:build !mutant

package mutant

import "strings"

// Enabled is false: this build carries no mutant and no fault endpoint;
// the branches that test it are compiled out.
const Enabled = false

// Names lists no mutant: this build has none.
func Names() []string { return nil }

// Parse accepts only the empty list: this build has no mutant to turn on.
func Parse(list string) (Set, error) {
	if strings.Trim(list, ", \t") != "" {
		return Set{}, ErrNotBuilt
	}
	return Set{}, nil
}
