// Package consumequeue holds raftmq's consume queues: per topic and queue, a
// dense array of fixed-width units that map a queue offset (the position a
// consumer pulls from) to a message in the commit log. Consume queues are
// derived data, built by the apply loop from committed log entries only, so a
// message's queue offset is a deterministic function of the committed log
// order: every replica applies the same entries in the same order, so it
// assigns the same queue offsets, and a consumer's offset means the same
// message on whichever replica it pulls from.
//
// # Files
//
// The layout is RocketMQ's (store/ConsumeQueue.java), so tools that read a
// RocketMQ store directory can read ours. A queue lives in the directory
//
//	<root>/<topic>/<queueId>/
//
// (queueId in decimal, no padding) as files of UnitsPerFile units each
// (default 300,000, so 6,000,000 bytes; the last file may be shorter, see
// below). A file is named by the byte offset of its first unit, as 20
// zero-padded decimal digits:
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
// message.TagsCode); this package never interprets it.
//
// There is no header, magic number or checksum: the format is RocketMQ's,
// and the commit log, which does carry checksums, is the source of truth
// from which a damaged queue can be rebuilt. These offsets and sizes are part
// of the on-disk format and must not change.
//
// A file is created with room for 204 units (4,080 bytes: one 4 KiB disk
// block), or for the blank units it must start with, and grows as units are
// written: its size doubles (Truncate, which fills with zeros) until it
// holds the units to write, up to UnitsPerFile*20 bytes. Every file but the
// last is therefore exactly UnitsPerFile*20 bytes, as in RocketMQ, and the
// last file is at most that. Unwritten units read as zero, and units beyond
// the end of the last file count as unwritten. A unit whose size field is 0
// marks the end of the written units. (RocketMQ's broker refuses to load a
// file shorter than its configured size: to hand a directory to one,
// extend each queue's last file to UnitsPerFile*20 bytes first, e.g. with
// truncate -s 6000000. Tools that read the units need nothing.)
//
// A blank unit (commitLogOffset 0, size math.MaxInt32, tagsCode 0,
// RocketMQ's fillPreBlank) fills the start of the first file of a queue that
// was reset to begin at a later offset (ResetTo); blanks may appear only
// there. Every other written unit has commitLogOffset >= 0 and size > 0, and
// units never overlap in the commit log: unit n+1's commitLogOffset is at
// least unit n's commitLogOffset plus its size.
//
// # Writing and durability
//
// A queue has one writer. PutBuffered appends a unit at the writer's end to
// the queue's memory buffer; Flush (also Put, which is PutBuffered and
// Flush) makes the buffered units visible to readers: MaxOffset moves past
// them, and Get, Read and SearchOffset read them from memory until they are
// in the file. Flush writes them to the file only when they reach a spill
// boundary (a multiple of 1,024 units, 20,480 bytes, from the start of
// their file, or the start of the next file), and then only up to the
// boundary: such a write covers five whole 4 KiB pages that no write
// touched before, so it does not wait for a page that a concurrent sync is
// writing back, and a queue written one unit per Flush costs one write per
// 1,024 units rather than one per unit. Sync, Close, MarkDirty,
// WriteBuffered, DeleteBefore and PutBuffered (once maxPending units wait)
// write every unit in memory, one WriteAt per file. A queue keeps at most a
// little more than 1,024 flushed units (plus what was put since the last
// Flush) in memory between such calls.
//
// Sync writes the units in memory and fdatasyncs the files written since
// the last Sync (a file's growth is made durable by the same fdatasync as
// the units written into it). Without Options.OwnerSyncsFS, the previous
// file is synced before a new file is created, and a new file is sized,
// synced, and its directory synced before its first unit is written. So
// every file but the last is complete (full size) and durable, and only
// the last file can hold unsynced units or an unsynced growth.
//
// An owner may instead keep a tail journal (Set.MarkJournal, journal.go):
// a checkpoint appends the units in memory to one journal record per
// queue, the units stay in memory until their spill, and the owner replays
// the journal (Queue.ReplayJournal) after a crash.
//
// With Options.OwnerSyncsFS, the owner makes everything durable with one
// SyncFS per checkpoint (Set.MarkDirty, or Set.MarkFlushed beside the
// writer, then SyncFS, Set.SyncedByFS) and cuts
// the queues back to its last checkpoint after a crash, so the write path
// issues no sync: a queue's directories and files are created, grown and
// rolled over without one, and a file closed to make room in the cache is
// not fdatasynced first. The one exception: before a queue creates its
// second file, it syncs its directory unless a checkpoint already covered
// the creation of its first file, so a crash never keeps a later file and
// loses the first one (which would move MinOffset past the offset the
// owner cuts back to). Sync, Close, TruncateTo, DeleteBefore and ResetTo
// sync as without the option.
//
// A write error is sticky: the queue refuses writes from then on; units
// already visible stay readable from memory, and units never flushed are
// dropped. The owner rebuilds the queue from the commit log after a
// restart. Readers see a file through a read-only mapping of its current
// size; the writer replaces the mapping when the file grows.
//
// # Recovery
//
// OpenQueue checks that the files are contiguous and of the right size
// (names multiples of UnitsPerFile*20, every file but the last exactly that
// many bytes and the last at most that). A last file whose size is not a
// multiple of 20 bytes ends with part of a unit: a write past the file's
// old end that a crash tore after losing the growth before it. That unsynced
// partial unit is cut off. OpenQueue validates the first and last unit of
// every complete file and every unit of the last file up to the first unit
// with size 0 (or its end), which becomes MaxOffset. A malformed unit
// (negative offset or size) or an overlapping one inside that range is
// corruption: OpenQueue fails with an error wrapping ErrCorrupt that names
// the file and byte offset, and never truncates it away. Units after the
// first zero-size unit of the last file can only be unsynced writes that a
// crash reordered; they are zeroed (with a warning) so they can never
// reappear behind later writes. Since the last file is at most about twice
// the size of its written units (or 4,080 bytes), this scan reads little
// for a queue with few units. Units in the middle of complete files are
// checked when read: Get and Read return ErrCorrupt rather than a
// malformed unit.
//
// Recovery reads with ReadAt, never through the mappings: a file grows by
// extension, so past its units it is sparse, and on tmpfs a read of a hole
// through a shared mapping allocates a page, a SIGBUS on a full device.
// Zeroing writes only over the pages that hold stale bytes (allocated
// already), so a queue reopens on a full device without needing space; the
// read paths use the mappings only below the end of the written units.
//
// With Options.OwnerSyncsFS, a crash can also leave a file that is not the
// last one incomplete, or lose a file's directory entry, since rolls and
// creations are not synced. Recovery relies on this: a unit the owner's
// last completed checkpoint covers was written before that checkpoint's
// SyncFS began, and so were the growth of its file and the creation of its
// file (a file is created when its first unit is written); the SyncFS made
// them all durable. Hence: if a file is missing between two others, it was
// created after the checkpoint, and so were the later ones; if a file
// other than the last is shorter than UnitsPerFile*20 bytes, or the first
// or last unit that recovery checks in it has size 0, that file was not
// complete at the checkpoint. No checkpoint covers a unit after that
// point, so recovery removes the files after it (with a warning) instead
// of failing, and treats the incomplete file as the last one (scanning,
// cutting and zeroing its tail as above). A first file lost while a later
// one survives cannot happen (see the exception above), so MinOffset is
// never past the owner's checkpoint. The only units removed are ones the
// owner's TruncateTo would drop anyway; corruption (a malformed or
// overlapping unit) still fails OpenQueue, and a file lost by other means
// shows as a MaxOffset below the owner's record, which the owner reports.
// A queue's directory lost with its creation holds no covered unit either.
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
// # Open files
//
// A file is open (one descriptor and one read-only mapping) only while it is
// in use. The queues of a Set share a cache of at most Options.MaxOpenFiles
// open files (DefaultMaxOpenFiles, 1,024, unless set; a Queue opened alone
// with OpenQueue has its own). OpenFilesForProcess suggests a bound from the
// process's descriptor limit (half of it, 1,024 to 16,384), which the store
// uses by default: a miss costs an open, a mapping and closing another
// file (~58 µs), so a Set whose active queues outnumber its open files
// pays that on almost every spill and checkpoint write. A file opens on its
// first read (or, without OwnerSyncsFS, write) and stays open until the
// cache needs room: the least recently used files,
// over all queues, are then closed (CLOCK's approximation of LRU, so that a
// use costs one atomic load and no lock; without OwnerSyncsFS, files of
// queues with unsynced writes are passed over once). The next read or
// write reopens a closed file. With OwnerSyncsFS the writer opens no file
// into the cache at all: it creates, grows, writes and syncs a file that
// no reader has open through a descriptor opened for that call alone (an
// open and a close, no mapping, no other file closed for it; one per spill
// of 1,024 units), and recovery closes the files it read. So a queue that
// is only written, its readers served from memory, holds no descriptor,
// mapping or handle: with many queues that is most of what the collector
// would otherwise mark per queue. Units in memory need no open file: a put
// or a Flush opens none, and closing a file leaves its queue's units in
// memory. Without OwnerSyncsFS, closing a file that holds unsynced writes
// fdatasyncs it first, so no file is closed while it still needs a sync (a
// failed sync there is the queue's sticky write error); with it, the file
// is closed as it is and stays dirty until SyncedByFS (a Sync syncs it
// through a descriptor of its own). A file is closed only with both of its
// queue's locks held, the one writers hold and the one readers hold, so a
// mapping is never unmapped while a reader reads it, and the writer never
// sees a file closed under it.
//
// The files to close are chosen and closed by the caller that opened one
// too many, once it has released its own queue's locks: it never holds a
// queue lock while it waits for another's, so eviction cannot deadlock. The
// cache may hold more than MaxOpenFiles files for a moment: the files that
// concurrent calls have opened and not yet evicted for, at most the two or
// so files one call touches per caller. Set.OpenFiles reports the count.
//
// Recovery (OpenQueue, OpenSet) opens the last file of each queue to scan
// its tail, and a complete file only to check its first and last unit,
// closing it again at once (and, with OwnerSyncsFS, the last one too). Retention (DeleteBefore) and TruncatePhy open no
// file of a queue they leave unchanged: the queue remembers the PhyOffset of
// its first unit and of its last.
//
// # Cost of an idle queue
//
// An idle queue (a few units, its file closed) costs no descriptor and no
// mapping, 450 to 650 bytes of Go heap (462 bytes each for 80,000 queues of
// one unit, 659 for 2,000; see TestMeasureIdleQueues), and on disk its
// directory and one file of 4,080 bytes: 8.7 KB of allocated blocks on ext4
// (4 KiB for the file, 4 KiB for its directory, an eighth of a 4 KiB topic
// directory). A Set of 80,000 idle queues (10,000 topics of 8 queues) thus
// holds 35 MiB of heap, at most MaxOpenFiles descriptors and mappings, and
// 700 MB of disk; it reopened in 7.4 s, reading only each queue's 4,080-byte
// last file (with files created at 6,000,000 bytes, recovery read 6 MB of
// zeros per queue: 49 s for 2,000 queues).
//
// # Concurrency
//
// A Queue allows one writer (Put, PutBuffered, Flush, WriteBuffered,
// TruncateTo, TruncatePhy, ResetTo, DeleteBefore, Sync, Close; these are
// also serialised by a mutex, so a flusher goroutine may call Sync or
// WriteBuffered while the apply loop calls Put) and any number of
// concurrent readers (Get, Read, SearchOffset, MinOffset, MaxOffset).
// Readers take the queue's read lock, as before units were kept in memory:
// they read the visible units in memory through a slice the writer
// replaces under the write lock, and the writer appends only beyond it and
// never rewrites bytes it published until it has replaced the slice. A Set
// is safe for concurrent use; Set.Queue finds an open queue with one map
// lookup under a read lock.
package consumequeue
