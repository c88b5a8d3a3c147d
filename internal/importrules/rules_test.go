package importrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// modulePath is the module whose packages the layout places.
const modulePath = "github.com/raftmq/raftmq"

// graph lists the module's packages with `go list` under the build tags
// and returns each with its non-test imports inside the module.
func graph(t *testing.T, tags string) []pkg {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-e", "-tags", tags, "-json=ImportPath,Imports,Error", "./...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		require.Nil(t, p.Error, "go list: %s", p.ImportPath)
		rel, ok := inModule(p.ImportPath)
		require.True(t, ok, "go list ./... listed %s", p.ImportPath)
		q := pkg{path: rel}
		for _, imp := range p.Imports {
			if r, ok := inModule(imp); ok {
				q.imports = append(q.imports, r)
			}
		}
		pkgs = append(pkgs, q)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

// inModule returns path relative to the module, if it is inside it.
func inModule(path string) (string, bool) {
	if path == modulePath {
		return ".", true
	}
	return strings.CutPrefix(path, modulePath+"/")
}

// The tree keeps the rules, in the default build and in the self-test's
// (the mutant tag compiles other files).
func TestTreeKeepsTheRules(t *testing.T) {
	for _, tags := range []string{"", "mutant"} {
		t.Run("tags="+tags, func(t *testing.T) {
			pkgs := graph(t, tags)
			require.Greater(t, len(pkgs), 30, "the module lists too few packages to be this tree")
			if v := check(layout, pkgs); len(v) > 0 {
				t.Errorf("the import rules are broken:\n%s", strings.Join(v, "\n"))
			}
		})
	}
}

// The checker itself, on a small house: a clean graph passes, and every
// kind of breach planted in it is found and names its offender.
func TestCheckerFindsPlantedBreaches(t *testing.T) {
	floors := func(extra ...floor) []floor {
		return append([]floor{
			{"ground", product, []string{"message"}},
			{"store", product, []string{"store", "wire"}},
			{"lab", lab, []string{"harness"}},
			{"top", binary, []string{"cmd"}},
		}, extra...)
	}
	// graph returns the clean graph with the imports added.
	graph := func(add ...pkg) []pkg {
		g := []pkg{
			{"message", nil},
			{"wire", []string{"message"}},
			{"store", []string{"message", "wire"}}, // the same floor is allowed
			{"harness", []string{"store"}},
			{"cmd", []string{"store", "harness"}},
		}
	next:
		for _, a := range add {
			for i := range g {
				if g[i].path == a.path {
					g[i].imports = append(g[i].imports, a.imports...)
					continue next
				}
			}
			g = append(g, a)
		}
		return g
	}
	require.Empty(t, check(floors(), graph()))

	for _, c := range []struct {
		name   string
		floors []floor
		pkgs   []pkg
		want   string
	}{
		{"product imports lab", floors(), graph(pkg{"store", []string{"harness"}}),
			"store (floor 2, product, store) imports the lab package harness (floor 3, lab, lab): the product never links the lab"},
		{"upward import", floors(), graph(pkg{"message", []string{"store"}}),
			"message (floor 1, product, ground) imports store, a floor higher (floor 2, product, store): imports point down"},
		{"lab imports the binary", floors(), graph(pkg{"harness", []string{"cmd"}}),
			"harness (floor 3, lab, lab) imports cmd, a floor higher (floor 4, binary, top): imports point down"},
		{"package on no floor", floors(), graph(pkg{"newpkg", []string{"message"}}),
			"newpkg stands on no floor: add it to the layout in internal/importrules/layout_test.go"},
		{"product package only tests use", floors(floor{"attic", product, []string{"helper"}}), graph(pkg{"helper", []string{"message"}}),
			"helper (floor 5, product, attic) is linked by no binary: only tests use it, so it belongs to the lab"},
		{"floor names a package that is gone", floors(floor{"attic", lab, []string{"gone"}}), graph(),
			"gone is on a floor (floor 5, lab, attic) but is no package of the module: remove it from the layout"},
		{"package on two floors", floors(floor{"attic", lab, []string{"wire"}}), graph(),
			"wire stands on two floors: floor 2, product, store and floor 5, lab, attic"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, []string{c.want}, check(c.floors, c.pkgs))
		})
	}
}

// docs/layout.md's table of floors says what the layout says: every
// package on its floor with its kind, none left out, none added.
func TestLayoutDocMatches(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "docs", "layout.md"))
	require.NoError(t, err)
	row := regexp.MustCompile("^\\| ([0-9]+) \\| (product|lab|binary) \\| `([^`]+)` \\|")
	inDoc := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			require.NotContains(t, inDoc, m[3], "docs/layout.md lists %s twice", m[3])
			inDoc[m[3]] = m[1] + " " + m[2]
		}
	}
	inLayout := map[string]string{}
	for i, f := range layout {
		for _, p := range f.pkgs {
			inLayout[p] = fmt.Sprintf("%d %s", i+1, f.kind)
		}
	}
	require.Equal(t, inLayout, inDoc, "docs/layout.md's floors differ from layout_test.go's")
}
