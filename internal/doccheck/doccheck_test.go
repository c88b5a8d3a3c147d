package doccheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the repository's top directory, seen from this package.
const root = "../.."

// maxReadmeLines keeps the README a page for users; reference material
// goes into docs/*.md.
const maxReadmeLines = 300

// Every relative link in the repository's Markdown resolves to a file, and
// every fragment to a heading of it.
func TestRelativeLinksResolve(t *testing.T) {
	problems, err := Links(root)
	require.NoError(t, err)
	for _, p := range problems {
		t.Error(p)
	}
}

// The README and the docs it links to are found at all (a walk that found
// nothing would pass the link check vacuously).
func TestMarkdownFilesFound(t *testing.T) {
	files, err := MarkdownFiles(root)
	require.NoError(t, err)
	require.Contains(t, files, "README.md")
	require.Contains(t, files, "ARCHITECTURE.md")
}

func TestReadmeIsShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	n := CountLines(data)
	require.LessOrEqual(t, n, maxReadmeLines, "README.md has %d lines; move reference material into docs/*.md and link it", n)
}

// No tracked text file names an internal work item by number.
func TestNoWorkItemNumbers(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	var files []string
	for _, f := range strings.Split(string(bytes.TrimRight(out, "\x00")), "\x00") {
		if f == "" || strings.HasSuffix(f, ".sum") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			continue // deleted in the work tree, or binary
		}
		files = append(files, f)
	}
	require.NotEmpty(t, files)
	problems, err := WorkItems(root, files)
	require.NoError(t, err)
	for _, p := range problems {
		t.Error(p)
	}
}

// The anchors GitHub gives the headings this repository writes.
func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Set up (two commands)":                 "set-up-two-commands",
		"Chaos campaigns (`raftmq jepsen`)":     "chaos-campaigns-raftmq-jepsen",
		"Operating (mqadmin → raftmq)":          "operating-mqadmin--raftmq",
		"Backlog (10 GB, 1,024 queues)":         "backlog-10-gb-1024-queues",
		"Retries, dead letters, delayed, timer": "retries-dead-letters-delayed-timer",
		"raftmq_sends_total and `go_*`":         "raftmq_sends_total-and-go_",
	} {
		require.Equal(t, want, Anchor(heading), heading)
	}
}

// The checker finds what it is for: a missing file, a missing heading, a
// good link passes, code is ignored.
func TestLinksFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("README.md", "# Top\n\n## A section\n\n[ok](docs/a.md#deep-part) [ok2](#a-section) [gone](docs/b.md) [bad](docs/a.md#nope)\n"+
		"[web](https://example.com/x.md) `[code](missing.md)`\n```\n[fenced](missing.md)\n```\n[up](../outside.md)\n\nA [wrapped\nlink](docs/a.md#wrong) here.\n")
	write("docs/a.md", "# A\n\n### Deep part\n\n[back](../README.md#top) [self](#nothing)\n")
	problems, err := Links(dir)
	require.NoError(t, err)
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	require.ElementsMatch(t, []string{
		`README.md:5: link "docs/b.md": no such file docs/b.md`,
		`README.md:5: link "docs/a.md#nope": docs/a.md has no heading with anchor #nope`,
		`README.md:10: link "../outside.md" leaves the repository`,
		`README.md:12: link "docs/a.md#wrong": docs/a.md has no heading with anchor #wrong`,
		`docs/a.md:5: link "#nothing": docs/a.md has no heading with anchor #nothing`,
	}, got)
}

func TestWorkItemsFound(t *testing.T) {
	word := "iss" + "ue" // spelt apart so this file passes its own check
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.go"), []byte("// fine\n// as "+word+" 12 said\n// Iss"+"ues 3 and 4\n// t"+word+" 5\n"), 0o644))
	problems, err := WorkItems(dir, []string{"x.go"})
	require.NoError(t, err)
	require.Len(t, problems, 2)
	require.Equal(t, 2, problems[0].Line)
	require.Equal(t, 3, problems[1].Line)
}

// maxLinesWithoutContents is how long a document may grow before it needs
// a table of contents.
const maxLinesWithoutContents = 150

// A long document opens with a table of contents: a "Contents" heading
// whose list links each of its second-level headings.
func TestLongDocsHaveContents(t *testing.T) {
	files, err := MarkdownFiles(root)
	require.NoError(t, err)
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		require.NoError(t, err)
		if f == "README.md" || CountLines(data) <= maxLinesWithoutContents {
			continue
		}
		missing, ok := MissingFromContents(data)
		if !ok {
			t.Errorf("%s: %d lines and no \"## Contents\" section", f, CountLines(data))
			continue
		}
		for _, h := range missing {
			t.Errorf("%s: the contents do not link the section %q", f, h)
		}
	}
}

func TestMissingFromContents(t *testing.T) {
	_, ok := MissingFromContents([]byte("# T\n\n## A\n"))
	require.False(t, ok)
	missing, ok := MissingFromContents([]byte("# T\n\n## Contents\n\n- [A](#a)\n- [D\n  e](#d-e)\n\n## D e\n\n## A\n\n## B c\n\n```\n## not a heading\n```\n"))
	require.True(t, ok)
	require.Equal(t, []string{"B c"}, missing)
}
