package message

import "hash/crc32"

// Magic codes at OffMagicCode.
const (
	// MagicV1 marks a record whose TOPICLEN is 1 byte. Append writes it.
	MagicV1 uint32 = 0xDAA320A7
	// MagicV2 marks a record whose TOPICLEN is 2 bytes; RocketMQ writes it
	// only for topics longer than MaxTopicLength.
	MagicV2 uint32 = 0xDAA320AB
	// MagicBlank marks the end-of-file filler in RocketMQ's own CommitLog
	// files. raftmq never writes it; Decode and Parse reject it as corrupt.
	MagicBlank uint32 = 0xCBD43194
)

// Offsets of the fields that never move. Fields after BORNHOST move by 12
// bytes for each IPv6 host; see the package documentation.
const (
	OffTotalSize      = 0
	OffMagicCode      = 4
	OffBodyCRC        = 8
	OffQueueID        = 12
	OffFlag           = 16
	OffQueueOffset    = 20
	OffPhysicalOffset = 28
	OffSysFlag        = 36
	OffBornTimestamp  = 40
	OffBornHost       = 48
)

// Field and record sizes.
const (
	// HostSizeV4 is the size of an IPv4 host field: address 4, port 4.
	HostSizeV4 = 4 + 4
	// HostSizeV6 is the size of an IPv6 host field: address 16, port 4.
	HostSizeV6 = 16 + 4
	// FixedSizeV4 is the size of a V1 record with IPv4 hosts and an empty
	// body, topic and properties: every fixed-width field and length prefix.
	FixedSizeV4 = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + HostSizeV4 + 8 + HostSizeV4 + 4 + 8 + 4 + 1 + 2
)

// Limits.
const (
	// MaxBodySize is the largest body Append accepts (RocketMQ's default
	// maxMessageSize).
	MaxBodySize = 4 << 20
	// MaxTopicLength is the longest topic, in bytes, of a V1 record.
	MaxTopicLength = 127
	// MaxTopicLengthV2 is the longest topic Decode accepts in a V2 record.
	MaxTopicLengthV2 = 32767
	// MaxPropertiesSize is the largest encoded properties string (a Java
	// short length).
	MaxPropertiesSize = 32767
)

// SYSFLAG bits (RocketMQ's MessageSysFlag).
const (
	SysFlagCompressed = 0x1
	SysFlagMultiTags  = 0x2

	// The transaction type is SYSFLAG & SysFlagTransactionMask.
	SysFlagTransactionNotType  = 0x0
	SysFlagTransactionPrepared = 0x4
	SysFlagTransactionCommit   = 0x8
	SysFlagTransactionRollback = 0xC
	SysFlagTransactionMask     = 0xC

	// SysFlagBornHostV6 is set when BORNHOST holds a 16-byte address.
	SysFlagBornHostV6 = 0x10
	// SysFlagStoreHostV6 is set when STOREHOST holds a 16-byte address.
	SysFlagStoreHostV6 = 0x20

	SysFlagNeedUnwrap = 0x40 // RocketMQ 5 inner batch
	SysFlagInnerBatch = 0x80 // RocketMQ 5 inner batch

	// The compression type of a compressed body is
	// SYSFLAG & SysFlagCompressionMask; 0 means zlib (older clients).
	SysFlagCompressionLZ4  = 0x100
	SysFlagCompressionZSTD = 0x200
	SysFlagCompressionZLIB = 0x300
	SysFlagCompressionMask = 0x700
)

// BodyCRC returns the BODYCRC of body as RocketMQ computes it: CRC-32
// (IEEE) with the top bit cleared, so the Java int is never negative.
func BodyCRC(body []byte) int32 {
	return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF)
}

// hostSizes returns the sizes of the BORNHOST and STOREHOST fields that
// sysFlag announces.
func hostSizes(sysFlag int32) (born, store int) {
	born, store = HostSizeV4, HostSizeV4
	if sysFlag&SysFlagBornHostV6 != 0 {
		born = HostSizeV6
	}
	if sysFlag&SysFlagStoreHostV6 != 0 {
		store = HostSizeV6
	}
	return born, store
}
