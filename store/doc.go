// Package store is one node's message store: the commitlog (which is the
// raft log), the consume queues, the key/time index and the bbolt database
// of replicated state, tied together by Apply, which turns committed log
// entries into queue positions, index entries and state changes. It does
// not run raft: the raft loop (package raftlog / cluster) appends entries to
// Log() and calls Apply with the commit index. A single-node mode (Put,
// Exec) appends and applies directly, for the demo and for tests.
//
// # Directory layout
//
//	<dir>/lock                          flock held while open
//	<dir>/abort                         exists while open; left behind by a crash
//	<dir>/commitlog/                    segments (see package commitlog)
//	<dir>/consumequeue/<topic>/<queue>/ consume queue files
//	<dir>/index/                        IndexFiles
//	<dir>/meta.db                       bbolt: applied index, offsets, config
//	<dir>/cqjournal-<id>                tail journal of the consume queues
//
// # Entry bodies
//
// The body of a normal raft entry is empty (raft's no-op on election) or:
//
//	| off | size | field                                               |
//	|   0 |    1 | kind: 1 messages, 2 command, 3 schedule, 4 txn, 5 pop |
//	|   1 |    8 | batch id (big-endian), chosen by the proposer       |
//	|   9 |    n | payload                                             |
//
// A messages payload is RocketMQ CommitLog records back to back (package
// message), each starting with its TOTALSIZE. A record's physical
// offset is entry position + commitlog.HeaderSize + 9 + its offset in the
// payload. Records are stored with QUEUEOFFSET and PHYSICALOFFSET zero; the
// store patches both in the copies it serves, because both are a function
// of where the record landed, known only at apply time.
// A command payload is a JSON Command. Schedule, transaction and pop
// payloads are a head (schedule.Delivery, txn.Op, pop.Batch: see their
// packages) followed by records.
//
// # Determinism
//
// Apply is a pure function of the committed log and the state it leaves:
// queue offsets are assigned in log order, a message for an unknown topic or
// queue is rejected the same way on every replica, and deduplication looks
// a message's UNIQ_KEY up in the index (built from the same log), within
// DedupeWindow of the message's store timestamp (set by the leader), never
// the local clock. A replica that installed a snapshot lacks the records
// below it: the snapshot carries a dedupe table of those a later retry can
// match (dedupe.go, format in snapshot.go), which the replica keeps in its
// bbolt dedupe bucket and consults after the index.
//
// # Persistence and recovery
//
// Apply changes memory and the page cache only; acknowledging a send needs
// no fsync beyond the raft log's. Apply buffers the consume-queue units of
// the entries it applies and publishes them at the end of each chunk of
// entries, before it moves the applied index past them and returns, so that
// whatever it reports applied is readable; the queues serve recent units
// from memory and write them to their files in whole pages or at the next
// checkpoint, so a send costs no write syscall of its own however many
// queues are active. The index
// keeps its entries and slot heads in a write buffer that queries read, and
// writes it when it is synced (or its buffer fills). A storage error fails
// Apply for good: later Apply and Persist calls return it, so no checkpoint
// ever covers a write that did not happen, and the next Open rebuilds from
// the log. Every PersistInterval (1 s by default) a checkpoint runs beside
// Apply, on its own goroutine: under the apply lock it only writes what is
// buffered and copies what changed (the state delta, the index checkpoint,
// marks of the dirty consume queues); then, while Apply goes on, one
// SyncFS (syncfs(2)) makes every consume-queue and index write made before
// the capture durable, whatever the number of queues, and one bbolt
// transaction commits the applied index, the next queue offsets, consumer
// offsets, config, the index checkpoint and the length of the tail
// journal (below) the checkpoint covers. No acknowledgement waits for
// it. A failed checkpoint is sticky, like a failed Apply, unless it failed
// for lack of space (at the SyncFS or the bbolt commit): then it recorded
// nothing, and it is taken again until space frees (persistUntilSpace,
// ARCHITECTURE.md "A full disk").
//
// A consume queue's units short of its next 1,024-unit spill stay in
// memory across checkpoints: a checkpoint appends them, one record per
// queue written since the last, to the tail journal <dir>/cqjournal-<id>
// (journal.go; one sequential write whatever the number of queues,
// covered by the same SyncFS), rather than writing each queue's tail to
// its file (a pwrite per queue, ~12 µs of CPU each). A queue's tail longer
// than its share of 64 MiB is written to its file instead, which bounds
// the memory. A new journal starts (every tail written to its file first,
// then the old journal removed once bbolt names the new one) when the
// journal passes 64 MiB, at the first checkpoint after open, and at the
// checkpoints of retention, snapshot installs and Close (persistLocked),
// so a clean stop leaves every unit in the queues' files.
//
// On open, the journal bytes the last checkpoint covers are replayed into
// the consume queues (a unit the files hold is checked, and one a crash
// tore is replaced), then the queues are cut back to the persisted queue
// offsets and the index to its checkpoint, so files and bbolt agree at the
// applied index; the entries after it are applied again from the log (by
// Open itself in single-node mode, by raft otherwise). A store written
// before the journal has no journal key in bbolt and replays nothing
// (every checkpointed unit is in its files); one restored from a snapshot
// neither (Restore drops the leader's key). A binary from before the
// journal cannot open a store that stopped uncleanly with journaled
// units: it finds queues shorter than bbolt says. The interval trades
// recovery replay (at most one interval of entries) against the
// checkpoint's work: the pages of the index dirtied since the last, and
// per queue written a journal record and a bbolt put of its next offset.
// A checkpoint that wrote or journaled more than 512 queues pushes the
// next one back in proportion, up to 8 intervals (checkpointInterval):
// 8 s with 4,096 active queues or more, 2 s with 1,024.
package store
