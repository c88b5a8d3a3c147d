package acl

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/protocol/remoting"
)

const checkYAML = `globalWhiteRemoteAddresses: ["10.10.103.*"]
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB, topicP=PUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB]
  - accessKey: adminAK1
    secretKey: adminSK1
    admin: true
  - accessKey: adminLim
    secretKey: adminLim
    admin: true
    defaultTopicPerm: SUB
    topicPerms: [topicX=DENY]
  - accessKey: whiteAK1
    secretKey: whiteSK1
    whiteRemoteAddress: 192.168.1.*
`

var secrets = map[string]string{"RocketMQ": "12345678", "adminAK1": "adminSK1", "adminLim": "adminLim", "whiteAK1": "whiteSK1"}

func testPolicy(t *testing.T) *Policy {
	t.Helper()
	c, err := ParseYAML([]byte(checkYAML))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sendV2(topic, group string) map[string]string {
	h := remoting.SendMessageRequestHeader{ProducerGroup: group, Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, BornTimestamp: 1}
	return h.EncodeV2()
}

func pull(topic, group string) map[string]string {
	h := remoting.PullMessageRequestHeader{ConsumerGroup: group, Topic: topic, MaxMsgNums: 32}
	return h.Encode()
}

func heartbeat(t *testing.T, group string, topics ...string) []byte {
	hb := remoting.HeartbeatData{ClientID: "c1", ProducerDataSet: []remoting.ProducerData{{GroupName: "anyProducer"}}}
	cd := remoting.ConsumerData{GroupName: group}
	for _, tp := range topics {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, remoting.SubscriptionData{Topic: tp, SubString: "*"})
	}
	hb.ConsumerDataSet = []remoting.ConsumerData{cd}
	b, err := hb.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheck(t *testing.T) {
	p := testPolicy(t)
	const addr = "172.16.0.5:40000"
	type tc struct {
		name   string
		addr   string
		code   int32
		ext    map[string]string
		body   []byte
		ak     string // sign with this account ("" leaves the request unsigned)
		mutate func(ext map[string]string)
		grant  Grant
		err    string // the denial message; "" for allowed
	}
	offset := func(reset bool) map[string]string {
		h := remoting.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "groupB", Topic: "topicC", QueueID: 1, CommitOffset: 5, Reset: reset}
		return h.Encode()
	}
	cases := []tc{
		// 0. Route queries are answered to anyone, as RocketMQ's name
		// server answers them; the name server's other reads are checked.
		{name: "route unsigned", code: remoting.GetRouteInfoByTopic, ext: map[string]string{"topic": "topicA"}, grant: GrantNameServerRead},
		{name: "route bad signature", code: remoting.GetRouteInfoByTopic, ext: map[string]string{"topic": "topicA"}, ak: "RocketMQ",
			mutate: func(e map[string]string) { e[FieldSignature] = "bad" }, grant: GrantNameServerRead},
		{name: "route unknown key", code: remoting.GetRouteInfoByTopic, ext: map[string]string{"topic": "topicA"}, ak: "RocketMQ",
			mutate: func(e map[string]string) { e[FieldAccessKey] = "nobody12" }, grant: GrantNameServerRead},
		{name: "cluster info unsigned", code: remoting.GetBrokerClusterInfo, err: "No accessKey is configured"},
		{name: "topic list unsigned", code: remoting.GetAllTopicListFromNameServer, err: "No accessKey is configured"},
		// 1. Global white addresses skip everything.
		{name: "global white unsigned", addr: "10.10.103.7:1", code: remoting.UpdateAndCreateTopic, grant: GrantGlobalWhite},
		{name: "global white bad signature", addr: "10.10.103.7:1", code: remoting.SendMessageV2, ext: sendV2("topicA", "pg"), ak: "RocketMQ",
			mutate: func(e map[string]string) { e[FieldSignature] = "bad" }, grant: GrantGlobalWhite},
		// 2. Access key.
		{name: "no access key", code: remoting.SendMessageV2, ext: sendV2("topicB", "pg"), err: "No accessKey is configured"},
		{name: "nil ext fields", code: remoting.HeartBeat, err: "No accessKey is configured"},
		{name: "unknown access key", code: remoting.SendMessageV2, ext: sendV2("topicB", "pg"), ak: "RocketMQ",
			mutate: func(e map[string]string) { e[FieldAccessKey] = "nobody12" }, err: "No acl config for nobody12"},
		// 3. Account white address skips the signature and perms.
		{name: "account white", addr: "192.168.1.9:3", code: remoting.UpdateAndCreateTopic, ak: "whiteAK1",
			mutate: func(e map[string]string) { e[FieldSignature] = "bad" }, grant: GrantAccountWhite},
		{name: "account white elsewhere", code: remoting.SendMessageV2, ext: sendV2("t", "pg"), ak: "whiteAK1",
			err: "No default permission for topic:t"},
		{name: "account white ipv4-mapped", addr: "[::ffff:192.168.1.9]:3", code: remoting.SendMessageV2, ext: sendV2("t", "pg"),
			ak: "whiteAK1", mutate: func(e map[string]string) { delete(e, FieldSignature) }, grant: GrantAccountWhite},
		// 4. Signature.
		{name: "bad signature", code: remoting.SendMessageV2, ext: sendV2("topicB", "pg"), ak: "RocketMQ",
			mutate: func(e map[string]string) { e["b"] = "topicC" }, err: "Check signature failed for accessKey=RocketMQ"},
		{name: "no signature", code: remoting.SendMessageV2, ext: sendV2("topicB", "pg"), ak: "RocketMQ",
			mutate: func(e map[string]string) { delete(e, FieldSignature) }, err: "Check signature failed for accessKey=RocketMQ"},
		{name: "other account's secret", code: remoting.SendMessageV2, ext: sendV2("topicB", "pg"), ak: "adminAK1",
			mutate: func(e map[string]string) { e[FieldAccessKey] = "RocketMQ" }, err: "Check signature failed for accessKey=RocketMQ"},
		{name: "forward marker unsigned", code: remoting.SendMessageV2, ext: sendV2("topicB", "pg"), ak: "RocketMQ",
			mutate: func(e map[string]string) { e["raftmqForwarded"] = "1" }, err: "Check signature failed for accessKey=RocketMQ"},
		// 5-7. Sends.
		{name: "send PUB|SUB topic", code: remoting.SendMessageV2, ext: sendV2("topicB", "pg"), ak: "RocketMQ", grant: GrantSigned},
		{name: "send PUB topic", code: remoting.SendBatchMessage, ext: sendV2("topicP", "pg"), ak: "RocketMQ", grant: GrantSigned},
		{name: "send SUB topic", code: remoting.SendMessageV2, ext: sendV2("topicC", "pg"), ak: "RocketMQ", err: "No default permission for topic:topicC"},
		{name: "send DENY topic", code: remoting.SendMessageV2, ext: sendV2("topicA", "pg"), ak: "RocketMQ", err: "No default permission for topic:topicA"},
		{name: "send default DENY", code: remoting.SendMessageV2, ext: sendV2("other", "pg"), ak: "RocketMQ", err: "No default permission for topic:other"},
		{name: "send V1", code: remoting.SendMessage, ext: func() map[string]string {
			h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "topicA", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, BornTimestamp: 1}
			return h.Encode()
		}(), ak: "RocketMQ", err: "No default permission for topic:topicA"},
		{name: "send V2 with V1 topic name", code: remoting.SendMessageV2, ext: func() map[string]string {
			e := sendV2("topicB", "pg")
			delete(e, "b")
			e["topic"] = "topicA" // the broker reads it: so must the ACL
			return e
		}(), ak: "RocketMQ", err: "No default permission for topic:topicA"},
		{name: "send to retry of SUB group", code: remoting.SendMessageV2, ext: sendV2("%RETRY%groupB", "CLIENT_INNER_PRODUCER"), ak: "RocketMQ", grant: GrantSigned},
		{name: "send to retry of default group", code: remoting.SendMessageV2, ext: sendV2("%RETRY%groupZ", "CLIENT_INNER_PRODUCER"), ak: "RocketMQ", grant: GrantSigned},
		{name: "send to retry of DENY group", code: remoting.SendMessageV2, ext: sendV2("%RETRY%groupA", "CLIENT_INNER_PRODUCER"), ak: "RocketMQ", err: "No default permission for group:groupA"},
		{name: "send trace topic", code: remoting.SendMessageV2, ext: sendV2(TraceTopic, "pg"), ak: "RocketMQ", grant: GrantSigned},
		{name: "send missing topic", code: remoting.SendMessageV2, ext: map[string]string{"a": "pg"}, ak: "RocketMQ", err: "request code 310"},
		{name: "send back DENY group", code: remoting.ConsumerSendMsgBack, ext: map[string]string{"offset": "1", "group": "groupA", "delayLevel": "0"}, ak: "RocketMQ",
			err: "No default permission for group:groupA"},
		{name: "send back", code: remoting.ConsumerSendMsgBack, ext: map[string]string{"offset": "1", "group": "groupB", "delayLevel": "0"}, ak: "RocketMQ", grant: GrantSigned},
		// Pulls and offsets.
		{name: "pull", code: remoting.PullMessage, ext: pull("topicC", "groupB"), ak: "RocketMQ", grant: GrantSigned},
		{name: "pull DENY group", code: remoting.PullMessage, ext: pull("topicC", "groupA"), ak: "RocketMQ", err: "No default permission for group:groupA"},
		{name: "pull PUB-only topic", code: remoting.LitePullMessage, ext: pull("topicP", "groupB"), ak: "RocketMQ", err: "No default permission for topic:topicP"},
		{name: "pull retry topic", code: remoting.PullMessage, ext: pull("%RETRY%groupB", "groupB"), ak: "RocketMQ", grant: GrantSigned},
		{name: "pull retry topic of DENY group", code: remoting.PullMessage, ext: pull("%RETRY%groupA", "groupB"), ak: "RocketMQ", err: "No default permission for group:groupA"},
		{name: "commit offset", code: remoting.UpdateConsumerOffset, ext: offset(false), ak: "RocketMQ", grant: GrantSigned},
		{name: "reset offset", code: remoting.UpdateConsumerOffset, ext: offset(true), ak: "RocketMQ",
			err: "Need admin permission for request code=15, but accessKey=RocketMQ is not"},
		{name: "reset offset admin", code: remoting.UpdateConsumerOffset, ext: offset(true), ak: "adminAK1", grant: GrantSigned},
		{name: "query offset DENY topic", code: remoting.QueryConsumerOffset, ext: map[string]string{"consumerGroup": "groupB", "topic": "topicA", "queueId": "0"}, ak: "RocketMQ",
			err: "No default permission for topic:topicA"},
		{name: "max offset", code: remoting.GetMaxOffset, ext: map[string]string{"topic": "topicB", "queueId": "0"}, ak: "RocketMQ", grant: GrantSigned},
		// Heartbeats.
		{name: "heartbeat", code: remoting.HeartBeat, body: heartbeat(t, "groupB", "topicC", "%RETRY%groupB"), ak: "RocketMQ", grant: GrantSigned},
		{name: "heartbeat DENY topic", code: remoting.HeartBeat, body: heartbeat(t, "groupB", "topicC", "topicA"), ak: "RocketMQ", err: "No default permission for topic:topicA"},
		{name: "heartbeat DENY group", code: remoting.HeartBeat, body: heartbeat(t, "groupA", "topicC"), ak: "RocketMQ", err: "No default permission for group:groupA"},
		{name: "heartbeat bad body", code: remoting.HeartBeat, body: []byte("{"), ak: "RocketMQ", err: "request code 34"},
		{name: "heartbeat producer only", code: remoting.HeartBeat, body: []byte(`{"clientID":"c","producerDataSet":[{"groupName":"p"}]}`), ak: "RocketMQ", grant: GrantSigned},
		// Admin requests.
		{name: "create topic", code: remoting.UpdateAndCreateTopic, ext: map[string]string{"topic": "topicB"}, ak: "RocketMQ",
			err: "Need admin permission for request code=17, but accessKey=RocketMQ is not"},
		{name: "remove node", code: remoting.RemoveNode, ext: map[string]string{"id": "3"}, ak: "RocketMQ",
			err: "Need admin permission for request code=9004, but accessKey=RocketMQ is not"},
		{name: "fault", code: remoting.Fault, ak: "RocketMQ", err: "Need admin permission for request code=9005, but accessKey=RocketMQ is not"},
		{name: "acl update", code: UpdateAndCreateACLConfig, ext: map[string]string{"accessKey": "newAccount"}, ak: "RocketMQ",
			err: "Need admin permission for request code=50, but accessKey=RocketMQ is not"},
		{name: "remove node admin", code: remoting.RemoveNode, ext: map[string]string{"id": "3"}, ak: "adminAK1", grant: GrantSigned},
		{name: "acl update admin", code: UpdateAndCreateACLConfig, ext: map[string]string{"accessKey": "newAccount"}, ak: "adminAK1", grant: GrantSigned},
		{name: "cluster status", code: remoting.ClusterStatus, ak: "RocketMQ", grant: GrantSigned},
		{name: "route signed", code: remoting.GetRouteInfoByTopic, ext: map[string]string{"topic": "topicA"}, ak: "RocketMQ", grant: GrantNameServerRead},
		// Admin accounts: all resources unless they list perms.
		{name: "admin sends anywhere", code: remoting.SendMessageV2, ext: sendV2("topicA", "pg"), ak: "adminAK1", grant: GrantSigned},
		{name: "limited admin DENY topic", code: remoting.PullMessage, ext: pull("topicX", "g"), ak: "adminLim", err: "No default permission for topic:topicX"},
		{name: "limited admin default SUB", code: remoting.PullMessage, ext: pull("topicY", "g"), ak: "adminLim", err: "No default permission for group:g"},
		{name: "limited admin admin code", code: remoting.DeleteTopicInBroker, ext: map[string]string{"topic": "topicX"}, ak: "adminLim", grant: GrantSigned},
		// Unique key query signed the ACL 1.0 way.
		{name: "query unique key", code: remoting.QueryMessage, ext: map[string]string{"topic": "topicC", "key": "k", "maxNum": "1", "beginTimestamp": "0", "endTimestamp": "1"},
			ak: "RocketMQ", mutate: func(e map[string]string) { e[FieldUniqueKeyQuery] = "true" }, grant: GrantSigned},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ext := maps.Clone(c.ext)
			if c.ak != "" {
				ext = Credentials{AccessKey: c.ak, SecretKey: secrets[c.ak]}.SignFields(ext, c.body)
			}
			if c.mutate != nil {
				c.mutate(ext)
			}
			a := c.addr
			if a == "" {
				a = addr
			}
			g, err := p.Check(Request{RemoteAddr: a, Code: c.code, ExtFields: ext, Body: c.body})
			if c.err == "" {
				if err != nil || g != c.grant {
					t.Fatalf("got %v, %v; want %v", g, err, c.grant)
				}
				return
			}
			var de *DeniedError
			if !errors.As(err, &de) || !errors.Is(err, ErrDenied) {
				t.Fatalf("got %v, %v; want denial %q", g, err, c.err)
			}
			if !strings.Contains(de.Msg, c.err) || (!strings.HasPrefix(c.err, "request code") && de.Msg != c.err) {
				t.Fatalf("denial %q, want %q", de.Msg, c.err)
			}
			if de.Code != c.code || de.Remark() != "org.apache.rocketmq.acl.common.AclException: "+de.Msg {
				t.Fatalf("denial %+v", de)
			}
		})
	}
}

func TestCheckUnsigned(t *testing.T) {
	p := testPolicy(t)
	ext := Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}.SignFields(sendV2("topicB", "pg"), []byte("m"))
	ext["raftmqForwarded"] = "2"
	r := Request{RemoteAddr: "127.0.0.1:1", Code: remoting.SendMessageV2, ExtFields: ext, Body: []byte("m"), Unsigned: []string{"raftmqForwarded"}}
	if g, err := p.Check(r); err != nil || g != GrantSigned {
		t.Fatalf("%v %v", g, err)
	}
}

func TestCheckGoClientToken(t *testing.T) {
	// rocketmq-client-go sends SecurityToken but does not sign its value.
	p := testPolicy(t)
	ext := sendV2("topicB", "pg")
	ext[FieldAccessKey] = "RocketMQ"
	ext[FieldSignature] = Sign(ext, nil, "12345678")
	ext[FieldSecurityToken] = "tok"
	if _, err := p.Check(Request{RemoteAddr: "127.0.0.1:1", Code: remoting.SendMessageV2, ExtFields: ext}); err != nil {
		t.Fatal(err)
	}
}

func TestResources(t *testing.T) {
	top := func(n string, p Perm) Resource { return Resource{Name: n, Perm: p} }
	grp := func(n string, p Perm) Resource { return Resource{Group: true, Name: n, Perm: p} }
	lock, _ := json.Marshal(remoting.LockBatchRequestBody{ConsumerGroup: "cg", ClientID: "c", MQSet: []remoting.MessageQueue{{Topic: "T1"}, {Topic: "T2"}, {Topic: "T1", QueueID: 1}}})
	cases := []struct {
		name string
		code int32
		ext  map[string]string
		body []byte
		want []Resource
	}{
		{"send v1", remoting.SendMessage, map[string]string{"producerGroup": "pg", "topic": "T", "defaultTopic": "D", "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0"}, nil, []Resource{top("T", Pub)}},
		{"send v2", remoting.SendMessageV2, sendV2("T", "pg"), nil, []Resource{top("T", Pub)}},
		{"send batch", remoting.SendBatchMessage, sendV2("T", "pg"), nil, []Resource{top("T", Pub)}},
		{"send reply", remoting.SendReplyMessageV2, sendV2("T", "pg"), nil, []Resource{top("T", Pub)}},
		{"send retry", remoting.SendMessageV2, sendV2("%RETRY%cg", "pg"), nil, []Resource{grp("cg", Sub)}},
		{"send dlq", remoting.SendMessageV2, sendV2("%DLQ%cg", "pg"), nil, []Resource{top("%DLQ%cg", Pub)}},
		{"dead letter", remoting.DeadLetterMessage, map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "0", "extraInfo": "x", "offset": "1"}, nil, []Resource{top("T", Sub), grp("cg", Sub)}},
		{"recall", remoting.RecallMessage, map[string]string{"producerGroup": "pg", "topic": "T", "recallHandle": "h"}, nil, []Resource{top("T", Pub)}},
		{"send back", remoting.ConsumerSendMsgBack, map[string]string{"offset": "1", "group": "cg", "delayLevel": "0"}, nil, []Resource{grp("cg", Sub)}},
		{"pull", remoting.PullMessage, pull("T", "cg"), nil, []Resource{top("T", Sub), grp("cg", Sub)}},
		{"pull retry", remoting.PullMessage, pull("%RETRY%cg", "cg"), nil, []Resource{grp("cg", Sub)}},
		{"lite pull", remoting.LitePullMessage, pull("T", "cg"), nil, []Resource{top("T", Sub), grp("cg", Sub)}},
		{"query offset", remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "0"}, nil, []Resource{grp("cg", Sub), top("T", Sub)}},
		{"update offset", remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "0", "commitOffset": "1"}, nil, []Resource{grp("cg", Sub), top("T", Sub)}},
		{"query message", remoting.QueryMessage, map[string]string{"topic": "T", "key": "k", "maxNum": "1", "beginTimestamp": "0", "endTimestamp": "1"}, nil, []Resource{top("T", Sub)}},
		{"search offset", remoting.SearchOffsetByTimestamp, map[string]string{"topic": "T", "queueId": "0", "timestamp": "1"}, nil, []Resource{top("T", Sub)}},
		{"max offset", remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil, []Resource{top("T", Sub)}},
		{"min offset", remoting.GetMinOffset, map[string]string{"topic": "T", "queueId": "0"}, nil, []Resource{top("T", Sub)}},
		{"heartbeat", remoting.HeartBeat, nil, []byte(`{"clientID":"c","consumerDataSet":[{"groupName":"cg","subscriptionDataSet":[{"topic":"T"},{"topic":"%RETRY%cg"},{"topic":"U"}]},{"groupName":"cg2","subscriptionDataSet":[{"topic":"T"}]}]}`),
			[]Resource{grp("cg", Sub), top("T", Sub), top("U", Sub), grp("cg2", Sub)}},
		{"unregister consumer", remoting.UnregisterClient, map[string]string{"clientID": "c", "consumerGroup": "cg"}, nil, []Resource{grp("cg", Sub)}},
		{"unregister producer", remoting.UnregisterClient, map[string]string{"clientID": "c", "producerGroup": "pg"}, nil, nil},
		{"consumer list", remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "cg"}, nil, []Resource{grp("cg", Sub)}},
		{"lock", remoting.LockBatchMQ, nil, lock, []Resource{grp("cg", Sub), top("T1", Sub), top("T2", Sub)}},
		{"unlock", remoting.UnlockBatchMQ, nil, lock, []Resource{grp("cg", Sub), top("T1", Sub), top("T2", Sub)}},
		{"end transaction", remoting.EndTransaction, map[string]string{"producerGroup": "pg"}, nil, nil},
		{"route", remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil, nil},
		{"create topic", remoting.UpdateAndCreateTopic, map[string]string{"topic": "T"}, nil, nil},
		{"unknown", 7777, map[string]string{"topic": "T"}, nil, nil},
	}
	for _, c := range cases {
		got, err := Resources(c.code, c.ext, c.body)
		if err != nil || !reflect.DeepEqual([]Resource(got), c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	for _, c := range []struct {
		code int32
		ext  map[string]string
		body []byte
	}{
		{remoting.SendMessageV2, map[string]string{"a": "pg"}, nil},
		{remoting.PullMessage, map[string]string{"topic": "T"}, nil},
		{remoting.HeartBeat, nil, nil},
		{remoting.LockBatchMQ, nil, []byte("[")},
		{remoting.ConsumerSendMsgBack, map[string]string{"offset": "x", "group": "g"}, nil},
	} {
		if _, err := Resources(c.code, c.ext, c.body); err == nil {
			t.Errorf("code %d %v: no error", c.code, c.ext)
		}
	}
}

func TestNeedsAdmin(t *testing.T) {
	admin := []int32{17, 25, 200, 207, 215, 216, 50, 51, 52, 53, 54, 222, 9002, 9003, 9004, 9005, 9006, 9010}
	plain := []int32{10, 11, 12, 14, 15, 21, 29, 30, 31, 33, 34, 35, 36, 37, 38, 41, 42, 46, 105, 106, 201, 206, 310, 320, 361, 400, 9001, 9011}
	for _, c := range admin {
		if !NeedsAdmin(c, nil) {
			t.Errorf("code %d: not admin", c)
		}
	}
	for _, c := range plain {
		if NeedsAdmin(c, nil) {
			t.Errorf("code %d: admin", c)
		}
	}
	for v, want := range map[string]bool{"true": true, "TRUE": true, "True": true, "false": false, "": false, "1": false} {
		if got := NeedsAdmin(remoting.UpdateConsumerOffset, map[string]string{remoting.FieldReset: v}); got != want {
			t.Errorf("reset %q: %v", v, got)
		}
	}
	if NeedsAdmin(remoting.PullMessage, map[string]string{remoting.FieldReset: "true"}) {
		t.Error("reset flag on a pull")
	}
}
