package localgroup

import (
	"slices"
	"testing"
)

func TestShareCPUs(t *testing.T) {
	for _, tc := range []struct {
		env         []string
		nodes, cpus int
		want        string // the GOMAXPROCS entry expected last, "" for env unchanged
	}{
		{env: []string{"A=1"}, nodes: 3, cpus: 2, want: "GOMAXPROCS=1"},
		{env: []string{"A=1"}, nodes: 3, cpus: 4, want: "GOMAXPROCS=2"},
		{env: []string{"A=1"}, nodes: 3, cpus: 9, want: "GOMAXPROCS=3"},
		{env: []string{"A=1"}, nodes: 5, cpus: 1, want: "GOMAXPROCS=1"},
		{env: []string{"A=1"}, nodes: 0, cpus: 2, want: "GOMAXPROCS=2"},
		{env: []string{"GOMAXPROCS=7", "A=1"}, nodes: 3, cpus: 2},
		{env: []string{"A=1", "GOMAXPROCS=7"}, nodes: 3, cpus: 2},
	} {
		got := shareCPUs(slices.Clone(tc.env), tc.nodes, tc.cpus)
		if tc.want == "" {
			if !slices.Equal(got, tc.env) {
				t.Errorf("shareCPUs(%q, %d, %d) = %q, want the environment unchanged", tc.env, tc.nodes, tc.cpus, got)
			}
			continue
		}
		if want := append(slices.Clone(tc.env), tc.want); !slices.Equal(got, want) {
			t.Errorf("shareCPUs(%q, %d, %d) = %q, want %q", tc.env, tc.nodes, tc.cpus, got, want)
		}
	}
}
