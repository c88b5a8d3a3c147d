package offsets

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEscapedLayout(t *testing.T) {
	require.Equal(t, []byte{'a', 0x00, 0x01}, appendEscaped(nil, "a"))
	require.Equal(t, []byte{0x00, 0xFF, 'b', 0x00, 0x01}, appendEscaped(nil, "\x00b"))
	require.Equal(t, []byte{0x00, 0x01}, appendEscaped(nil, ""))
	require.Equal(t,
		[]byte{'g', 0x00, 0x01, 'T', 0x00, 0x01, 0x00, 0x00, 0x01, 0x02},
		encodeConsumerOffsetKey("g", "T", 258))
	require.Equal(t, []byte{'T', 0x00, 0x01, 0x00, 0x00, 0x00, 0x07}, encodeQueueOffsetKey("T", 7))
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 2}, encodeApplied(5, 2))
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0x03, 0xE8, 'k'}, encodeDedupeTimeKey(1000, "k"))
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0x03, 0xE8, 'v'}, encodeDedupeValue(1000, []byte("v")))
	require.Equal(t, []byte{0x03, 'c', 'q'}, metaBlobKey("cq"))
}

// TestConsumerOffsetKeyOrder checks that byte order of encoded keys is
// (group, topic, queue) order, for names with arbitrary bytes.
func TestConsumerOffsetKeyOrder(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	alphabet := []byte{0x00, 0x01, 0xFF, 'a', 'b', '@'}
	name := func() string {
		b := make([]byte, rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	type key struct {
		group, topic string
		q            int32
	}
	keys := make([]key, 2000)
	for i := range keys {
		keys[i] = key{name(), name(), rng.Int32N(300)}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.topic, b.topic), cmp.Compare(a.q, b.q))
	})
	for i := 1; i < len(keys); i++ {
		a, b := keys[i-1], keys[i]
		ea, eb := encodeConsumerOffsetKey(a.group, a.topic, a.q), encodeConsumerOffsetKey(b.group, b.topic, b.q)
		if a == b {
			require.Equal(t, ea, eb)
			continue
		}
		require.Negative(t, bytes.Compare(ea, eb), "%q < %q", a, b)
		g, tp, q, err := decodeConsumerOffsetKey(eb)
		require.NoError(t, err)
		require.Equal(t, b, key{g, tp, q})
		// A group's prefix never matches another group's keys.
		require.Equal(t, a.group == b.group, bytes.HasPrefix(eb, consumerOffsetPrefix(a.group, "")))
	}
}

func TestDecodeCorrupt(t *testing.T) {
	for _, k := range [][]byte{
		nil,
		{'g'},             // unterminated
		{'g', 0x00},       // escape cut short
		{'g', 0x00, 0x02}, // bad escape
		{'g', 0x00, 0x01, 'T', 0x00, 0x01, 0, 0, 1},       // short queue id
		{'g', 0x00, 0x01, 'T', 0x00, 0x01, 0x80, 0, 0, 0}, // negative queue id
		{'g', 0x00, 0x01, 'T', 0x00, 0x01, 0, 0, 0, 0, 0}, // trailing byte
	} {
		_, _, _, err := decodeConsumerOffsetKey(k)
		require.ErrorIs(t, err, ErrCorrupt, "%x", k)
	}
	_, _, err := decodeApplied(make([]byte, 15))
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = decodeInt64(make([]byte, 9))
	require.ErrorIs(t, err, ErrCorrupt)
	_, _, err = decodeDedupeTimeKey(make([]byte, 8))
	require.ErrorIs(t, err, ErrCorrupt)
	_, _, err = decodeDedupeValue(make([]byte, 7))
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = decodeFormat(make([]byte, 3))
	require.ErrorIs(t, err, ErrCorrupt)
}

// FuzzDecodeKeys feeds arbitrary bytes to every key and value decoder. They
// must never panic, and whatever decodes must re-encode to the same bytes
// (the encodings are canonical).
func FuzzDecodeKeys(f *testing.F) {
	f.Add(encodeConsumerOffsetKey("group", "topic", 3))
	f.Add(encodeConsumerOffsetKey("\x00", "", 0))
	f.Add(encodeQueueOffsetKey("%RETRY%g", 1<<31-1))
	f.Add(encodeApplied(1<<63, 7))
	f.Add(encodeDedupeTimeKey(1_700_000_000_000, "producer/1"))
	f.Add(encodeDedupeValue(5, []byte("result")))
	f.Add([]byte{0x00, 0xFF, 0x00, 0x01, 0x00, 0x01, 0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if g, tp, q, err := decodeConsumerOffsetKey(b); err == nil {
			if !bytes.Equal(b, encodeConsumerOffsetKey(g, tp, q)) {
				t.Fatalf("consumer offset key %x decodes to %q %q %d, which encodes differently", b, g, tp, q)
			}
		}
		if tp, q, err := decodeQueueOffsetKey(b); err == nil {
			if !bytes.Equal(b, encodeQueueOffsetKey(tp, q)) {
				t.Fatalf("queue offset key %x is not canonical", b)
			}
		}
		if s, rest, err := decodeEscaped(b); err == nil {
			if !bytes.Equal(b, append(appendEscaped(nil, s), rest...)) {
				t.Fatalf("escaped string %x is not canonical", b)
			}
		}
		if ts, key, err := decodeDedupeTimeKey(b); err == nil {
			if !bytes.Equal(b, encodeDedupeTimeKey(ts, key)) {
				t.Fatalf("dedupe time key %x is not canonical", b)
			}
		}
		if ts, res, err := decodeDedupeValue(b); err == nil {
			if !bytes.Equal(b, encodeDedupeValue(ts, res)) {
				t.Fatalf("dedupe value %x is not canonical", b)
			}
		}
		if index, term, err := decodeApplied(b); err == nil {
			if !bytes.Equal(b, encodeApplied(index, term)) {
				t.Fatalf("applied value %x is not canonical", b)
			}
		}
		if v, err := decodeInt64(b); err == nil {
			if !bytes.Equal(b, encodeInt64(v)) {
				t.Fatalf("int64 value %x is not canonical", b)
			}
		}
	})
}
