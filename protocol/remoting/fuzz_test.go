package remoting

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeFrame: DecodeFrame never panics, fails only with ErrMalformed,
// and a decoded command re-encodes (in the serialization it came in) to a
// frame that decodes to the same command.
func FuzzDecodeFrame(f *testing.F) {
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		f.Add(encodeFrame(f, vectorCommand(st)))
		for _, c := range roundTripCommands() {
			c.Serialize = st
			f.Add(encodeFrame(f, c))
		}
	}
	f.Add(frameOf(SerializeJSON, []byte(`{"code":0,"extFields":{"queueId":"1"},"flag":1,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}`), nil))
	f.Add(frameOf(SerializeJSON, []byte(`{"remark":"\ud83d\ude00\ud800\u0041","x":[{"y":null}],"extFields":{"n":1.5e3,"b":true}}`), []byte("body")))
	f.Add(frameOf(SerializeRocketMQ, binaryHeader(1, 200, -1, -1, 3, "r\xff", [][2]string{{"k", "v"}, {"k", "w"}}), nil))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeFrame(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		frame, err := AppendFrame(nil, c)
		require.NoError(t, err, "re-encode %#v", c)
		again, err := DecodeFrame(frame[lenPrefixSize:])
		require.NoError(t, err, "decode re-encoded %q", frame)
		require.Equal(t, c, again)
	})
}

// FuzzDecodeBatch: DecodeBatch never panics, fails only with ErrMalformed,
// and decoded entries re-encode to a body that decodes to the same entries.
func FuzzDecodeBatch(f *testing.F) {
	seed, err := AppendBatch(nil, []BatchEntry{
		{Flag: 5, Body: []byte("ab"), Properties: map[string]string{"K": "v", "UNIQ_KEY": "ABC"}},
		{Flag: -1},
		{Body: []byte{0, 1, 2}, Properties: map[string]string{"E": ""}},
	})
	require.NoError(f, err)
	f.Add(seed)
	f.Add(seed[:30])
	f.Add(unhex(f, "0000001c 00000000 00000000 00000005 00000002 6162 0004 4b017602"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := DecodeBatch(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		body, err := AppendBatch(nil, entries)
		require.NoError(t, err)
		again, err := DecodeBatch(body)
		require.NoError(t, err)
		require.Equal(t, entries, again)
	})
}

// FuzzDecodeJSONBody: the fastjson fallback never panics.
func FuzzDecodeJSONBody(f *testing.F) {
	b, err := json.Marshal(sampleRoute())
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{0:"a",1:"b"}}]}`))
	f.Add([]byte(`{"a":"\"{0:1}",]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r TopicRouteData
		if err := DecodeJSON(b, &r); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error does not wrap ErrMalformed: %v", err)
		}
		var h HeartbeatData
		if err := DecodeJSON(b, &h); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error does not wrap ErrMalformed: %v", err)
		}
	})
}
