// Package offsets is the broker's replicated state machine storage: a bbolt
// database holding everything a consumer relies on besides the messages
// themselves (topics, subscription groups, committed consumer offsets, the
// next offset of every consume queue), which changes only by applying
// committed raft entries, so that it is the same on every replica and
// survives a crash; and buckets for a producer dedupe window keyed by the
// producer's unique key (the store keeps there the dedupe table of the last
// snapshot it installed: package store, dedupe.go).
//
// Every node applies committed raft entries into this database in batches;
// one applied batch is one Update transaction that also records the applied
// raft index and term (Tx.SetApplied), so after a restart the node knows
// exactly which entries it has applied and resumes after them. Because each
// batch commits atomically, the stored state always equals "the log applied
// up to AppliedIndex", never a prefix of a batch.
//
// # Buckets
//
// The database has nine top-level buckets. All integers are big-endian so
// that bbolt's byte order is numeric order. These layouts are part of the
// on-disk format and must not change without bumping formatVersion.
//
// meta ("meta"): one-byte kind, then the rest of the key.
//
//	key  [0x01]                       format version
//	val  | version u32 (4) |
//	key  [0x02]                       applied raft position
//	val  | index u64 (8) | term u64 (8) |            offAppliedIndex=0, offAppliedTerm=8
//	key  [0x03] | name bytes          opaque blob owned by the store (Tx.Meta)
//	val  blob bytes, as given
//
// Escaped strings. Names inside composite keys are written with an
// order-preserving escape, so that keys sort by (first name, second name,
// queue id) in plain byte order and no byte in a name can be mistaken for a
// separator:
//
//	each 0x00 byte of the name -> 0x00 0xFF
//	every other byte           -> itself
//	end of the name            -> 0x00 0x01
//
// A 0x00 in an escaped string is always followed by 0xFF or 0x01; anything
// else is corruption. The terminator sorts below every escaped or plain byte,
// so "a" < "a\x00" < "ab" holds for the escaped forms too.
//
// consumer offsets ("consumer_offsets"):
//
//	key  | esc(group) | esc(topic) | queueId u32 (4) |
//	val  | next offset to consume, int64 two's complement (8) |
//
// queue offsets ("queue_offsets"), the next consume-queue offset the store
// assigns in each queue, so queue offsets are a function of the log:
//
//	key  | esc(topic) | queueId u32 (4) |
//	val  | next queue offset, int64 two's complement (8) |
//
// Queue ids are non-negative int32 values; a stored queue id with the top bit
// set is corruption.
//
// topics ("topics"):
//
//	key  topic name bytes
//	val  TopicConfig as JSON (RocketMQ field names)
//
// subscription groups ("subscription_groups"):
//
//	key  group name bytes
//	val  SubscriptionGroupConfig as JSON (RocketMQ field names)
//
// dedupe ("dedupe"), the idempotent-append window keyed by the producer's
// unique key (the store's key is topic, reconsume count and UNIQ_KEY, its
// result the stored messages a retry matches; Tx.ForEachDedupe reads them
// all back, Tx.ClearDedupe empties both buckets):
//
//	key  producer key bytes
//	val  | timestamp ms u64 (8) | original send result bytes |   offDedupeTS=0, offDedupeResult=8
//
// dedupe by time ("dedupe_by_time"), a secondary index that lets
// Tx.ExpireDedupe drop the oldest entries first:
//
//	key  | timestamp ms u64 (8) | producer key bytes |
//	val  empty
//
// Every dedupe entry has exactly one dedupe-by-time entry with the same
// timestamp. Timestamps are non-negative milliseconds; they must come from
// the replicated log (for example the entry's store timestamp), never from a
// node's clock, or replicas would expire different entries.
//
// schedule ("schedule"), the delivery progress of each queue of the
// schedule topic (delayed and timer messages): the next unit to deliver.
//
//	key  | queueId u32 (4) |
//	val  | next offset, int64 two's complement (8) |
//
// transactions ("transactions"), the pending transactional half messages,
// keyed by their queue offset in the half topic; the value is the
// transaction's record, encoded by the store (package txn):
//
//	key  | half queue offset u64 (8) |
//	val  record bytes, as given
//
// pop ("pop"), the pop consumption state of each consumer group's view of
// a queue: its cursor and in-flight records, encoded by the store (package
// store/pop); the key is the consumer offset's:
//
//	key  | escaped group | escaped topic | queueId u32 (4) |
//	val  state bytes, as given
//
// # Snapshots and RocketMQ config files
//
// DB.WriteSnapshot streams a consistent copy of the whole database for a raft
// snapshot; RestoreSnapshot installs one in place of a closed database.
// ExportConfig and ImportConfig convert to and from RocketMQ's
// config/topics.json, consumerOffset.json and subscriptionGroup.json. Import
// writes this node's database directly, outside raft: use it to bootstrap a
// group, not on a running replica.
package offsets
