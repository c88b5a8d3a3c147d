// Package consumequeue holds raftmq's consume queues: per topic and queue, a
// dense array of fixed-width units that map a queue offset (the position a
// consumer pulls from) to a message in the commit log. Consume queues are
// derived data, built by the apply loop from committed log entries only, so a
// message's queue offset is a deterministic function of the committed log
// order (design.md point 4) and is the same on every replica.
//
// # Files
//
// The layout is RocketMQ's (store/ConsumeQueue.java), so tools that read a
// RocketMQ store directory can read ours. A queue lives in the directory
//
//	<root>/<topic>/<queueId>/
//
// (queueId in decimal, no padding) as files of UnitsPerFile units each
// (default 300,000, so 6,000,000 bytes). A file is named by the byte offset
// of its first unit, as 20 zero-padded decimal digits:
//
//	00000000000000000000  units 0 .. 299,999
//	00000000000006000000  units 300,000 .. 599,999
//
// Queue offset n lives at byte n*20 of the concatenated files, that is at
// byte (n mod UnitsPerFile)*20 of file floor(n/UnitsPerFile)*UnitsPerFile*20.
// A unit is 20 bytes, integers big-endian:
//
//	| off | size | field                                              |
//	|   0 |    8 | commitLogOffset int64: physical offset of message |
//	|   8 |    4 | size int32: message length in the commit log      |
//	|  12 |    8 | tagsCode int64: hash of the TAGS property          |
//
// tagsCode is RocketMQ's tags.hashCode() widened to int64 (see
// commitlog/message.TagsCode); this package never interprets it.
//
// There is no header, magic number or checksum: the format is RocketMQ's,
// and the commit log, which does carry checksums, is the source of truth
// from which a damaged queue can be rebuilt. These offsets and sizes are part
// of the on-disk format and must not change.
//
// Files are preallocated to their full size when created, so unwritten units
// read as zero. A unit whose size field is 0 marks the end of the written
// units. A blank unit (commitLogOffset 0, size math.MaxInt32, tagsCode 0,
// RocketMQ's fillPreBlank) fills the start of the first file of a queue that
// was reset to begin at a later offset (ResetTo); blanks may appear only
// there. Every other written unit has commitLogOffset >= 0 and size > 0, and
// units never overlap in the commit log: unit n+1's commitLogOffset is at
// least unit n's commitLogOffset plus its size.
//
// # Writing and durability
//
// A queue has one writer. Put appends at MaxOffset with a single WriteAt of
// 20 bytes. PutBuffered appends to an in-memory write buffer instead, and
// Flush (also Sync, Close, the next Put) writes every buffered unit with one
// WriteAt per file, so an owner that applies a batch of messages pays one
// write per queue per batch rather than one per message. Buffered units are
// invisible to readers: MaxOffset moves past units only once they are in
// the file. Sync writes the buffer and fdatasyncs the files written since
// the last Sync. Before a new file is created the previous one is synced, and
// a new file is preallocated, synced, and its directory synced before its
// first unit is written. So every file but the last is complete and durable,
// and only the last file can hold unsynced units. Readers see a file through
// a read-only mapping of the whole file.
//
// # Recovery
//
// OpenQueue checks that the files are contiguous and of the right size
// (every file but the last exactly UnitsPerFile*20 bytes, names multiples of
// that size; a short last file, left by a crash during its creation, is
// extended). It validates the first and last unit of every file and every
// unit of the last file up to the first unit with size 0, which becomes
// MaxOffset. A malformed unit (negative offset or size) or an overlapping
// one inside that range is corruption: OpenQueue fails with an error
// wrapping ErrCorrupt that names the file and byte offset, and never
// truncates it away. Units after the first zero-size unit of the last file
// can only be unsynced writes that a crash reordered; they are zeroed (with
// a warning) so they can never reappear behind later writes. Units in the
// middle of complete files are checked when read: Get and Read return
// ErrCorrupt rather than a malformed unit.
//
// The unsynced tail has no checksum, so a unit that a crash tore between two
// disk sectors may look valid with a wrong tagsCode. The owner therefore
// replays committed entries from its durable apply checkpoint after a crash:
// Put of a unit that is already present with identical content is a no-op,
// and a different one fails with ErrOffsetMismatch, after which the owner
// truncates the queue (TruncateTo or Set.TruncatePhy) and puts again. A
// tear that keeps a unit's size but loses its commitLogOffset reads as
// corruption; as the queue is derived data, the owner can then remove the
// queue directory and rebuild it from the commit log.
//
// MinOffset is not persisted: after OpenQueue it is the first unit of the
// first file. The owner calls DeleteBefore with the commit log's minimum
// physical offset after opening, as RocketMQ's correctMinOffset does.
//
// # Concurrency
//
// A Queue allows one writer (Put, PutBuffered, Flush, TruncateTo,
// TruncatePhy, ResetTo, DeleteBefore, Sync, Close; these are also serialised
// by a mutex, so a flusher goroutine may call Sync while the apply loop calls
// Put) and any
// number of concurrent readers (Get, Read, SearchOffset, MinOffset,
// MaxOffset). A Set is safe for concurrent use.
package consumequeue
