// Package index maps message keys to CommitLog physical offsets. It keeps
// RocketMQ's IndexFile format, so a file written here can be read by
// RocketMQ's tooling and vice versa.
//
// # Only hashes are stored
//
// An entry records a 4-byte hash of its key, never the key. Different keys
// with the same Java String.hashCode ("Aa" and "BB", "AaAa" and "BBBB") are
// indistinguishable here. Query therefore returns CANDIDATE offsets: the
// caller MUST read each message at the returned offset and compare its real
// topic and key before using it (RocketMQ's client does the same and logs
// "maybe hash duplicate").
//
// Keys are built by the caller as topic + "#" + key; the store indexes the
// UNIQ_KEY property and each space-separated KEYS value.
//
// # Files
//
// The index is a directory of files named yyyyMMddHHmmssSSS (UTC, 17 digits)
// after the store timestamp of the file's first entry. The name is a pure
// function of the entries, never the wall clock: when it would not sort after
// the previous file's name, it is that name plus 1 ms. Only the newest file
// (the active one) is written; a file is full when its indexCount reaches
// MaxEntries, and the next Put seals it and starts a new one.
//
// A file is preallocated to its full size with Truncate, written with
// WriteAt, and read through a read-only mapping.
//
// # Writing
//
// Put does not write: it appends the entry to an in-memory buffer of the
// active file and sets the slot's new head in the file's slot table in
// memory, marking the slot's 4 KiB page of the file, and Query reads both
// as if they were in the file, so a key is found as soon as its Put
// returns. Flush, Sync, Close and sealing write the buffer: the entries,
// which are contiguous, with one WriteAt, then each marked page's slots
// from the table, adjacent pages with one WriteAt of up to 64 KiB (the
// unchanged slots of a page are rewritten with their current bytes). Put
// flushes by itself once 65,536 entries are buffered. The bytes written are
// exactly those that writing each Put at once would have produced; only the
// moment they reach the file changes.
//
// # On-disk format
//
// All integers are big-endian and signed (Java's ByteBuffer). With S =
// SlotCount and E = MaxEntries, a file is 40 + 4*S + 20*E bytes:
//
//	header, 40 bytes at offset 0:
//	| beginTimestamp(8) | endTimestamp(8) | beginPhyOffset(8) | endPhyOffset(8) | hashSlotCount(4) | indexCount(4) |
//	  0                   8                 16                  24                32                 36
//
//	slots, S x 4 bytes at offset 40:
//	| head(4) | head(4) | ... |          slot s at 40 + 4*s
//
//	entries, E x 20 bytes at offset 40 + 4*S:
//	| keyHash(4) | phyOffset(8) | timeDiff(4) | prevIndex(4) |   entry i at 40 + 4*S + 20*i
//	  0            4              12            16
//
// Header fields:
//   - beginTimestamp, beginPhyOffset: store timestamp (ms) and physical
//     offset of entry 1.
//   - endTimestamp: the largest store timestamp put (RocketMQ stores the last
//     one; the two agree while timestamps do not go backwards).
//   - endPhyOffset: physical offset of the last entry.
//   - hashSlotCount: number of non-empty slots.
//   - indexCount: ordinal of the next entry. It starts at 1, so entry 0 is
//     never used and a slot or prevIndex of 0 means "none". The file holds
//     entries 1 .. indexCount-1 and is full when indexCount >= E.
//
// A file whose header is all zeros has never had its header synced (see
// Crash safety). A file with indexCount 1 has no entries and every other
// header field 0.
//
// Slot s holds the ordinal of the newest entry whose keyHash % S == s, or 0.
//
// Entry fields:
//   - keyHash: |JavaHashCode(key)|, with Math.abs(MinInt32) mapped to 0 as
//     RocketMQ does; always >= 0.
//   - phyOffset: the message's CommitLog physical offset.
//   - timeDiff: (storeTimestamp - beginTimestamp) / 1000, in whole seconds,
//     clamped to [0, MaxInt32]. An entry's time is beginTimestamp +
//     1000*timeDiff, so it is rounded down to a whole second after
//     beginTimestamp; Query filters on that time.
//   - prevIndex: the ordinal of the previous entry of the same slot (the old
//     slot head), or 0. Chains are built by head insertion, so prevIndex is
//     always below the entry's own ordinal.
//
// The format has no magic number, version or checksum, because RocketMQ's
// has none. Open checks the header fields for consistency and Recover checks
// every entry it keeps, so corruption is reported as ErrCorrupt, but bit rot
// inside an entry that still looks valid cannot be detected.
//
// These constants are part of the on-disk format and must not change.
//
// # Crash safety
//
// Entries and slots reach the file when the write buffer is flushed (see
// Writing); the header is written to the file only when the file is sealed,
// by Sync and by Close. Sync writes the buffer, fsyncs every
// sealed-but-unsynced file and the active file, fsyncs the directory when
// files were created or removed, and returns a Checkpoint: the active file
// and its indexCount. Everything up to the checkpoint is durable. Entries
// put after it are lost in a crash if they were still buffered, and may
// survive in part if they were flushed; Recover handles both.
//
// After an unclean stop, Open tolerates the debris a crash leaves (files with
// an all-zero header or short size, created after the last Sync; slots of a
// file that is not full pointing at or beyond its indexCount) but refuses to
// write or query until Recover is given the last checkpoint the caller
// persisted. Not every crash leaves visible debris, so after an unclean stop
// the caller must call Recover even when Open reported nothing. Recover deletes newer files, cuts the checkpoint's file back to
// the checkpoint's entry count, checks each surviving entry, and rebuilds the
// slots and header from them. Putting the entries that followed the
// checkpoint again then yields byte-for-byte the files an uninterrupted run
// would have written.
//
// # Concurrency
//
// One goroutine, the writer, calls Put, Flush, Sync, Recover, DeleteBefore
// and Close. Query and Files may run concurrently with it and with each other. A
// mapping is only closed under the write lock, so never while a query reads
// it.
package index
