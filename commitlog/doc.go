// Package commitlog is raftmq's CommitLog: the raft log itself, stored as
// segmented, checksummed entry files. There is no second write-ahead log
// beside it, so a message is written once: the bytes a producer sent are
// the bytes raft replicates and the bytes a consumer reads back.
//
// # Files
//
// A log directory holds fixed-size segment files named by the global byte
// offset of their first byte, as 20 zero-padded decimal digits
// (00000000000000000000, 00000000001073741824, ...), a checkpoint file, and
// for sealed segments an index sidecar named <segment>.idx. A byte's global
// offset (its "physical offset") is the segment's name plus its position in
// the segment; RocketMQ's offsetMsgId and the consume queues address
// messages by it. Segments are preallocated to their full size and written
// in place; unwritten bytes read as zero. An entry never straddles two
// segments. All integers are big-endian, as in RocketMQ's own files.
//
// Preallocation is a Truncate, so a segment starts as a sparse file. To keep
// block allocation out of the appends' fdatasync, a background goroutine
// (the segment warm-up, RocketMQ's "warm mapped file"; Options.WarmAhead,
// on by default in FlushSync mode) writes zeros into the active segment a
// bounded distance ahead of the write position, in block-aligned chunks,
// and fdatasyncs them. It only ever writes zeros over bytes that read as
// zero and never touches a byte the writer has written or is writing (see
// warm.go for the coordination), so it changes no file's content: the
// on-disk format below, and recovery, are the same with and without it. A
// zero-filled tail reads exactly like a sparse one, and a crash while it
// runs leaves nothing recovery must know about. A full device (ENOSPC)
// pauses the warm-up until space frees; another failure (EIO) is logged and
// stops it. Neither fails the log.
//
// The flusher also keeps the log's page-cache footprint bounded: synced
// bytes more than Options.CacheWindow (1 GiB) behind the durable end are
// released from the page cache, so new appends reuse pages instead of
// making the kernel find fresh ones (cache.go). Like the warm-up, this
// changes no byte on disk.
//
// Segment header, 40 bytes at position 0 of every segment:
//
//	| off | size | field                                                  |
//	|   0 |    4 | magic 0x524D514C ("RMQL")                              |
//	|   4 |    4 | format version (1)                                     |
//	|   8 |    8 | segment size in bytes                                  |
//	|  16 |    8 | base: global offset of this segment (= its file name)  |
//	|  24 |    8 | raft index of the segment's first entry (to be)        |
//	|  32 |    4 | start: position of the first entry in this segment    |
//	|  36 |    4 | CRC-32C of bytes 0..35                                 |
//
// start is 40 except in a log reset to a position inside a segment (a
// follower installing a snapshot), where it is the position the leader's
// next entry has, so every replica keeps identical physical offsets.
//
// Entry, a 40-byte header then the body:
//
//	| off | size | field                                                  |
//	|   0 |    4 | magic 0x524D5145 ("RMQE")                              |
//	|   4 |    4 | size: header + body length                             |
//	|   8 |    8 | raft index                                             |
//	|  16 |    8 | raft term                                              |
//	|  24 |    4 | raft entry type (0 normal, 1 conf change, 2 v2)        |
//	|  28 |    4 | body length                                            |
//	|  32 |    4 | reserved, zero                                         |
//	|  36 |    4 | CRC-32C (Castagnoli) of bytes 0..35 and the body       |
//	|  40 |    n | body                                                   |
//
// Entries follow each other with no padding. When the next entry does not
// fit in the rest of a segment, the writer puts an 8-byte seal there if room
// allows (magic 0x524D5153 "RMQS", then the number of bytes left in the
// segment as uint32), syncs the segment, and starts the next one. So every
// segment but the last is fully synced and ends with a seal or with fewer
// than 8 spare bytes; zeros where an entry should be in such a segment are
// corruption, not a torn write.
//
// Checkpoint file "checkpoint": two 64-byte slots at offsets 0 and 4096,
// written alternately and fsynced, the valid one with the higher sequence
// winning:
//
//	| off | size | field                                        |
//	|   0 |    4 | magic 0x524D5143 ("RMQC")                    |
//	|   4 |    4 | reserved                                     |
//	|   8 |    8 | sequence number                              |
//	|  16 |    8 | durable index: entries <= it were synced     |
//	|  24 |    4 | CRC-32C of bytes 0..23                       |
//
// It is a lower bound, refreshed by the flusher at most every
// CheckpointInterval and lowered (durably, first) before a suffix is
// truncated.
//
// Index sidecar <segment>.idx, written atomically once a segment is sealed,
// so opening a large log need not scan its sealed segments:
//
//	| off | size | field                                        |
//	|   0 |    4 | magic 0x524D5149 ("RMQI")                    |
//	|   4 |    4 | entry count n                                |
//	|   8 |    8 | first raft index                             |
//	|  16 |  4*n | position of each entry in the segment        |
//	| ... |    4 | CRC-32C of everything before it              |
//
// # One writer
//
// The log has one writer at a time, and the code rests on it. The rule is
// a type: the writing methods (Append, AppendSync, TruncateSuffix, Reset)
// are on Writer, not on Log, and Log.Writer hands out one Writer at a
// time; a second call fails with ErrWriterTaken until the first handle's
// Release (and with ErrClosed after Close). Code holding only a *Log can
// read the log, drop its prefix, sync and close it, but not write it.
//
// The handle's owner must still not make two of its calls at once. In a
// broker raftlog.OpenStorage takes the writer and Storage.Close releases
// it; the calls are raft's goroutine's: Storage.Append for the entries of
// each Ready (a conflict truncates the suffix inside Append), and
// Storage.ApplySnapshot's Reset, which runs on the applier goroutine while
// raft's goroutine waits for it (the channel hand-off orders the two). A
// standalone store (store.OpenStandalone) holds the writer until its
// Close, and its calls are whoever holds Standalone's mutex. Callers that
// append from several goroutines (tests, benchmarks) serialise the calls
// themselves.
//
// The writer alone changes the end of the log: the active segment, its
// entry positions and write position, the last index and term, and the
// tail cache's newest chunks; readers see those under Log.mu, which the
// writer takes to change them, and the writer, being their only writer,
// reads them without it. Its scratch buffers (encoding, direct-I/O block)
// and its pointer to the active segment are its own (Log.w), under no
// lock. An append encodes and writes its entries past the end readers see
// without holding Log.mu, then takes the write lock once to publish them
// (positions, end, last index, tail cache chunk); only a segment roll, a
// truncation and a reset hold it while they change files.
//
// Readers (Entries, Term, Position, Scan, ReadAt, ReadMany, FirstIndex,
// LastIndex, Segments, ...) may run on any goroutine, concurrently with
// everything, under Log.mu's read lock. They see only what the writer has
// published: an entry becomes visible with the last index that covers it,
// after its bytes are written, and a truncated entry disappears (from the
// tail cache first) before its bytes change. So a reader never sees a
// half-written entry or one a truncation removed.
//
// That a handle's calls do not overlap is checked in race-detector builds
// (the tests'): a writing call made while another is under way panics.
// Without -race the check is not compiled in.
//
// Three other actors touch the log beside the writer, none of them at its
// end:
//
//   - DropPrefix (retention, via raftlog.Storage.Compact or a standalone
//     store's retention, on the store's retention goroutine) may run
//     concurrently with the writer: it removes whole segments below the
//     active one, raises the first index and drops the tail cache's oldest
//     chunks, all under Log.mu and flushMu, and never touches the active
//     segment.
//   - The sync (syncActive) reads the last index and the active segment
//     under Log.mu's read lock, fdatasyncs it holding flushMu (which
//     everything that closes a segment file takes too) and publishes the
//     durable index under sm. AppendSync runs it on the writer's own
//     goroutine (with one writer there is no group commit to gain from a
//     hand-off); the flusher goroutine runs it after a plain Append, for
//     Sync, and every FlushInterval in FlushAsync mode, and writes the
//     lazy checkpoint when one is due (ckptMu serialises checkpoint writes
//     with the writer's forced ones). The sync changes no log state but a
//     sticky error after a failed fdatasync.
//   - The segment warm-up goroutine writes zeros ahead of the writer's end
//     through a handle of its own, coordinated with the writer through
//     Log.warm's mutex only (warm.go).
//
// Close must not run concurrently with the writer either; the writer's
// owner stops writing first. (An append that races Close anyway fails: it
// finds the log closed when it publishes, or its file closed.)
//
// # Recovery
//
// Open scans the last segment (and any segment without a valid sidecar),
// checking each entry's magic, size, CRC, index continuity and term order.
// The first bad entry ends the log if its index is above the durable index
// (the larger of the checkpoint and Options.DurableIndex): that is a torn
// tail of unsynced writes, and it is cut, zeroed and synced. A bad entry at
// or below the durable index is corruption of synced data: Open fails with a
// *CorruptError naming the file and offset, and nothing is truncated.
//
// These constants are part of the on-disk format and must not change.
package commitlog
