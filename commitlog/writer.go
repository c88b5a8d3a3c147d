package commitlog

import (
	"errors"
	"fmt"
	"sync/atomic"
)

var (
	// ErrWriterTaken is returned by Log.Writer while another Writer handle
	// of the same log is out (not yet released).
	ErrWriterTaken = errors.New("commitlog: the log's writer is taken")
	// ErrWriterReleased is returned by a Writer's methods after its
	// Release.
	ErrWriterReleased = errors.New("commitlog: writer handle used after Release")
)

// Writer is a log's one writer: the only way to append to, truncate or
// reset a Log. Log.Writer hands out one handle at a time, so code that
// holds only a *Log can read it but not change its end (see "One writer"
// in the package documentation). A handle belongs to one owner, which
// calls its methods one at a time (from any goroutine, but never two at
// once; race-detector builds check this), and gives it back with Release.
type Writer struct {
	l        *Log
	released atomic.Bool
}

// Writer hands out the log's writer handle. Until that handle's Release it
// returns an error wrapping ErrWriterTaken; after Close, one wrapping
// ErrClosed.
func (l *Log) Writer() (*Writer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil, fmt.Errorf("commitlog: writer of %s: %w", l.dir, ErrClosed)
	}
	if l.mu.writer {
		return nil, fmt.Errorf("commitlog: writer of %s: %w", l.dir, ErrWriterTaken)
	}
	l.mu.writer = true
	return &Writer{l: l}, nil
}

// Release gives the handle back, so Log.Writer can hand it out again. The
// handle refuses every later call (ErrWriterReleased). Releasing twice,
// or after the log's Close, does nothing more.
func (w *Writer) Release() {
	if !w.released.CompareAndSwap(false, true) {
		return
	}
	w.l.mu.Lock()
	w.l.mu.writer = false
	w.l.mu.Unlock()
}

// enter starts a writing call: it refuses a released handle and, in
// race-detector builds, checks that no other writing call is under way.
// A nil error must be followed by w.exit.
func (w *Writer) enter() error {
	if w.released.Load() {
		return ErrWriterReleased
	}
	if raceEnabled {
		w.l.enterWriter()
	}
	return nil
}

func (w *Writer) exit() {
	if raceEnabled {
		w.l.exitWriter()
	}
}

// Append writes entries at the end of the log. If the first entry's index is
// not past the last entry, the log's suffix from that index is truncated
// first (a raft log conflict). It does not wait for durability; see
// AppendSync and Sync.
func (w *Writer) Append(ents ...Entry) error { return w.append(ents, false) }

// AppendSync appends and, in FlushSync mode, syncs the entries before it
// returns. The writer syncs them itself, on its own goroutine: with one
// writer there is nobody to share an fdatasync with, and handing it to the
// flusher would only add a goroutine switch each way. A checkpoint that
// falls due is left to the flusher.
func (w *Writer) AppendSync(ents ...Entry) error { return w.append(ents, true) }

func (w *Writer) append(ents []Entry, sync bool) error {
	if err := w.enter(); err != nil {
		return err
	}
	defer w.exit()
	l := w.l
	if err := l.append(ents); err != nil || len(ents) == 0 {
		return err
	}
	switch {
	case l.opts.Flush == FlushAsync:
		return nil
	case !sync:
		l.kickFlusher()
		return nil
	}
	if l.syncActive() {
		l.kickFlusher()
	}
	return l.waitDurable(ents[len(ents)-1].Index)
}

// TruncateSuffix removes entries with index >= from (raft log conflict).
func (w *Writer) TruncateSuffix(from uint64) error {
	if err := w.enter(); err != nil {
		return err
	}
	defer w.exit()
	return w.l.truncateSuffix(from)
}

// Reset discards the whole log and restarts it empty, with the next entry
// having index next and going at global position pos (as on the leader the
// snapshot came from).
func (w *Writer) Reset(next uint64, pos int64) error {
	if err := w.enter(); err != nil {
		return err
	}
	defer w.exit()
	return w.l.reset(next, pos)
}

// enterWriter and exitWriter bracket every writing call (Writer's Append,
// AppendSync, TruncateSuffix, Reset) in race-detector builds. The handle
// makes its holder the one writer, but two goroutines could still share
// it: a call made while another is under way, on another goroutine,
// panics before touching anything, rather than leaving the race detector
// to find the damage (or not). Calls made one after the other from
// different goroutines are fine.
func (l *Log) enterWriter() {
	if !l.w.busy.CompareAndSwap(false, true) {
		panic("commitlog: two goroutines write the log at once; a Writer's Append, AppendSync, TruncateSuffix and Reset must not overlap (see the package documentation)")
	}
}

func (l *Log) exitWriter() { l.w.busy.Store(false) }
