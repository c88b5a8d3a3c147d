package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Problem is one finding, at a file and line (relative to the root).
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// MarkdownFiles lists the *.md files under root, as slash paths relative to
// root, skipping hidden directories (.git, .ci caches) and testdata.
func MarkdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return fmt.Errorf("doccheck: %w", err)
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("doccheck: walk %s: %w", root, err)
	}
	return files, nil
}

// link is a Markdown inline link's target, with its line.
type link struct {
	target string
	line   int
}

// inlineLink matches [text](target) and ![alt](target), with an optional
// title after the target.
var inlineLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// inlineCode matches a code span (one or more backticks, as CommonMark
// pairs them for the spans this repository writes).
var inlineCode = regexp.MustCompile("(`+)[^`]*?(`+)")

// scan reads a Markdown file's links and the anchors of its headings,
// ignoring fenced code blocks and code spans. Links are found per
// paragraph (a link's text may wrap onto the next line) and reported at
// the paragraph's first line.
func scan(data []byte) (links []link, anchors map[string]bool) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	fence := ""
	var para []string
	paraLine := 0
	flush := func() {
		text := inlineCode.ReplaceAllString(strings.Join(para, " "), "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			links = append(links, link{target: m[1], line: paraLine})
		}
		para = para[:0]
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			flush()
			fence = trimmed[:3]
			continue
		}
		if strings.HasPrefix(line, "#") {
			flush()
			text := strings.TrimSpace(strings.TrimLeft(line, "#"))
			a := Anchor(text)
			if k := seen[a]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				anchors[a] = true
			}
			seen[a]++
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if len(para) == 0 {
			paraLine = n
		}
		para = append(para, line)
	}
	flush()
	return links, anchors
}

// Anchor is GitHub's anchor for a heading's text: lower case, punctuation
// dropped (letters, digits, '-' and '_' stay), each space a hyphen.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// external reports whether a link target leaves the repository.
func external(target string) bool {
	if strings.HasPrefix(target, "//") {
		return true
	}
	if i := strings.Index(target, ":"); i > 0 && !strings.ContainsAny(target[:i], "/#.") {
		return true // a scheme: http:, https:, mailto:
	}
	return false
}

// Links checks every relative link of every Markdown file under root: the
// file (or directory) it names exists, and a fragment names a heading of
// the Markdown file it points into.
func Links(root string) ([]Problem, error) {
	files, err := MarkdownFiles(root)
	if err != nil {
		return nil, err
	}
	type doc struct {
		links   []link
		anchors map[string]bool
	}
	docs := map[string]doc{}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("doccheck: %w", err)
		}
		l, a := scan(data)
		docs[f] = doc{l, a}
	}
	var problems []Problem
	for _, f := range files {
		for _, l := range docs[f].links {
			if external(l.target) {
				continue
			}
			target, frag, _ := strings.Cut(l.target, "#")
			file := f
			if target != "" {
				file = path.Clean(path.Join(path.Dir(f), target))
				if strings.HasPrefix(file, "../") {
					problems = append(problems, Problem{f, l.line, fmt.Sprintf("link %q leaves the repository", l.target)})
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
					problems = append(problems, Problem{f, l.line, fmt.Sprintf("link %q: no such file %s", l.target, file)})
					continue
				}
			}
			if frag == "" {
				continue
			}
			d, ok := docs[file]
			if !ok {
				problems = append(problems, Problem{f, l.line, fmt.Sprintf("link %q: fragment into %s, which is not a Markdown file", l.target, file)})
				continue
			}
			if !d.anchors[frag] {
				problems = append(problems, Problem{f, l.line, fmt.Sprintf("link %q: %s has no heading with anchor #%s", l.target, file, frag)})
			}
		}
	}
	return problems, nil
}

// CountLines is the number of lines of a file's content.
func CountLines(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// workItem matches a reference to an internal work item by number: the
// word issue (or issues), a space and digits.
var workItem = regexp.MustCompile(`(?i)\bissues? [0-9]+`)

// WorkItems lists the lines of the given files (slash paths relative to
// root) that name an internal work item by number.
func WorkItems(root string, files []string) ([]Problem, error) {
	var problems []Problem
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("doccheck: %w", err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := workItem.FindString(line); m != "" {
				problems = append(problems, Problem{f, i + 1, fmt.Sprintf("%q names a work item by number: say what the thing is", m)})
			}
		}
	}
	return problems, nil
}

// MissingFromContents reads a document's "## Contents" section and lists
// the second-level headings (outside code blocks) it does not link; ok is
// false when there is no such section.
func MissingFromContents(data []byte) (missing []string, ok bool) {
	var headings []string
	var contents []string
	inContents, fence := false, false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		if strings.HasPrefix(line, "## ") {
			h := strings.TrimSpace(line[3:])
			inContents = h == "Contents"
			if inContents {
				ok = true
			} else {
				headings = append(headings, h)
			}
			continue
		}
		if inContents {
			contents = append(contents, line)
		}
	}
	linked := map[string]bool{}
	for _, m := range inlineLink.FindAllStringSubmatch(strings.Join(contents, " "), -1) {
		if a, found := strings.CutPrefix(m[1], "#"); found {
			linked[a] = true
		}
	}
	for _, h := range headings {
		if !linked[Anchor(h)] {
			missing = append(missing, h)
		}
	}
	return missing, ok
}
