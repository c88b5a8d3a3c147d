package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/message"
)

// Standalone runs a Store as a single-node group: every appended entry is
// committed once synced. It is the demo mode and the test harness of this
// package; replicated groups use package cluster instead.
type Standalone struct {
	*Store
	mu      sync.Mutex // serialises append+apply
	w       *commitlog.Writer
	batchID uint64
}

// OpenStandalone opens a store, takes its log's writer (until Close) and
// applies whatever the log holds beyond the applied index (in a
// single-node group every entry in the log is committed).
func OpenStandalone(cfg Config) (*Standalone, error) {
	s, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	w, err := s.clog.Writer()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	if _, err := s.Apply(s.clog.LastIndex()); err != nil {
		w.Release()
		s.Close()
		return nil, err
	}
	return &Standalone{Store: s, w: w}, nil
}

// Close releases the log's writer and closes the store.
func (sa *Standalone) Close() error {
	sa.w.Release()
	return sa.Store.Close()
}

// EncodeMessages returns a messages entry body holding the messages, which
// the caller has stamped (StoreStamp) and checked (CheckMessage).
func EncodeMessages(batchID uint64, msgs []*message.Message) ([]byte, error) {
	b := AppendBodyHeader(nil, KindMessages, batchID)
	var err error
	for i, m := range msgs {
		if b, err = message.Append(b, m); err != nil {
			return nil, fmt.Errorf("store: message %d: %w", i, err)
		}
	}
	return b, nil
}

// StoreStamp sets the fields the broker owns on a message it accepts.
func (s *Store) StoreStamp(m *message.Message) {
	m.StoreHost = s.cfg.StoreHost
	if m.StoreTimestamp == 0 {
		m.StoreTimestamp = s.cfg.Clock.Now().UnixMilli()
	}
	m.QueueOffset, m.PhysicalOffset = 0, 0
}

// CheckMessage validates a message before it is proposed: the checks that
// need no replicated state. Apply re-checks topic and queue.
func (s *Store) CheckMessage(m *message.Message) error {
	if len(m.Body) > s.cfg.MaxMessageSize {
		return fmt.Errorf("%w: body of %d bytes exceeds %d", message.ErrMessageTooLarge, len(m.Body), s.cfg.MaxMessageSize)
	}
	if _, err := message.Size(m); err != nil {
		return err
	}
	return nil
}

func (sa *Standalone) appendApply(body []byte) (Result, error) {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if err := sa.CheckWrite(len(body)); err != nil {
		return Result{}, err
	}
	// sa.mu makes its holder the one user of the log's writer
	// (commitlog/doc.go, "One writer").
	idx := sa.clog.LastIndex() + 1
	if err := sa.w.AppendSync(commitlog.Entry{Index: idx, Term: 1, Data: body}); err != nil {
		return Result{}, fmt.Errorf("store: append: %w", err)
	}
	rs, err := sa.Apply(idx)
	if err != nil {
		return Result{}, err
	}
	if len(rs) != 1 {
		return Result{}, errors.New("store: apply returned no result")
	}
	return rs[0], nil
}

// Put stores messages as one entry and returns where each landed.
func (sa *Standalone) Put(msgs ...*message.Message) ([]MessageResult, error) {
	for i, m := range msgs {
		sa.StoreStamp(m)
		if err := sa.CheckMessage(m); err != nil {
			return nil, fmt.Errorf("store: message %d: %w", i, err)
		}
	}
	sa.mu.Lock()
	sa.batchID++
	id := sa.batchID
	sa.mu.Unlock()
	body, err := EncodeMessages(id, msgs)
	if err != nil {
		return nil, err
	}
	r, err := sa.appendApply(body)
	if err != nil {
		return nil, err
	}
	return r.Messages, nil
}

// Exec applies a command.
func (sa *Standalone) Exec(c *Command) error {
	body, err := EncodeCommand(0, c)
	if err != nil {
		return err
	}
	r, err := sa.appendApply(body)
	if err != nil {
		return err
	}
	return r.Err
}
