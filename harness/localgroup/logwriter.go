package localgroup

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
)

// logWriter is a node's stdout and stderr: it appends to the node's
// broker.log and, when the file cannot take a write (its disk is full,
// the disk the node's data is on), writes what the file did not take to
// the supervisor's stderr instead, each line prefixed with the node, so
// the reason a node stops is never lost with its disk. The file is tried
// again on every write; one line on stderr says when it failed and when
// it works again.
type logWriter struct {
	mu       sync.Mutex
	f        *os.File
	fallback io.Writer
	prefix   string
	failing  bool
	partial  bool // the last fallback write ended mid-line
}

func newLogWriter(f *os.File, fallback io.Writer, node uint64) *logWriter {
	return &logWriter{f: f, fallback: fallback, prefix: fmt.Sprintf("n%d| ", node)}
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.f.Write(p)
	if err == nil {
		if w.failing {
			w.failing = false
			fmt.Fprintf(w.fallback, "%slog file %s writable again\n", w.prefix, w.f.Name())
		}
		return n, nil
	}
	if !w.failing {
		w.failing = true
		fmt.Fprintf(w.fallback, "%slog file %s: %v; its lines go here until it can be written\n", w.prefix, w.f.Name(), err)
	}
	w.writeFallback(p[n:])
	return len(p), nil
}

// writeFallback writes rest to the fallback, a prefix at each line start.
func (w *logWriter) writeFallback(rest []byte) {
	var b bytes.Buffer
	for len(rest) > 0 {
		if !w.partial {
			b.WriteString(w.prefix)
		}
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		b.Write(line)
		w.partial = line[len(line)-1] != '\n'
		rest = rest[len(line):]
	}
	_, _ = w.fallback.Write(b.Bytes())
}
