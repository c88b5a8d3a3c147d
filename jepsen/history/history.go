// Package history defines what a chaos run records: one Op per client
// operation, one Event per fault, and the Replica summary of each node's
// committed log taken after the run. Runs write them as JSONL
// (history.jsonl, nemesis.jsonl) and JSON (replicas.json) in the run
// directory; checkers and reports read them back.
//
// Times are nanoseconds since the start of the run, read from one monotonic
// clock in the harness process, so invoke/complete intervals of different
// clients can be compared.
package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File names inside a run directory.
const (
	HistoryFile  = "history.jsonl"
	NemesisFile  = "nemesis.jsonl"
	ReplicasFile = "replicas.json"
	ResultsFile  = "results.json"
	ReportFile   = "report.html"
	RunFile      = "run.json"
)

// Outcome is how an operation ended, in Jepsen's terms.
type Outcome string

const (
	// OK: the operation took effect and its result is known.
	OK Outcome = "ok"
	// Fail: the operation definitely did not take effect.
	Fail Outcome = "fail"
	// Info: indeterminate; it may or may not have taken effect (timeouts,
	// connection loss after the request was written, leader change while
	// proposed).
	Info Outcome = "info"
)

// Kind is the type of an operation.
type Kind string

const (
	// Send appends Value to Queue. Ok results carry Offset (the queue offset).
	Send Kind = "send"
	// Poll reads Queue from Offset; Msgs are the messages returned and Next
	// the next offset the broker said to read from.
	Poll Kind = "poll"
	// Commit stores Offset as Group's committed offset of Queue.
	Commit Kind = "commit"
	// Fetch reads Group's committed offset of Queue into Offset (-1: none).
	Fetch Kind = "fetch"

	// The group workload's kinds: push consumers of consumer groups,
	// checked by the consumer-group checker only.

	// Deliver is one callback of a push consumer (Process) of Group with
	// Queue's messages Msgs, from Invoke (the callback began) to Complete
	// (it returned).
	Deliver Kind = "deliver"
	// Join is a consumer (Value: its client id) of Group starting, from
	// Invoke to Complete (its Start returned: it has heartbeated).
	Join Kind = "join"
	// Leave is a consumer (Value) of Group stopping: cleanly (Outcome ok,
	// from the start of Shutdown) or killed (Outcome info: its
	// connections cut, nothing persisted or unregistered).
	Leave Kind = "leave"
	// Members is Node's answer to GET_CONSUMER_LIST_BY_GROUP for Group:
	// the client ids in Msgs' values (offsets unused).
	Members Kind = "members"
	// GroupOffset reads Group's committed offset of Queue, as a push
	// consumer committed it (Offset, -1: none).
	GroupOffset Kind = "group-offset"

	// The kinds of the delay, transaction and retry workloads, which use
	// topics of their own; the checkers of the main topic ("jepsen")
	// ignore them.

	// TopicPoll reads Queue of Topic from Offset, like Poll: Msgs are the
	// messages returned, Next the next offset. Drain marks the final
	// reads.
	TopicPoll Kind = "topic-poll"
	// DelaySend sends Value to Queue of Topic delayed by DelayMs (a timer,
	// TIMER_DELAY_MS) or by delay level Level (DELAY; DelayMs is then the
	// level's delay). The message waits in SCHEDULE_TOPIC_XXXX: Offset is
	// its offset there, SysQueue its schedule queue.
	DelaySend Kind = "delay-send"
	// TxnSend sends Value to Queue of Topic in a transaction: the half
	// message, the local transaction, END_TRANSACTION. Decision is the
	// local transaction's state (commit, rollback, unknown), set when the
	// half message was stored (Outcome ok, or info if END_TRANSACTION
	// itself failed; Offset is then the half message's offset).
	TxnSend Kind = "txn-send"
	// TxnCheck is a check-back of Value's transaction answered by a
	// transaction producer: Decision is the answer (commit, rollback).
	TxnCheck Kind = "txn-check"
	// RetrySend sends Value to Queue of Topic; Failures is how many times
	// the retry workload's consumers (Group, MaxReconsume) fail it before
	// consuming it.
	RetrySend Kind = "retry-send"
	// RetryDeliver is one push-consumer callback of Group on Value, with
	// the message's Reconsume count; Decision is what the callback
	// returned: "success" or "later" (ConsumeRetryLater).
	RetryDeliver Kind = "retry-deliver"

	// The pop workload's kinds (SimpleConsumers of Group on Topic).

	// PopSend sends Value to Queue of Topic (Offset: its queue offset).
	PopSend Kind = "pop-send"
	// PopDeliver is one message (Queue, Offset, Value) of one Receive of
	// Group by a SimpleConsumer (Process), from Invoke to Complete of the
	// receive, hidden for InvisibleMs; Handle names this delivery
	// ("<batch>/<i>", the batch being one Receive) and Reconsume is the
	// broker's attempt count minus one. Orderly marks an orderly group.
	PopDeliver Kind = "pop-deliver"
	// PopAck acks the delivery Handle (Queue, Offset, Value of Group).
	PopAck Kind = "pop-ack"
	// PopChange changes the invisible time of the delivery Handle to
	// InvisibleMs from its invocation on.
	PopChange Kind = "pop-change"
	// PopJoin is a SimpleConsumer (Process) of Group starting (Orderly:
	// an orderly group), from Invoke to Complete of its Start.
	PopJoin Kind = "pop-join"
	// PopKill is a SimpleConsumer (Process) of Group killed with the
	// deliveries of batch Handle not all acked (Value: how many not).
	PopKill Kind = "pop-kill"
)

// Decisions (Op.Decision).
const (
	DecisionCommit   = "commit"
	DecisionRollback = "rollback"
	DecisionUnknown  = "unknown"
	DecisionSuccess  = "success"
	DecisionLater    = "later"
)

// Msg is one message at one queue offset.
type Msg struct {
	Offset int64  `json:"o"`
	Value  string `json:"v"`
}

// Op is one client operation.
type Op struct {
	ID int64 `json:"id"`
	// Process is the logical client. After an indeterminate operation the
	// client continues as a new process (etcd's rule), so one process never
	// has two operations whose intervals overlap.
	Process int  `json:"process"`
	Kind    Kind `json:"kind"`
	Queue   int  `json:"queue"`
	// Value is the unique value a Send carries ("p<process>-<seq>").
	Value string `json:"value,omitempty"`
	// Offset: a Send's acknowledged queue offset, a Poll's start offset, a
	// Commit's offset, a Fetch's result.
	Offset int64  `json:"offset"`
	Next   int64  `json:"next,omitempty"` // Poll: next begin offset
	Msgs   []Msg  `json:"msgs,omitempty"` // Poll: messages returned
	Group  string `json:"group,omitempty"`
	// Attempt numbers the tries of one logical send in the retries
	// workload (1 = first); every try is its own Op with the same Value.
	Attempt int `json:"attempt,omitempty"`
	// Node is the node the request went to (1-based; 0 = unknown).
	Node     int     `json:"node"`
	Invoke   int64   `json:"invoke"`
	Complete int64   `json:"complete"`
	Outcome  Outcome `json:"outcome"`
	Error    string  `json:"error,omitempty"`
	// Drain marks the final reads made after every fault healed.
	Drain bool `json:"drain,omitempty"`
	// Orderly marks the Join and Deliver ops of an orderly consumer group.
	Orderly bool `json:"orderly,omitempty"`

	// Topic is the topic of a TopicPoll, DelaySend, TxnSend or RetrySend
	// ("": the main topic).
	Topic string `json:"topic,omitempty"`
	// DelayMs is a DelaySend's delay, Level its delay level (0: a timer).
	DelayMs int64 `json:"delay_ms,omitempty"`
	Level   int   `json:"level,omitempty"`
	// SysQueue is the system topic's queue a DelaySend waits in.
	SysQueue int `json:"sys_queue,omitempty"`
	// Decision: a TxnSend's local transaction state, a TxnCheck's answer,
	// a RetryDeliver's consume result (see the Decision constants).
	Decision string `json:"decision,omitempty"`
	// Failures is how many times a RetrySend's value is to be failed, and
	// MaxReconsume the consumers' MaxReconsumeTimes (Group: their group).
	Failures     int `json:"failures,omitempty"`
	MaxReconsume int `json:"max_reconsume,omitempty"`
	// Reconsume is a RetryDeliver's reconsume count.
	Reconsume int `json:"reconsume,omitempty"`

	// InvisibleMs is a PopDeliver's invisible time, a PopChange's new one.
	InvisibleMs int64 `json:"invisible_ms,omitempty"`
	// Handle names a PopDeliver; PopAck and PopChange name the delivery
	// they act on.
	Handle string `json:"handle,omitempty"`
}

// Event is one fault, written when it ends (End is 0 if the run stopped
// while it was active).
type Event struct {
	// Kind: partition, kill, pause, power-loss, corrupt, clock, delay, loss,
	// membership, heal, restart, ...
	Kind        string `json:"kind"`
	Start       int64  `json:"start"`
	End         int64  `json:"end"`
	Nodes       []int  `json:"nodes,omitempty"`
	Description string `json:"description"`
	// Error is set when the harness failed to inject or heal the fault.
	Error string `json:"error,omitempty"`
	// Measures are figures the nemesis took while the fault lasted (the
	// hostile nemesis: the target's anonymous memory before and at peak).
	Measures map[string]int64 `json:"measures,omitempty"`
}

// Entry summarises one raft log entry of one node.
type Entry struct {
	Index uint64 `json:"i"`
	Term  uint64 `json:"t"`
	// Sum is the CRC-32C of the entry's type and body.
	Sum uint32 `json:"s"`
}

// Replica is one node's committed log after the run.
type Replica struct {
	Node int `json:"node"`
	// Commit is the commit index the node reported before it was stopped
	// (0 if it could not be asked).
	Commit uint64 `json:"commit"`
	// First is the first index still in the log (after compaction).
	First   uint64  `json:"first"`
	Entries []Entry `json:"entries"`
	// Problem is set when the log could not be read completely (for
	// example a corrupt entry), with what was found.
	Problem string `json:"problem,omitempty"`
}

// Writer appends JSON lines to a file, one value per line.
type Writer struct {
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
}

// Create creates (truncating) a JSONL file.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	return &Writer{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Write appends v as one line. The caller serialises calls.
func (w *Writer) Write(v any) error {
	if err := w.enc.Encode(v); err != nil {
		return fmt.Errorf("history: write %s: %w", w.f.Name(), err)
	}
	return nil
}

// Flush writes buffered lines to the file.
func (w *Writer) Flush() error { return w.w.Flush() }

// Close flushes, syncs and closes the file.
func (w *Writer) Close() error {
	err := w.w.Flush()
	if e := w.f.Sync(); err == nil {
		err = e
	}
	if e := w.f.Close(); err == nil {
		err = e
	}
	return err
}

// ReadJSONL reads a file of JSON lines into a slice of T. A missing file
// reads as empty.
func ReadJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	var out []T
	dec := json.NewDecoder(bufio.NewReaderSize(f, 64<<10))
	for line := 1; ; line++ {
		var v T
		err := dec.Decode(&v)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("history: %s record %d: %w", path, line, err)
		}
		out = append(out, v)
	}
}

// Run is everything recorded in one run directory.
type Run struct {
	Dir      string
	Ops      []Op
	Events   []Event
	Replicas []Replica
	Meta     Meta
}

// Meta describes how a run was made (run.json).
type Meta struct {
	Workload  string   `json:"workload"`
	Nemesis   []string `json:"nemesis"`
	Seed      int64    `json:"seed"`
	TimeLimit string   `json:"time_limit"`
	Rate      float64  `json:"rate"`
	Queues    int      `json:"queues"`
	Nodes     int      `json:"nodes"`
	NetMode   string   `json:"net_mode"`
	Mutant    string   `json:"mutant,omitempty"`
	Started   string   `json:"started"`
	// Duration is the run's length in nanoseconds (the time axis of plots).
	Duration int64 `json:"duration"`
	// Healed is when the last fault was healed (ns since start), the start
	// of the availability window.
	Healed int64 `json:"healed"`
	// Dedupe says the broker deduplicates retried sends, so a value at two
	// offsets is a violation rather than allowed at-least-once behaviour.
	Dedupe bool `json:"dedupe"`
}

// Load reads a run directory.
func Load(dir string) (*Run, error) {
	r := &Run{Dir: dir}
	var err error
	if r.Ops, err = ReadJSONL[Op](filepath.Join(dir, HistoryFile)); err != nil {
		return nil, err
	}
	if r.Events, err = ReadJSONL[Event](filepath.Join(dir, NemesisFile)); err != nil {
		return nil, err
	}
	if err := readJSON(filepath.Join(dir, ReplicasFile), &r.Replicas); err != nil {
		return nil, err
	}
	if err := readJSON(filepath.Join(dir, RunFile), &r.Meta); err != nil {
		return nil, err
	}
	return r, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("history: %s: %w", path, err)
	}
	return nil
}

// WriteJSON writes v indented to path, atomically (temp file + rename).
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// Results is results.json: the verdict of every checker on one run.
type Results struct {
	// Valid is true when every checker found the history valid.
	Valid bool `json:"valid"`
	// Checkers maps a checker's name to its result.
	Checkers map[string]CheckerResult `json:"checkers"`
	// Ops counts operations by kind and outcome ("send.ok": 1234).
	Ops map[string]int64 `json:"ops"`
	// Faults counts injected faults by kind.
	Faults map[string]int64 `json:"faults"`
	// Error is set when the harness itself failed (exit status 2).
	Error string `json:"error,omitempty"`
}

// CheckerResult is one checker's verdict.
type CheckerResult struct {
	Valid bool `json:"valid"`
	// Counts are the checker's figures (lost, duplicated, ...).
	Counts map[string]int64 `json:"counts,omitempty"`
	// Errors describe the first violations found (at most a few dozen).
	Errors []string `json:"errors,omitempty"`
	// Note explains a verdict that needs context (e.g. "skipped: no drain").
	Note string `json:"note,omitempty"`
}
