package remoting

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleRoute() TopicRouteData {
	return TopicRouteData{
		QueueDatas: []QueueData{{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRead | PermWrite}},
		BrokerDatas: []BrokerData{{Cluster: "DefaultCluster", BrokerName: "broker-a",
			BrokerAddrs: map[int64]string{0: "10.0.0.1:10911", 2: "10.0.0.2:10911", 3: "10.0.0.3:10911"}}},
	}
}

func TestTopicRouteDataEncoding(t *testing.T) {
	r := sampleRoute()
	const want = `{"queueDatas":[{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],` +
		`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.1:10911","2":"10.0.0.2:10911","3":"10.0.0.3:10911"}}],` +
		`"filterServerTable":{}}`
	b, err := r.Encode()
	require.NoError(t, err)
	require.Equal(t, want, string(b))

	// json.Marshal on the value and on a pointer give the same.
	for _, v := range []any{r, &r} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}

	// What the Go client's split parser makes of brokerAddrs.
	require.Equal(t, r.BrokerDatas[0].BrokerAddrs, goClientBrokerAddrs(t, string(b)))

	got, err := DecodeTopicRouteData(b)
	require.NoError(t, err)
	r.FilterServerTable = map[string][]string{}
	require.Equal(t, r, got)
}

// goClientBrokerAddrs parses brokerAddrs the way rocketmq-client-go's
// TopicRouteData.decode does: take the raw object text, strip the braces,
// split on ',', split each item at the first ':', delete '"', parse the id.
func goClientBrokerAddrs(t *testing.T, body string) map[int64]string {
	t.Helper()
	const key = `"brokerAddrs":`
	i := strings.Index(body, key)
	require.GreaterOrEqual(t, i, 0)
	raw := body[i+len(key):]
	raw = raw[:strings.IndexByte(raw, '}')+1]
	raw = raw[1 : len(raw)-1]
	addrs := map[int64]string{}
	for _, item := range strings.Split(raw, ",") {
		id, addr, ok := strings.Cut(item, ":")
		require.True(t, ok, item)
		n, err := strconv.ParseInt(strings.ReplaceAll(id, `"`, ""), 10, 64)
		require.NoError(t, err, item)
		addrs[n] = strings.ReplaceAll(addr, `"`, "")
	}
	return addrs
}

func TestEmptyBodiesHaveNoNulls(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want string
	}{
		{TopicRouteData{}, `{"queueDatas":[],"brokerDatas":[],"filterServerTable":{}}`},
		{TopicRouteData{OrderTopicConf: "broker-a:4", BrokerDatas: []BrokerData{{BrokerName: "b"}}},
			`{"orderTopicConf":"broker-a:4","queueDatas":[],"brokerDatas":[{"cluster":"","brokerName":"b","brokerAddrs":{}}],"filterServerTable":{}}`},
		{HeartbeatData{ClientID: "c"}, `{"clientID":"c","producerDataSet":[],"consumerDataSet":[]}`},
		{HeartbeatData{ConsumerDataSet: []ConsumerData{{GroupName: "g", SubscriptionDataSet: []SubscriptionData{{Topic: "T"}}}}},
			`{"clientID":"","producerDataSet":[],"consumerDataSet":[{"groupName":"g","consumeType":"","messageModel":"",` +
				`"consumeFromWhere":"","subscriptionDataSet":[{"topic":"T","subString":"","tagsSet":[],"codeSet":[],` +
				`"subVersion":0,"expressionType":""}],"unitMode":false}]}`},
		{ConsumerListBody{}, `{"consumerIdList":[]}`},
		{ConsumerListBody{ConsumerIDList: []string{"10.0.0.5@1", "10.0.0.6@2"}}, `{"consumerIdList":["10.0.0.5@1","10.0.0.6@2"]}`},
	} {
		b, err := json.Marshal(tt.v)
		require.NoError(t, err)
		require.Equal(t, tt.want, string(b))
	}
}

func TestDecodeFastjsonRoute(t *testing.T) {
	// An Apache name server's answer to an old client: fastjson with bare
	// integer keys, fields sorted, extra fields.
	body := `{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",` +
		`"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},` +
		`"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
	got, err := DecodeTopicRouteData([]byte(body))
	require.NoError(t, err)
	require.Equal(t, TopicRouteData{
		QueueDatas: []QueueData{{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
		BrokerDatas: []BrokerData{{Cluster: "DefaultCluster", BrokerName: "broker-a",
			BrokerAddrs: map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}}},
		FilterServerTable: map[string][]string{},
	}, got)

	_, err = DecodeTopicRouteData([]byte(`{"queueDatas":[}`))
	require.ErrorIs(t, err, ErrMalformed)
	_, err = DecodeTopicRouteData([]byte(`{"brokerDatas":[{"brokerAddrs":{x:"a"}}]}`))
	require.ErrorIs(t, err, ErrMalformed, "a bare non-integer key still fails the map[int64] decode")
}

func TestQuoteBareKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{0:"a",1:"b"}`:                   `{"0":"a","1":"b"}`,
		`{"s":"{0:1}", -1 : [ {2:3} ] }`:  `{"s":"{0:1}", "-1" : [ {"2":3} ] }`,
		`{"e":"a\"{0:1}",7:true}`:         `{"e":"a\"{0:1}","7":true}`,
		`[1,2,{x:null}]`:                  `[1,2,{"x":null}]`,
		"{\n\t0\t:\"a\",\n\t1:\"b\"\n}":   "{\n\t\"0\"\t:\"a\",\n\t\"1\":\"b\"\n}",
		`{"a":{"b":{3:4}},"c":[5,{6:7}]}`: `{"a":{"b":{"3":4}},"c":[5,{"6":7}]}`,
	} {
		got, changed := quoteBareKeys([]byte(in))
		require.True(t, changed, in)
		require.Equal(t, want, string(got), in)
	}
	for _, in := range []string{`{"a":1}`, `[1,2]`} {
		_, changed := quoteBareKeys([]byte(in))
		require.False(t, changed, in)
	}
	for _, in := range []string{`{"a`, `]`, `{"a":"\`} {
		_, ok := quoteBareKeys([]byte(in))
		require.False(t, ok, in)
	}
}

func TestDecodeHeartbeat(t *testing.T) {
	// Go client: codeSet as strings, subVersion in ns.
	goBody := `{"clientID":"10.0.0.5@12345","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[{"groupName":"cg",` +
		`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",` +
		`"unitMode":false,"subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"TagA || TagB",` +
		`"tagsSet":["TagA","TagB"],"codeSet":["2598919","-2598920"],"subVersion":1700000000000000000,"expressionType":"TAG"},` +
		`{"topic":"%RETRY%cg","subString":"*","tagsSet":[],"codeSet":[],"expressionType":"TAG"}]}]}`
	// Java client: codeSet as numbers, extra 5.x fields.
	javaBody := `{"clientID":"10.0.0.5@12345","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",` +
		`"consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[` +
		`{"classFilterMode":false,"codeSet":[2598919,-2598920],"expressionType":"TAG","subString":"TagA || TagB",` +
		`"subVersion":1700000000000000000,"tagsSet":["TagA","TagB"],"topic":"T"},` +
		`{"codeSet":[],"expressionType":"TAG","subString":"*","tagsSet":[],"topic":"%RETRY%cg"}],"unitMode":false}],` +
		`"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"pg"}],"withoutSub":false}`
	want := HeartbeatData{
		ClientID:        "10.0.0.5@12345",
		ProducerDataSet: []ProducerData{{GroupName: "pg"}},
		ConsumerDataSet: []ConsumerData{{
			GroupName: "cg", ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
			ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
			SubscriptionDataSet: []SubscriptionData{
				{Topic: "T", SubString: "TagA || TagB", TagsSet: []string{"TagA", "TagB"}, CodeSet: []int{2598919, -2598920},
					SubVersion: 1700000000000000000, ExpressionType: "TAG"},
				{Topic: "%RETRY%cg", SubString: "*", TagsSet: []string{}, CodeSet: []int{}, ExpressionType: "TAG"},
			},
		}},
	}
	for _, body := range []string{goBody, javaBody} {
		got, err := DecodeHeartbeatData([]byte(body))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}

	// Our encoding decodes to the same.
	b, err := want.Encode()
	require.NoError(t, err)
	got, err := DecodeHeartbeatData(b)
	require.NoError(t, err)
	require.Equal(t, want, got)

	_, err = DecodeHeartbeatData([]byte(`{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":["x"]}]}]}`))
	require.ErrorIs(t, err, ErrMalformed)
	_, err = DecodeHeartbeatData([]byte(`{"clientID":`))
	require.ErrorIs(t, err, ErrMalformed)
}
