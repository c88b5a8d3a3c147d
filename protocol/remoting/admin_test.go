package remoting

import (
	"strings"
	"testing"
)

// The MessageQueue-keyed bodies are written as fastjson writes them (the
// key object in the key position, fields sorted) and read back, and the
// reader takes fastjson's own output with spaces and extra fields.
func TestMQMapBodies(t *testing.T) {
	t1 := map[MessageQueue]TopicOffset{
		{Topic: "t", BrokerName: "b", QueueID: 1}: {MinOffset: 0, MaxOffset: 8, LastUpdateTimestamp: 1700000000001},
		{Topic: "t", BrokerName: "b", QueueID: 0}: {MinOffset: 2, MaxOffset: 10, LastUpdateTimestamp: 1700000000000},
	}
	body, err := EncodeTopicStatsTable(t1)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"minOffset":2,"maxOffset":10,"lastUpdateTimestamp":1700000000000},` +
		`{"brokerName":"b","queueId":1,"topic":"t"}:{"minOffset":0,"maxOffset":8,"lastUpdateTimestamp":1700000000001}}}`
	if string(body) != want {
		t.Fatalf("encoded\n%s\nwant\n%s", body, want)
	}
	got, err := DecodeTopicStatsTable(body)
	if err != nil || len(got) != 2 || got[MessageQueue{Topic: "t", BrokerName: "b", QueueID: 0}] != t1[MessageQueue{Topic: "t", BrokerName: "b", QueueID: 0}] {
		t.Fatalf("decoded %v, %v", got, err)
	}

	cs, err := EncodeConsumeStats(map[MessageQueue]OffsetWrapper{{Topic: "t", BrokerName: "b"}: {BrokerOffset: 10, ConsumerOffset: 3}}, 1.5)
	if err != nil {
		t.Fatal(err)
	}
	ow, tps, err := DecodeConsumeStats(cs)
	if err != nil || tps != 1.5 || ow[MessageQueue{Topic: "t", BrokerName: "b"}].ConsumerOffset != 3 {
		t.Fatalf("consume stats %s decoded %v %v %v", cs, ow, tps, err)
	}

	java := ` { "consumeTps" : 0.0, "offsetTable" : { {"brokerName":"b","queueId":3,"topic":"t"} : 42 , {"brokerName":"b","queueId":4,"topic":"t"}:7 } , "x":[1,{"y":2}] } `
	ro, err := DecodeResetOffsetBody([]byte(java))
	if err != nil || len(ro) != 2 || ro[MessageQueue{Topic: "t", BrokerName: "b", QueueID: 3}] != 42 {
		t.Fatalf("decoded %v, %v", ro, err)
	}
	empty, err := EncodeResetOffsetBody(nil)
	if err != nil || string(empty) != `{"offsetTable":{}}` {
		t.Fatalf("empty: %s %v", empty, err)
	}
	for _, bad := range []string{`{"offsetTable":{{"topic":"t"}}}`, `{"offsetTable":{{"topic":"t"}:}}`, `{"offsetTable":[1]}`, `[]`} {
		if _, err := DecodeResetOffsetBody([]byte(bad)); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s: err %v, want malformed", bad, err)
		}
	}
}
