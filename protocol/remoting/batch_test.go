package remoting

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
)

func TestBatchVector(t *testing.T) {
	want := unhex(t, "0000001c 00000000 00000000 00000005 00000002 6162 0004 4b017602"+
		"00000016 00000000 00000000 ffffffff 00000000 0000")
	entries := []BatchEntry{
		{Flag: 5, Body: []byte("ab"), Properties: map[string]string{"K": "v"}},
		{Flag: -1},
	}
	got, err := AppendBatch(nil, entries)
	require.NoError(t, err)
	require.Equal(t, want, got)

	dec, err := DecodeBatch(want)
	require.NoError(t, err)
	require.Equal(t, entries, dec)
}

func TestBatchRoundTrip(t *testing.T) {
	entries := []BatchEntry{
		{Flag: 0, Body: []byte(strings.Repeat("x", 1000)),
			Properties: map[string]string{message.PropertyUniqKey: "ABCDEF", message.PropertyKeys: "k1 k2", message.PropertyTags: "TagA"}},
		{Flag: 1, Body: []byte{0}, Properties: map[string]string{"EMPTY": ""}},
		{Flag: 2, Properties: map[string]string{"a": "b"}},
	}
	b, err := AppendBatch([]byte("pre"), entries)
	require.NoError(t, err)
	require.Equal(t, "pre", string(b[:3]))
	got, err := DecodeBatch(b[3:])
	require.NoError(t, err)
	require.Equal(t, entries, got)
}

func TestDecodeBatchErrors(t *testing.T) {
	good, err := AppendBatch(nil, []BatchEntry{{Flag: 5, Body: []byte("ab"), Properties: map[string]string{"K": "v"}}})
	require.NoError(t, err)

	_, err = DecodeBatch(nil)
	require.ErrorIs(t, err, ErrMalformed, "empty")
	for n := 1; n < len(good); n++ {
		_, err := DecodeBatch(good[:n])
		require.ErrorIs(t, err, ErrMalformed, "truncated to %d", n)
	}
	_, err = DecodeBatch(append(append([]byte{}, good...), 0))
	require.ErrorIs(t, err, ErrMalformed, "trailing byte")

	for name, mutate := range map[string]func([]byte){
		"total too small":      func(b []byte) { b[3]-- },
		"total too large":      func(b []byte) { b[3]++ },
		"body length negative": func(b []byte) { b[batchOffBodyLen] = 0xff },
		"body length too long": func(b []byte) { b[batchOffBodyLen+3] = 100 },
		"props length negative": func(b []byte) {
			b[batchOffBody+2] = 0x80
		},
		"props length too long": func(b []byte) { b[batchOffBody+3] = 9 },
		"bad properties":        func(b []byte) { b[batchOffBody+2+2+1] = 'x' }, // the \x01 separator
	} {
		b := append([]byte{}, good...)
		mutate(b)
		_, err := DecodeBatch(b)
		require.ErrorIs(t, err, ErrMalformed, name)
	}
}

func TestAppendBatchErrors(t *testing.T) {
	for _, props := range []map[string]string{
		{"": "v"}, {"a\x01": "v"}, {"a": "v\x02"},
		{"big": strings.Repeat("v", message.MaxPropertiesSize)},
	} {
		got, err := AppendBatch([]byte("keep"), []BatchEntry{{Body: []byte("x")}, {Properties: props}})
		require.Error(t, err)
		require.Equal(t, "keep", string(got))
	}
	_, err := AppendBatch(nil, []BatchEntry{{Properties: map[string]string{"a\x02": "v"}}})
	require.ErrorIs(t, err, message.ErrBadProperty)
	_, err = AppendBatch(nil, []BatchEntry{{Properties: map[string]string{"big": strings.Repeat("v", 40000)}}})
	require.ErrorIs(t, err, message.ErrPropertiesTooLarge)
}
