package remoting

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleSendHeader() SendMessageRequestHeader {
	return SendMessageRequestHeader{
		ProducerGroup:         "pg",
		Topic:                 "T",
		DefaultTopic:          "TBW102",
		DefaultTopicQueueNums: 4,
		QueueID:               -1,
		SysFlag:               4,
		BornTimestamp:         1700000000123,
		Flag:                  7,
		Properties:            "UNIQ_KEY\x01ABC\x02",
		ReconsumeTimes:        2,
		UnitMode:              true,
		MaxReconsumeTimes:     16,
		Batch:                 true,
	}
}

func TestSendHeaderNames(t *testing.T) {
	h := sampleSendHeader()
	v1 := map[string]string{
		"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "-1", "sysFlag": "4", "bornTimestamp": "1700000000123", "flag": "7",
		"properties": "UNIQ_KEY\x01ABC\x02", "reconsumeTimes": "2", "unitMode": "true",
		"maxReconsumeTimes": "16", "batch": "true",
	}
	v2 := map[string]string{
		"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "-1", "f": "4", "g": "1700000000123", "h": "7",
		"i": "UNIQ_KEY\x01ABC\x02", "j": "2", "k": "true", "l": "16", "m": "true",
	}
	require.Equal(t, v1, h.Encode())
	require.Equal(t, v2, h.EncodeV2())

	for _, tt := range []struct {
		code int32
		ext  map[string]string
	}{
		{SendMessage, v1}, {SendMessageV2, v2}, {SendBatchMessage, v2},
		{SendMessage, v2}, {SendMessageV2, v1}, // lenient
	} {
		got, err := DecodeSendMessageRequestHeader(tt.code, tt.ext)
		require.NoError(t, err, "code %d", tt.code)
		require.Equal(t, h, got, "code %d", tt.code)
	}

	// With both present, the code's own names win.
	both := map[string]string{}
	for k, v := range v1 {
		both[k] = v
	}
	for k, v := range v2 {
		both[k] = v
	}
	both["topic"], both["b"] = "long", "short"
	got, err := DecodeSendMessageRequestHeader(SendMessage, both)
	require.NoError(t, err)
	require.Equal(t, "long", got.Topic)
	got, err = DecodeSendMessageRequestHeader(SendMessageV2, both)
	require.NoError(t, err)
	require.Equal(t, "short", got.Topic)
}

func TestSendHeaderOptionalFields(t *testing.T) {
	h := SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4}
	ext := h.Encode()
	require.Equal(t, map[string]string{
		"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0",
	}, ext)
	got, err := DecodeSendMessageRequestHeader(SendMessage, ext)
	require.NoError(t, err)
	require.Equal(t, h, got)

	// What the Go client sends: optional fields present with zero values,
	// plus bname, the broker name the queue was chosen from.
	goExt := map[string]string{
		"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "1", "sysFlag": "0", "bornTimestamp": "5", "flag": "0", "properties": "",
		"reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "batch": "false", "bname": "broker-a",
	}
	got, err = DecodeSendMessageRequestHeader(SendMessage, goExt)
	require.NoError(t, err)
	require.Equal(t, SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 4, QueueID: 1, BornTimestamp: 5, BrokerName: "broker-a"}, got)

	got, err = DecodeSendMessageRequestHeader(SendMessage, map[string]string{
		"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "1", "sysFlag": "0", "bornTimestamp": "5", "flag": "0", "unitMode": "TRUE", "batch": "yes",
	})
	require.NoError(t, err)
	require.True(t, got.UnitMode, "booleans parse case-insensitively")
	require.False(t, got.Batch, "anything but true is false, as in Java")
}

func TestSendHeaderErrors(t *testing.T) {
	sample := sampleSendHeader()
	full := sample.Encode()
	for _, field := range []string{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums",
		"queueId", "sysFlag", "bornTimestamp", "flag"} {
		ext := copyExt(full)
		delete(ext, field)
		_, err := DecodeSendMessageRequestHeader(SendMessage, ext)
		require.ErrorIs(t, err, ErrMalformed, field)
		require.ErrorContains(t, err, `"`+field+`"`)
	}
	for _, field := range []string{"properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch"} {
		ext := copyExt(full)
		delete(ext, field)
		_, err := DecodeSendMessageRequestHeader(SendMessage, ext)
		require.NoError(t, err, "%s is optional", field)
	}
	for field, bad := range map[string]string{"queueId": "x", "sysFlag": "2147483648", "bornTimestamp": "1.5",
		"reconsumeTimes": "", "maxReconsumeTimes": " 1"} {
		ext := copyExt(full)
		ext[field] = bad
		_, err := DecodeSendMessageRequestHeader(SendMessage, ext)
		require.ErrorIs(t, err, ErrMalformed, field)
		require.ErrorContains(t, err, `"`+field+`"`)
	}
}

func copyExt(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// headerCase is one typed header: its encoding and decoder, with the
// fields that must be present.
type headerCase struct {
	name     string
	encode   func() map[string]string
	decode   func(map[string]string) (any, error)
	want     any
	wantExt  map[string]string
	required []string
}

func decoder[T any](f func(map[string]string) (T, error)) func(map[string]string) (any, error) {
	return func(ext map[string]string) (any, error) { return f(ext) }
}

func headerCases() []headerCase {
	sendResp := SendMessageResponseHeader{MsgID: "0A00000100002A9F0000000000001A2B", QueueID: 3, QueueOffset: 17, TransactionID: "TX"}
	pull := PullMessageRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 1, QueueOffset: 100, MaxMsgNums: 32,
		SysFlag: PullSysFlagSuspend | PullSysFlagCommitOffset, CommitOffset: 90, SuspendTimeoutMillis: 20000,
		Subscription: "*", SubVersion: 1700000000000000000, ExpressionType: "TAG"}
	pullResp := PullMessageResponseHeader{SuggestWhichBrokerID: 0, NextBeginOffset: 132, MinOffset: 0, MaxOffset: 500}
	qco := QueryConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 2}
	qcoResp := QueryConsumerOffsetResponseHeader{Offset: 42}
	uco := UpdateConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 2, CommitOffset: 43}
	reset := UpdateConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 2, CommitOffset: 7, Reset: true}
	maxOff := GetMaxOffsetRequestHeader{Topic: "T", QueueID: 3}
	minOff := GetMinOffsetRequestHeader{Topic: "T", QueueID: 4}
	offResp := OffsetResponseHeader{Offset: -1}
	search := SearchOffsetRequestHeader{Topic: "T", QueueID: 5, Timestamp: 1700000000000}
	create := CreateTopicRequestHeader{Topic: "T", DefaultTopic: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8,
		Perm: PermRead | PermWrite, TopicFilterType: "SINGLE_TAG", TopicSysFlag: 1, Order: true}
	route := GetRouteInfoRequestHeader{Topic: "T", AcceptStandardJSONOnly: true}
	list := GetConsumerListByGroupRequestHeader{ConsumerGroup: "cg"}
	back := ConsumerSendMsgBackRequestHeader{Offset: 6699, Group: "cg", DelayLevel: 3, OriginMsgID: "M",
		OriginTopic: "T", UnitMode: false, MaxReconsumeTimes: 16}
	return []headerCase{
		{"SendMessageResponse", sendResp.Encode, decoder(DecodeSendMessageResponseHeader), sendResp,
			map[string]string{"msgId": "0A00000100002A9F0000000000001A2B", "queueId": "3", "queueOffset": "17", "transactionId": "TX"},
			[]string{"msgId", "queueId", "queueOffset"}},
		{"PullMessageRequest", pull.Encode, decoder(DecodePullMessageRequestHeader), pull,
			map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "1", "queueOffset": "100", "maxMsgNums": "32",
				"sysFlag": "3", "commitOffset": "90", "suspendTimeoutMillis": "20000", "subscription": "*",
				"subVersion": "1700000000000000000", "expressionType": "TAG"},
			[]string{"consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
				"suspendTimeoutMillis", "subVersion"}},
		{"PullMessageResponse", pullResp.Encode, decoder(DecodePullMessageResponseHeader), pullResp,
			map[string]string{"suggestWhichBrokerId": "0", "nextBeginOffset": "132", "minOffset": "0", "maxOffset": "500"},
			[]string{"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}},
		{"QueryConsumerOffsetRequest", qco.Encode, decoder(DecodeQueryConsumerOffsetRequestHeader), qco,
			map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "2"},
			[]string{"consumerGroup", "topic", "queueId"}},
		{"QueryConsumerOffsetResponse", qcoResp.Encode, decoder(DecodeQueryConsumerOffsetResponseHeader), qcoResp,
			map[string]string{"offset": "42"}, []string{"offset"}},
		{"UpdateConsumerOffsetRequest", uco.Encode, decoder(DecodeUpdateConsumerOffsetRequestHeader), uco,
			map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "2", "commitOffset": "43"},
			[]string{"consumerGroup", "topic", "queueId", "commitOffset"}},
		{"UpdateConsumerOffsetRequestReset", reset.Encode, decoder(DecodeUpdateConsumerOffsetRequestHeader), reset,
			map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "2", "commitOffset": "7", "raftmqReset": "true"},
			[]string{"consumerGroup", "topic", "queueId", "commitOffset"}},
		{"GetMaxOffsetRequest", maxOff.Encode, decoder(DecodeGetMaxOffsetRequestHeader), maxOff,
			map[string]string{"topic": "T", "queueId": "3"}, []string{"topic", "queueId"}},
		{"GetMinOffsetRequest", minOff.Encode, decoder(DecodeGetMinOffsetRequestHeader), minOff,
			map[string]string{"topic": "T", "queueId": "4"}, []string{"topic", "queueId"}},
		{"OffsetResponse", offResp.Encode, decoder(DecodeOffsetResponseHeader), offResp,
			map[string]string{"offset": "-1"}, []string{"offset"}},
		{"SearchOffsetRequest", search.Encode, decoder(DecodeSearchOffsetRequestHeader), search,
			map[string]string{"topic": "T", "queueId": "5", "timestamp": "1700000000000"},
			[]string{"topic", "queueId", "timestamp"}},
		{"CreateTopicRequest", create.Encode, decoder(DecodeCreateTopicRequestHeader), create,
			map[string]string{"topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
				"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "1", "order": "true"},
			[]string{"topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm", "topicFilterType", "order"}},
		{"GetRouteInfoRequest", route.Encode, decoder(DecodeGetRouteInfoRequestHeader), route,
			map[string]string{"topic": "T", "acceptStandardJsonOnly": "true"}, []string{"topic"}},
		{"GetConsumerListByGroupRequest", list.Encode, decoder(DecodeGetConsumerListByGroupRequestHeader), list,
			map[string]string{"consumerGroup": "cg"}, []string{"consumerGroup"}},
		{"ConsumerSendMsgBackRequest", back.Encode, decoder(DecodeConsumerSendMsgBackRequestHeader), back,
			map[string]string{"offset": "6699", "group": "cg", "delayLevel": "3", "originMsgId": "M", "originTopic": "T",
				"unitMode": "false", "maxReconsumeTimes": "16"},
			[]string{"offset", "group", "delayLevel"}},
	}
}

func TestTypedHeaders(t *testing.T) {
	for _, tc := range headerCases() {
		t.Run(tc.name, func(t *testing.T) {
			ext := tc.encode()
			require.Equal(t, tc.wantExt, ext)
			got, err := tc.decode(ext)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)

			// Through a frame, in both serializations.
			for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
				c, err := DecodeFrame(encodeFrame(t, &Command{Code: 1, ExtFields: ext, Serialize: st}))
				require.NoError(t, err)
				got, err := tc.decode(c.ExtFields)
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			}

			for _, field := range tc.required {
				e := copyExt(ext)
				delete(e, field)
				_, err := tc.decode(e)
				require.ErrorIs(t, err, ErrMalformed, "missing %s", field)
				require.ErrorContains(t, err, `"`+field+`"`)
			}
			_, err = tc.decode(nil)
			require.ErrorIs(t, err, ErrMalformed, "nil ext fields")
		})
	}
}

func TestTypedHeaderBadNumbers(t *testing.T) {
	_, err := DecodePullMessageRequestHeader(map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "1",
		"queueOffset": "9223372036854775808", "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
		"suspendTimeoutMillis": "1", "subVersion": "0"})
	require.ErrorIs(t, err, ErrMalformed)
	require.ErrorContains(t, err, `"queueOffset"`)

	_, err = DecodeOffsetResponseHeader(map[string]string{"offset": "0x10"})
	require.ErrorIs(t, err, ErrMalformed)

	h, err := DecodeOffsetResponseHeader(map[string]string{"offset": "+7"})
	require.NoError(t, err, "Java's Long.parseLong accepts a plus sign")
	require.Equal(t, int64(7), h.Offset)
}
