package main

import (
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

// docCommands reads the raftmq command lines of the shell blocks of a
// Markdown file: a line whose first word, after VAR=value assignments, is
// ./raftmq or raftmq.
func docCommands(t *testing.T, file string) []docCommand {
	blocks, err := parseDocBlocks(file)
	require.NoError(t, err)
	var cmds []docCommand
	for _, b := range blocks {
		for _, l := range b.lines {
			words := stripAssignments(shellWords(l.text))
			if len(words) == 0 || (words[0] != "./raftmq" && words[0] != "raftmq") {
				continue
			}
			cmds = append(cmds, docCommand{file: file, line: l.line, args: words[1:]})
		}
	}
	return cmds
}

// Every raftmq command in the shell examples of the README and docs/ names
// a command that exists and flags it accepts.
func TestDocExamplesParse(t *testing.T) {
	files, err := docFiles()
	require.NoError(t, err)
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
