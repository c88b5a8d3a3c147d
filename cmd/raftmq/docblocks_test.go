package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A fenced code block of a Markdown file, with the doccheck marks written
// just above it. The README and docs/ mark what the command test
// (TestDocCommands) must not run as it is, as HTML comments GitHub does not
// render:
//
//	<!-- doccheck: skip REASON -->              the whole block is not run
//	<!-- doccheck: skip `PREFIX` REASON -->     nor its lines starting with PREFIX
//	<!-- doccheck: xfail `PREFIX` REASON -->    those lines must fail (today)
//	<!-- doccheck: cluster FLAGS -->            run the block against its own
//	                                            group: raftmq cluster FLAGS
type docBlock struct {
	file  string
	line  int    // the opening fence's line
	lang  string // the info string's first word ("" for a bare fence)
	marks []docMark
	lines []docLine // shell blocks: one per command, continuations joined
}

type docMark struct {
	kind   string // skip, xfail or cluster
	prefix string // the lines it applies to ("" : the whole block)
	reason string // for cluster: the flags
	line   int
}

type docLine struct {
	line       int
	text       string // without its comment, continuations joined, no trailing &
	background bool   // ended with &
}

// docMarkRE matches a mark: its kind, an optional `prefix` and the rest.
var docMarkRE = regexp.MustCompile("^<!--\\s*doccheck:\\s*([a-z]+)\\s*(?:`([^`]+)`)?\\s*(.*?)\\s*-->$")

// shellLangs are the info strings of blocks whose lines are commands;
// dataLangs of blocks that hold no commands (code, config, output).
var (
	shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true}
	dataLangs  = map[string]bool{"text": true, "go": true, "yaml": true, "json": true, "promql": true, "ini": true}
)

// parseDocBlocks reads the fenced blocks of a Markdown file and the marks
// above each; a mark that is not followed by a block, or that does not
// parse, is an error.
func parseDocBlocks(file string) ([]docBlock, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []docBlock
	var marks []docMark
	var cur *docBlock
	fence := ""
	pending, pendingLine := "", 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		trimmed := strings.TrimSpace(sc.Text())
		if cur != nil {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				if pending != "" {
					return nil, fmt.Errorf("%s:%d: a continuation line ends the block", file, pendingLine)
				}
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			if !shellLangs[cur.lang] {
				continue
			}
			// A comment starts at a # at the line's start or after a blank.
			if strings.HasPrefix(trimmed, "#") {
				trimmed = ""
			} else if i := strings.Index(trimmed, " #"); i >= 0 {
				trimmed = strings.TrimSpace(trimmed[:i])
			}
			if pending == "" {
				pendingLine = n
				if trimmed == "" {
					continue
				}
			}
			if strings.HasSuffix(trimmed, `\`) {
				pending += strings.TrimSpace(strings.TrimSuffix(trimmed, `\`)) + " "
				continue
			}
			full := strings.TrimSpace(pending + trimmed)
			pending = ""
			bg := strings.HasSuffix(full, "&") && !strings.HasSuffix(full, "&&")
			if bg {
				full = strings.TrimSpace(strings.TrimSuffix(full, "&"))
			}
			cur.lines = append(cur.lines, docLine{line: pendingLine, text: full, background: bg})
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			lang, _, _ := strings.Cut(strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])), " ")
			cur = &docBlock{file: file, line: n, lang: lang, marks: marks}
			marks = nil
			continue
		}
		if strings.HasPrefix(trimmed, "<!--") && strings.Contains(trimmed, "doccheck:") {
			m := docMarkRE.FindStringSubmatch(trimmed)
			if m == nil || (m[1] != "skip" && m[1] != "xfail" && m[1] != "cluster") {
				return nil, fmt.Errorf("%s:%d: a doccheck mark reads <!-- doccheck: skip|xfail [`PREFIX`] REASON --> or <!-- doccheck: cluster FLAGS -->, not %q", file, n, trimmed)
			}
			if m[1] != "cluster" && m[3] == "" {
				return nil, fmt.Errorf("%s:%d: a %s mark needs its reason", file, n, m[1])
			}
			marks = append(marks, docMark{kind: m[1], prefix: m[2], reason: m[3], line: n})
			continue
		}
		if trimmed != "" && len(marks) > 0 {
			return nil, fmt.Errorf("%s:%d: a doccheck mark must be followed by the fenced block it marks", file, marks[0].line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the fenced block is never closed", file, cur.line)
	}
	if len(marks) > 0 {
		return nil, fmt.Errorf("%s:%d: a doccheck mark must be followed by the fenced block it marks", file, marks[0].line)
	}
	return blocks, nil
}

// docFiles are the README and docs/*.md, from this package's directory.
func docFiles() ([]string, error) {
	files := []string{filepath.Join("..", "..", "README.md")}
	more, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	return append(files, more...), err
}

// lineMark is the mark of a kind asked that applies to a line of the
// block: one whose prefix the line starts with, else one for the whole
// block.
func (b docBlock) lineMark(l docLine, kinds ...string) (docMark, bool) {
	for _, m := range b.marks {
		if m.prefix != "" && strings.HasPrefix(l.text, m.prefix) && slices.Contains(kinds, m.kind) {
			return m, true
		}
	}
	for _, m := range b.marks {
		if m.prefix == "" && slices.Contains(kinds, m.kind) {
			return m, true
		}
	}
	return docMark{}, false
}

// stripAssignments drops the VAR=value words before a command.
func stripAssignments(words []string) []string {
	for len(words) > 0 && isAssignment(words[0]) {
		words = words[1:]
	}
	return words
}

var assignmentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func isAssignment(w string) bool { return assignmentRE.MatchString(w) }

// The block reader and the classification find what they are for: marks,
// continuations, comments and background lines are read; a bare fence, an
// unknown language, a stray or malformed mark, an unknown program, command
// or flag are each reported.
func TestDocBlocksParseAndClassify(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	good := write("good.md", "# Doc\n\n<!-- doccheck: skip `./raftmq bench failover` too long -->\n<!-- doccheck: cluster --tls -->\n```sh\n"+
		"# a comment line\n./raftmq cluster --demo 0 &   # the group\nDURATION=1s ./scripts/x.sh \\\n    --flag v\n./raftmq bench failover --kills 20\n```\n\n"+
		"  ```text\n  output\n  ```\n\n```\nbare\n```\n\n```toml\nx = 1\n```\n")
	blocks, err := parseDocBlocks(good)
	require.NoError(t, err)
	require.Len(t, blocks, 4)
	b := blocks[0]
	require.Equal(t, "sh", b.lang)
	require.Equal(t, 5, b.line)
	require.Len(t, b.marks, 2)
	require.Equal(t, docMark{kind: "cluster", reason: "--tls", line: 4}, b.marks[1])
	require.Equal(t, []docLine{
		{line: 7, text: "./raftmq cluster --demo 0", background: true},
		{line: 8, text: "DURATION=1s ./scripts/x.sh --flag v"},
		{line: 10, text: "./raftmq bench failover --kills 20"},
	}, b.lines)
	m, ok := b.lineMark(b.lines[2], "skip")
	require.True(t, ok)
	require.Equal(t, "too long", m.reason)
	_, ok = b.lineMark(b.lines[0], "skip")
	require.False(t, ok, "a prefix mark applies to its lines only")

	kind, err := classify(b)
	require.NoError(t, err)
	require.Equal(t, "run", kind)
	kind, err = classify(blocks[1])
	require.NoError(t, err)
	require.Equal(t, "data", kind)
	_, err = classify(blocks[2])
	require.ErrorContains(t, err, "without a language")
	_, err = classify(blocks[3])
	require.ErrorContains(t, err, "```toml")

	for name, text := range map[string]string{
		"stray.md":    "<!-- doccheck: skip no block follows -->\n\ntext\n",
		"bad.md":      "<!-- doccheck: ignore `x` y -->\n```sh\nx\n```\n",
		"noreason.md": "<!-- doccheck: skip -->\n```sh\nx\n```\n",
		"open.md":     "```sh\n./raftmq produce\n",
	} {
		_, err := parseDocBlocks(write(name, text))
		require.Error(t, err, name)
	}

	require.Equal(t, "raftmq", lineKind([]string{"./raftmq", "produce"}))
	require.Equal(t, "script", lineKind([]string{"./scripts/cluster.sh"}))
	require.Equal(t, "go", lineKind([]string{"go", "build", "./cmd/raftmq"}))
	require.Equal(t, "", lineKind([]string{"rm", "-rf", "/"}))
	require.Equal(t, "", lineKind([]string{"go", "run", "."}))

	path, err := commandPath([]string{"bench", "produce", "--window", "1", "--duration", "10s"})
	require.NoError(t, err)
	require.Equal(t, "bench produce", path)
	_, err = commandPath([]string{"bench", "produce", "--no-such-flag"})
	require.Error(t, err)
	_, err = commandPath([]string{"no-such-command"})
	require.Error(t, err)

	sf, ok := shortFormOf(path)
	require.True(t, ok)
	require.Equal(t, []string{"bench", "produce", "--window", "1", "--duration", "1s"},
		applyShort([]string{"bench", "produce", "--window", "1", "--duration", "10s"}, sf))
	require.Equal(t, []string{"bench", "produce", "--duration=1s"}, applyShort([]string{"bench", "produce", "--duration=10s"}, sf))
	g := &docGroup{base: 30000, namesrv: 30500}
	require.Equal(t, "--addr 127.0.0.1:30001 https://127.0.0.1:30020/status 127.0.0.1:30500",
		rewriteAddrs("--addr 127.0.0.1:10912 https://127.0.0.1:10931/status 127.0.0.1:9876", g.addrs()))
}
