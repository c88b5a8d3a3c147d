package remoting

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func batchAckSample(t testing.TB) []byte {
	a := BatchAck{ConsumerGroup: "g", Topic: "T", RetryFlag: "0", StartOffset: 1 << 40, QueueID: 3, ReviveQueueID: -1,
		PopTime: 1764370000123, InvisibleTime: 30000}
	a.SetOffsets([]int64{1 << 40, 1<<40 + 5, 1<<40 + 31})
	b := BatchAck{ConsumerGroup: "g", Topic: "%RETRY%g_T", RetryFlag: "1", QueueID: 0}
	js, err := json.Marshal(BatchAckBody{BrokerName: "raftmq", Acks: []BatchAck{a, b}})
	require.NoError(t, err)
	return js
}

// The client's bodies (json.Marshal of BatchAckBody, as fastjson writes
// them) take the fast path, and it decodes them as encoding/json does.
func TestBatchAckFastPath(t *testing.T) {
	js := batchAckSample(t)
	for _, in := range [][]byte{js, []byte(" \n" + string(js) + "\t "), []byte(`{"acks":[]}`), []byte(`{}`)} {
		got, ok := decodeBatchAckFast(in)
		require.True(t, ok, "%s", in)
		var want BatchAckBody
		require.NoError(t, json.Unmarshal(in, &want))
		require.Equal(t, want, got, "%s", in)
	}
	// Shapes the fast path leaves to encoding/json, which decodes them (or
	// refuses them) as before.
	for _, in := range []string{
		`{"brokerName":"a\"b","acks":[]}`, `{"BrokerName":"b"}`, `{"acks":null}`, `{"x":1}`,
		`{"acks":[{"so":1.0}]}`, `{"acks":[{"q":4294967296}]}`, `{"acks":[{"b":"!!"}]}`, `{"acks":[{"so":01}]}`,
		`{"brokerName":"é"}`, `{}x`, `{"acks":[{"b":nul}]}`, `{"acks":[{"c":null}]}`, ``,
	} {
		_, ok := decodeBatchAckFast([]byte(in))
		require.False(t, ok, "%s", in)
	}
	body, err := DecodeBatchAckBody([]byte(`{"brokerName":"a\"b","Acks":[{"C":"g","so":7}]}`))
	require.NoError(t, err)
	require.Equal(t, BatchAckBody{BrokerName: `a"b`, Acks: []BatchAck{{ConsumerGroup: "g", StartOffset: 7}}}, body)
}

// Whatever the fast path accepts, encoding/json decodes to the same body.
func FuzzBatchAckFast(f *testing.F) {
	f.Add(batchAckSample(f))
	f.Add([]byte(`{"brokerName":"b","acks":[{"c":"g","t":"T","r":"0","so":-0,"q":-2147483648,"rq":2147483647,"pt":1,"it":2,"b":""}]}`))
	f.Add([]byte(`{"acks":[{},{}],"acks":[{"b":"CYA="}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, ok := decodeBatchAckFast(in)
		if !ok {
			return
		}
		var want BatchAckBody
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatalf("fast path took %q, encoding/json refuses it: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: fast %+v, encoding/json %+v", in, got, want)
		}
	})
}

func BenchmarkDecodeBatchAckBody(b *testing.B) {
	a := BatchAck{ConsumerGroup: "bench-pop-1764370000123456789", Topic: "bench-pop", RetryFlag: "0", StartOffset: 123456, QueueID: 1,
		PopTime: 1764370000123, InvisibleTime: 30000}
	offs := make([]int64, 32)
	for i := range offs {
		offs[i] = a.StartOffset + int64(i)
	}
	a.SetOffsets(offs)
	js, err := json.Marshal(BatchAckBody{BrokerName: "raftmq", Acks: []BatchAck{a}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fast", func(b *testing.B) {
		for range b.N {
			if _, err := DecodeBatchAckBody(js); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for range b.N {
			var body BatchAckBody
			if err := json.Unmarshal(js, &body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
