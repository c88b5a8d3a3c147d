package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/remoting"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// fuzzSkip are the request codes a fuzzed frame may not carry: they change
// the group's membership, leadership or access control, after which the
// canary's refusal would be the broker doing what it was asked.
func fuzzSkip(code int32) bool {
	return (code >= remoting.AdminCodeMin && code <= remoting.AdminCodeMax && code != remoting.ClusterStatus) ||
		(code >= 50 && code <= 53) // ACL updates
}

// fuzzSeeds are well-formed requests of every code the broker serves, each
// in both header encodings: the fuzzer mutates them from there.
func fuzzSeeds(t testing.TB) [][]byte {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	send := remoting.SendMessageRequestHeader{ProducerGroup: "fz-p", Topic: "FZ", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 1, BornTimestamp: time.Now().UnixMilli(), Properties: "UNIQ_KEY\x01FZ0001\x02KEYS\x01k1\x02TAGS\x01a\x02"}
	batch, err := remoting.AppendBatch(nil, []remoting.BatchEntry{
		{Body: []byte("b1"), Properties: map[string]string{"UNIQ_KEY": "FZ0002"}},
		{Body: []byte("b2"), Properties: map[string]string{"UNIQ_KEY": "FZ0003", "KEYS": "k2"}},
	})
	require.NoError(t, err)
	batchHeader := send
	batchHeader.Batch = true
	pull := map[string]string{"consumerGroup": "fz-g", "topic": "FZ", "queueId": "1", "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
	sqlPull := map[string]string{}
	for k, v := range pull {
		sqlPull[k] = v
	}
	sqlPull["subscription"], sqlPull["expressionType"] = "a > 1 AND b IN ('x', 'y') OR c IS NULL", "SQL92"
	heartbeat := []byte(`{"clientID":"fz@1","producerDataSet":[{"groupName":"fz-p"}],"consumerDataSet":[{"groupName":"fz-g","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"FZ","subString":"a || b","tagsSet":["a","b"],"codeSet":[97,98],"subVersion":1,"expressionType":"TAG"}],"unitMode":false}]}`)
	lock := []byte(`{"consumerGroup":"fz-g","clientId":"fz@1","mqSet":[{"topic":"FZ","brokerName":"raftmq","queueId":1}]}`)
	group := []byte(`{"groupName":"fz-g2","consumeEnable":true,"consumeBroadcastEnable":true,"retryQueueNums":1,"retryMaxTimes":16,"brokerId":0,"whichBrokerWhenConsumeSlowly":1}`)

	reqs := []*remoting.Command{
		remoting.NewRequest(remoting.SendMessage, send.Encode(), []byte("hello")),
		remoting.NewRequest(remoting.SendMessageV2, send.EncodeV2(), []byte("hello v2")),
		remoting.NewRequest(remoting.SendBatchMessage, batchHeader.EncodeV2(), batch),
		remoting.NewRequest(remoting.PullMessage, pull, nil),
		remoting.NewRequest(remoting.LitePullMessage, sqlPull, nil),
		remoting.NewRequest(remoting.QueryMessage, map[string]string{"topic": "FZ", "key": "k1", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": now}, nil),
		remoting.NewRequest(remoting.ViewMessageByID, map[string]string{"offset": "0"}, nil),
		remoting.NewRequest(remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "fz-g", "topic": "FZ", "queueId": "1"}, nil),
		remoting.NewRequest(remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "fz-g", "topic": "FZ", "queueId": "1", "commitOffset": "1"}, nil),
		remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "FZ", "queueId": "1"}, nil),
		remoting.NewRequest(remoting.GetMinOffset, map[string]string{"topic": "FZ", "queueId": "1"}, nil),
		remoting.NewRequest(remoting.SearchOffsetByTimestamp, map[string]string{"topic": "FZ", "queueId": "1", "timestamp": now}, nil),
		remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{"topic": "FZ2", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "order": "false"}, nil),
		remoting.NewRequest(remoting.GetAllTopicConfig, nil, nil),
		remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": "FZ2"}, nil),
		remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "FZ"}, nil),
		remoting.NewRequest(remoting.HeartBeat, nil, heartbeat),
		remoting.NewRequest(remoting.UnregisterClient, map[string]string{"clientID": "fz@1", "producerGroup": "fz-p", "consumerGroup": "fz-g"}, nil),
		remoting.NewRequest(remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "fz-g"}, nil),
		remoting.NewRequest(remoting.LockBatchMQ, nil, lock),
		remoting.NewRequest(remoting.UnlockBatchMQ, nil, lock),
		remoting.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{"offset": "0", "group": "fz-g", "delayLevel": "0", "originMsgId": "FZ0001", "originTopic": "FZ", "maxReconsumeTimes": "1"}, nil),
		remoting.NewRequest(remoting.EndTransaction, map[string]string{"producerGroup": "fz-p", "tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "FZ0001", "transactionId": "FZ0001"}, nil),
		remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, group),
		remoting.NewRequest(remoting.GetAllSubscriptionGroupConfig, nil, nil),
		remoting.NewRequest(remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "fz-g2"}, nil),
		remoting.NewRequest(remoting.CheckClientConfig, map[string]string{"group": "fz-g"}, []byte(`{"group":"fz-g","subscriptionData":{"topic":"FZ","subString":"a > 1","expressionType":"SQL92"}}`)),
		remoting.NewRequest(remoting.ClusterStatus, nil, nil),
		remoting.NewRequest(31337, map[string]string{"x": "y"}, nil), // an unknown code
	}
	var out [][]byte
	for i, req := range reqs {
		for _, st := range []remoting.SerializeType{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
			c := *req
			c.Serialize, c.Opaque = st, int32(i+1)
			f, err := remoting.AppendFrame(nil, &c)
			require.NoError(t, err)
			out = append(out, f)
		}
	}
	return out
}

// FuzzBrokerConnection writes arbitrary bytes (mutated from well-formed
// requests of every code) on a real connection to a running broker's
// client port. The broker must answer or close the connection within its
// read deadline, never crash (a panic in any handler ends this process),
// and go on serving: after every input a canary send is acknowledged.
func FuzzBrokerConnection(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	addrs := freeAddrs(f, 2)
	b, err := Start(Config{ID: 1, Dir: f.TempDir(), Peers: map[uint64]Peer{1: {Client: addrs[0], Raft: addrs[1]}},
		SegmentSize: 4 << 20, Raft: raftlog.Timing{TickInterval: 10 * time.Millisecond}, AutoCreateTopics: true, ClientReadTimeout: 2 * time.Second, LeaderWait: 500 * time.Millisecond,
		Store: store.Config{CQUnitsPerFile: 1000, IndexSlots: 64, IndexMaxEntries: 4096}})
	require.NoError(f, err)
	f.Cleanup(func() { b.Close() })
	canary, err := remoting.Dial(context.Background(), addrs[0], remoting.Options{})
	require.NoError(f, err)
	f.Cleanup(func() { _ = canary.Close() })
	canarySend := func(n int) error {
		h := remoting.SendMessageRequestHeader{ProducerGroup: "canary", Topic: "fuzz-canary", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
			BornTimestamp: time.Now().UnixMilli(), Properties: fmt.Sprintf("UNIQ_KEY\x01CANARY%d\x02", n)}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := canary.Invoke(ctx, remoting.NewRequest(remoting.SendMessage, h.Encode(), []byte("canary")))
		if err != nil {
			return err
		}
		if resp.Code != remoting.Success {
			return fmt.Errorf("canary send answered %d %q", resp.Code, resp.Remark)
		}
		return nil
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := canarySend(0)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			f.Fatalf("the broker never acknowledged a send: %v", err)
		}
	}

	n := 0
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) > 4 {
			if c, err := remoting.DecodeFrame(frame[4:]); err == nil && fuzzSkip(c.Code) {
				t.Skip("a membership, leadership or ACL change")
			}
		}
		nc, err := net.Dial("tcp", addrs[0])
		require.NoError(t, err)
		defer nc.Close()
		_, _ = nc.Write(frame)
		_ = nc.(*net.TCPConn).CloseWrite()
		// Answers, then the broker's close: at EOF on a frame boundary at
		// once, mid-frame when its read deadline (2 s) fires. A pull may
		// be held; nothing may hold the connection much past the deadline.
		_ = nc.SetReadDeadline(time.Now().Add(6 * time.Second))
		_, err = io.Copy(io.Discard, nc)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the broker neither answered and closed nor timed out the connection within 6 s")
		}
		n++
		require.NoError(t, canarySend(n), "the broker stopped serving after input %q", frame)
	})
}
