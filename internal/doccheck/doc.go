// Package doccheck checks the repository's Markdown documentation: every
// relative link names a file that exists and, when it has a fragment, a
// heading of that file (GitHub's anchors); the README stays short enough to
// read (reference material lives in docs/*.md); and no text names an
// internal work item by number instead of saying what the thing is.
//
// The checks run as tests of this package (doccheck_test.go) over the
// whole tree, so `go test ./internal/doccheck` fails on a broken link
// before a reader finds it.
package doccheck
