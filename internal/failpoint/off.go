//go:build !mutant

package failpoint

import "strings"

// Built is false: this build carries no failpoint and no fault endpoint;
// the hooks that test it are compiled out.
const Built = false

// Set is empty: this build has no failpoint to turn on. It has no
// methods, so product code can only ask On.
type Set struct{}

// On is false: every hook `if failpoint.On(...)` is compiled out.
func On(Set, Point) bool { return false }

// Names lists no failpoint: this build has none.
func Names() []string { return nil }

// Parse accepts only the empty list: this build has no failpoint to turn on.
func Parse(list string) (Set, error) {
	if strings.Trim(list, ", \t") != "" {
		return Set{}, ErrNotBuilt
	}
	return Set{}, nil
}
