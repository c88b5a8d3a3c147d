package importrules

import (
	"fmt"
	"slices"
)

// kind says what a floor holds.
type kind int

const (
	// product: what an operator runs and a user imports.
	product kind = iota
	// lab: the chaos harness, the benchmark, test helpers and checks; the
	// product never imports it.
	lab
	// binary: the command, which links product and lab.
	binary
)

func (k kind) String() string {
	switch k {
	case product:
		return "product"
	case lab:
		return "lab"
	default:
		return "binary"
	}
}

// floor is one group of packages; layout orders them from the ground up.
type floor struct {
	name string
	kind kind
	pkgs []string
}

// pkg is one package of the module and the packages of the module its
// non-test files import (paths inside the module).
type pkg struct {
	path    string
	imports []string
}

// place is where a package stands.
type place struct {
	level int // 1 = the ground
	floor floor
}

func (p place) String() string {
	return fmt.Sprintf("floor %d, %s, %s", p.level, p.floor.kind, p.floor.name)
}

// check returns every breach of the rules by the graph pkgs under floors,
// one line each, naming the package at fault: a package on no floor or on
// two, a floor naming a package that does not exist, a product package
// importing a lab package, an import to a higher floor, and a product
// package that no binary links (only tests use it: it is lab).
func check(floors []floor, pkgs []pkg) []string {
	var out []string
	at := map[string]place{}
	for i, f := range floors {
		for _, p := range f.pkgs {
			if prev, ok := at[p]; ok {
				out = append(out, fmt.Sprintf("%s stands on two floors: %s and %s", p, prev, place{i + 1, f}))
				continue
			}
			at[p] = place{i + 1, f}
		}
	}
	exists := map[string]bool{}
	for _, p := range pkgs {
		exists[p.path] = true
	}
	for _, f := range floors {
		for _, p := range f.pkgs {
			if !exists[p] {
				out = append(out, fmt.Sprintf("%s is on a floor (%s) but is no package of the module: remove it from the layout", p, at[p]))
			}
		}
	}
	for _, p := range pkgs {
		from, ok := at[p.path]
		if !ok {
			out = append(out, fmt.Sprintf("%s stands on no floor: add it to the layout in internal/importrules/layout_test.go", p.path))
			continue
		}
		for _, imp := range p.imports {
			to, ok := at[imp]
			switch {
			case !ok:
				// Reported as a package on no floor.
			case from.floor.kind == product && to.floor.kind == lab:
				out = append(out, fmt.Sprintf("%s (%s) imports the lab package %s (%s): the product never links the lab", p.path, from, imp, to))
			case to.level > from.level:
				out = append(out, fmt.Sprintf("%s (%s) imports %s, a floor higher (%s): imports point down", p.path, from, imp, to))
			}
		}
	}
	// What the binaries link, through product packages.
	imports := map[string][]string{}
	for _, p := range pkgs {
		imports[p.path] = p.imports
	}
	linked := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		if linked[p] {
			return
		}
		linked[p] = true
		for _, imp := range imports[p] {
			if pl, ok := at[imp]; ok && pl.floor.kind == product {
				walk(imp)
			}
		}
	}
	for _, p := range pkgs {
		if pl, ok := at[p.path]; ok && pl.floor.kind == binary {
			walk(p.path)
		}
	}
	for _, p := range pkgs {
		if pl, ok := at[p.path]; ok && pl.floor.kind == product && !linked[p.path] {
			out = append(out, fmt.Sprintf("%s (%s) is linked by no binary: only tests use it, so it belongs to the lab", p.path, pl))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
