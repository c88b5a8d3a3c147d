package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docCommand is one raftmq command line of a shell example in the docs.
type docCommand struct {
	file string
	line int
	args []string
}

// shellWords splits a command line as sh would for the plain words, single
// and double quotes the examples use; no expansion.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// docCommands reads the raftmq command lines of the shell blocks (```sh,
// ```bash or a bare ```) of a Markdown file: a line whose first word,
// after VAR=value assignments, is ./raftmq or raftmq; a trailing comment,
// `&` and continuation lines are handled.
func docCommands(t *testing.T, file string) []docCommand {
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	var cmds []docCommand
	inShell, inFence := false, false
	var pending string
	pendingLine := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if inFence {
				inFence, inShell = false, false
				continue
			}
			lang := strings.TrimPrefix(trimmed, "```")
			inFence, inShell = true, lang == "" || lang == "sh" || lang == "bash"
			continue
		}
		if !inShell {
			continue
		}
		if i := strings.Index(trimmed, " #"); i >= 0 {
			trimmed = strings.TrimSpace(trimmed[:i])
		}
		if pending == "" {
			pendingLine = n
		}
		if strings.HasSuffix(trimmed, `\`) {
			pending += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		full := strings.TrimSuffix(strings.TrimSpace(pending+trimmed), "&")
		pending = ""
		words := shellWords(full)
		for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
			words = words[1:]
		}
		if len(words) == 0 || (words[0] != "./raftmq" && words[0] != "raftmq") {
			continue
		}
		cmds = append(cmds, docCommand{file: file, line: pendingLine, args: words[1:]})
	}
	require.NoError(t, sc.Err())
	return cmds
}

// Every raftmq command in the shell examples of the README and docs/ names
// a command that exists and flags it accepts.
func TestDocExamplesParse(t *testing.T) {
	files := []string{filepath.Join("..", "..", "README.md")}
	more, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, more...)
	total := 0
	for _, file := range files {
		for _, dc := range docCommands(t, file) {
			total++
			root := newRoot()
			cmd, rest, err := root.Find(dc.args)
			if err != nil {
				t.Errorf("%s:%d: raftmq %s: %v", dc.file, dc.line, strings.Join(dc.args, " "), err)
				continue
			}
			if !cmd.Runnable() || cmd.Annotations[annotationGroupOnly] != "" {
				t.Errorf("%s:%d: raftmq %s: %q is not a command that runs", dc.file, dc.line, strings.Join(dc.args, " "), cmd.CommandPath())
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s:%d: raftmq %s: %v", dc.file, dc.line, strings.Join(dc.args, " "), err)
			}
		}
	}
	t.Logf("%d raftmq command lines checked", total)
	require.Greater(t, total, 20, "too few examples found: the scan is broken")
}
