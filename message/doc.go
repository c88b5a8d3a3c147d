// Package message encodes and decodes RocketMQ CommitLog message records:
// the bytes a broker stores for one message, and the bytes RocketMQ clients
// decode from pull, query and view responses. raftmq stores exactly this
// layout inside its raft entries, so a record can be sent to a client as is.
//
// # Record layout
//
// All integers are big-endian and signed (Java). Offsets are for IPv4 hosts
// (8-byte BORNHOST/STOREHOST); each IPv6 host adds 12 bytes and moves every
// later field. The offsets up to and including BORNHOST never move, and have
// named constants (OffTotalSize ... OffBornHost).
//
//	| off    | size    | field                     | notes                                   |
//	|      0 |       4 | TOTALSIZE                 | whole record, this field included       |
//	|      4 |       4 | MAGICCODE                 | MagicV1 0xDAA320A7 or MagicV2 0xDAA320AB |
//	|      8 |       4 | BODYCRC                   | CRC-32 (IEEE) of BODY & 0x7FFFFFFF      |
//	|     12 |       4 | QUEUEID                   |                                         |
//	|     16 |       4 | FLAG                      | user flag                               |
//	|     20 |       8 | QUEUEOFFSET               | consume-queue offset (a count)          |
//	|     28 |       8 | PHYSICALOFFSET            | CommitLog byte offset of the record     |
//	|     36 |       4 | SYSFLAG                   | SysFlag* bits                           |
//	|     40 |       8 | BORNTIMESTAMP             | producer clock, ms                      |
//	|     48 |  8 / 20 | BORNHOST                  | IP (4, or 16 if SysFlagBornHostV6) + port (4) |
//	|     56 |       8 | STORETIMESTAMP            | broker clock, ms                        |
//	|     64 |  8 / 20 | STOREHOST                 | IP (4, or 16 if SysFlagStoreHostV6) + port (4) |
//	|     72 |       4 | RECONSUMETIMES            |                                         |
//	|     76 |       8 | PREPAREDTRANSACTIONOFFSET | half message offset, for commit/rollback |
//	|     84 |       4 | BODYLEN                   |                                         |
//	|     88 |       b | BODY                      | compressed if SysFlagCompressed         |
//	|   88+b | 1 / 2   | TOPICLEN                  | 1 byte (V1, <= 127) or 2 bytes (V2)     |
//	|      … |       t | TOPIC                     | [%|a-zA-Z0-9_-]+                        |
//	|      … |       2 | PROPERTIESLEN             | <= 32767                                |
//	|      … |       p | PROPERTIES                | name \x01 value \x02 name \x01 value \x02 … |
//
// A V1 record with IPv4 hosts is therefore FixedSizeV4 (91) bytes plus
// body, topic and properties. BODYCRC is the masked value Java's
// UtilAll.crc32 computes (the top bit cleared), see BodyCRC; it covers the
// body only, so QUEUEOFFSET and PHYSICALOFFSET can be patched in place
// (PatchQueueOffset, PatchPhysicalOffset) without touching it.
//
// Append always writes MagicV1 and therefore rejects topics longer than
// MaxTopicLength; Decode and Parse also accept MagicV2 records. Property
// keys are written in sorted order, so equal messages encode to equal bytes.
//
// The message ID RocketMQ calls offsetMsgId (OffsetMsgID) is the store
// host's IP and port and the record's physical offset in uppercase hex.
//
// The offset, magic, flag and limit constants in this package are part of
// the on-disk format (and of RocketMQ's wire format) and must not change.
package message
