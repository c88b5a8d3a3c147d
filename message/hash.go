package message

import "unicode/utf16"

// JavaHashCode returns Java's String.hashCode() of s: h = 31*h + c over the
// string's UTF-16 code units, with int32 overflow. RocketMQ uses it for
// consume-queue tag codes and IndexFile key hashes, so raftmq files built
// from the same messages hold the same numbers.
func JavaHashCode(s string) int32 { return javaHash(s) }

// JavaHashCodeFrom returns JavaHashCode(p + s) given h = JavaHashCode(p),
// for any p that is valid UTF-8 (so that its last rune ends where s
// starts): the hash of a key of a fixed prefix without building the key.
func JavaHashCodeFrom(h int32, s string) int32 { return javaHashFrom(h, s) }

// javaHash is JavaHashCode over a string or its bytes (no conversion, and
// so no allocation, for the bytes of a record).
func javaHash[T ~string | ~[]byte](s T) int32 { return javaHashFrom(0, s) }

func javaHashFrom[T ~string | ~[]byte](h int32, s T) int32 {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 { // ASCII fast path: one byte is one UTF-16 unit
			h = 31*h + int32(c)
			continue
		}
		for _, u := range utf16.Encode([]rune(string(s[i:]))) {
			h = 31*h + int32(u)
		}
		return h
	}
	return h
}

// TagsCode returns the consume-queue tag code of a TAGS property value:
// RocketMQ's tags.hashCode() widened to int64. An empty tag has code 0.
func TagsCode(tags string) int64 { return int64(javaHash(tags)) }

// TagsCodeBytes is TagsCode of a TAGS value's bytes, as found in a record.
func TagsCodeBytes(tags []byte) int64 { return int64(javaHash(tags)) }
