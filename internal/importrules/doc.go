// Package importrules holds the test that keeps the source tree's shape:
// every package stands on one floor of an ordered list (the
// layout in layout_test.go), the product's packages never import the lab's
// (the chaos harness, the benchmark, test helpers), and no package
// imports one on a higher floor. docs/layout.md draws the floors.
//
// The check reads the import graph with `go list` (with and without the
// mutant build tag) when `go test ./internal/importrules` runs; a new
// package fails it until it is given a floor.
package importrules
