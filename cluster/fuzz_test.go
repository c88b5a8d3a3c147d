package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
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
	// Fixed times: the seeds are the same bytes in every run.
	const born = 1767225600000 // 2026-01-01
	now := strconv.FormatInt(born+3600_000, 10)
	send := remoting.SendMessageRequestHeader{ProducerGroup: "fz-p", Topic: "FZ", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 1, BornTimestamp: born, Properties: "UNIQ_KEY\x01FZ0001\x02KEYS\x01k1\x02TAGS\x01a\x02"}
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
// and go on serving: after every input, the offset commits it queued are
// replicated, a canary send is acknowledged, and a checkpoint succeeds
// (a replicated request the checkpoint cannot store stops the node).
//
// One broker serves a fuzz worker's inputs one after another (starting
// one per input would run a few inputs a second), so an input's effect
// may depend on what came before it. Three things keep a failure
// reproducible: the seeds are fixed bytes; every input's effects are
// carried through to the checkpoint before the next input (its handlers
// finished, the offset commits it queued replicated), so the input that
// breaks the broker is the one that fails; and an input that finds
// the broker broken by an earlier one gets a fresh broker, so the inputs
// the fuzzer minimises after a failure each run against a broker in a
// known state (topic FZ, 4 queues, one message in queue 1). A failing
// input's report holds the broker's stop error, the end of its log, and
// the path of a file with the last megabyte of it (testdata/fuzz-logs/,
// ignored by git). Run with scripts/fuzz.sh.
func FuzzBrokerConnection(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	fb := &fuzzBroker{base: f.TempDir(), log: &logRing{max: 1 << 20}}
	fb.start(f)
	f.Cleanup(fb.close)

	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) > 4 {
			if c, err := remoting.DecodeFrame(frame[4:]); err == nil && fuzzSkip(c.Code) {
				t.Skip("a membership, leadership or ACL change")
			}
		}
		if fb.broken {
			fb.close()
			fb.start(t)
		}
		t.Cleanup(func() {
			if t.Failed() {
				fb.broken = true
				fb.report(t)
			}
		})
		nc, err := net.Dial("tcp", fb.addr)
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
		// The broker closes at EOF without waiting for the input's
		// handlers: wait for them, so that their effects are checked now,
		// not after the next input.
		require.NoError(t, fb.quiesce(), "after input %q", frame)
		fb.b.offs.flush() // the one-way commits the input queued
		require.NoError(t, fb.send("fuzz-canary", 0), "the broker stopped serving after input %q", frame)
		require.NoError(t, fb.b.rep.Store().Persist(), "a checkpoint failed after input %q", frame)
	})
}

// fuzzBroker is the single-node broker a fuzz worker's inputs go to.
type fuzzBroker struct {
	base   string // the brokers' directories are made under it
	log    *logRing
	dir    string
	addr   string
	b      *Broker
	canary *remoting.Conn
	n      int  // sends so far (each with its own UNIQ_KEY)
	broken bool // an input failed: the next one gets a fresh broker
}

// start starts a fresh broker with topic FZ (4 queues) holding one message
// in queue 1, the state every input starts from after a failure.
func (fb *fuzzBroker) start(tb testing.TB) {
	var err error
	fb.dir, err = os.MkdirTemp(fb.base, "broker-")
	require.NoError(tb, err)
	addrs := freeAddrs(tb, 2)
	fb.addr = addrs[0]
	fmt.Fprintf(fb.log, "---- fuzz: a fresh broker in %s\n", fb.dir)
	fb.b, err = Start(Config{ID: 1, Dir: fb.dir, Peers: map[uint64]Peer{1: {Client: addrs[0], Raft: addrs[1]}},
		SegmentSize: 4 << 20, Raft: raftlog.Timing{TickInterval: 10 * time.Millisecond}, AutoCreateTopics: true, ClientReadTimeout: 2 * time.Second, LeaderWait: 500 * time.Millisecond,
		MaxInflightTotal: 512 << 20, // a Budget of its own, which quiesce reads
		Store:            store.Config{CQUnitsPerFile: 1000, IndexSlots: 64, IndexMaxEntries: 4096, NoSyncMeta: true},
		Logger:           slog.New(slog.NewTextHandler(fb.log, nil))})
	require.NoError(tb, err)
	fb.canary, err = remoting.Dial(context.Background(), fb.addr, remoting.Options{})
	require.NoError(tb, err)
	fb.broken = false
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := fb.send("fuzz-canary", 0)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the broker never acknowledged a send: %v", err)
		}
	}
	require.NoError(tb, fb.send("FZ", 1))
}

func (fb *fuzzBroker) close() {
	if fb.b == nil {
		return
	}
	_ = fb.canary.Close()
	_ = fb.b.Close()
	_ = os.RemoveAll(fb.dir)
	fb.b, fb.canary = nil, nil
}

// quiesce waits until no request holds any of the broker's in-flight
// budget: every handler of the input has answered or given up.
func (fb *fuzzBroker) quiesce() error {
	for deadline := time.Now().Add(10 * time.Second); fb.b.srv.Budget.InUse() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("requests still hold %d bytes of in-flight budget 10 s after their connection closed", fb.b.srv.Budget.InUse())
		}
	}
	return nil
}

// send sends one message to (topic, queue), creating a topic of 4 queues
// if there is none, and wants it acknowledged.
func (fb *fuzzBroker) send(topic string, queue int32) error {
	fb.n++
	h := remoting.SendMessageRequestHeader{ProducerGroup: "canary", Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: queue, BornTimestamp: time.Now().UnixMilli(), Properties: fmt.Sprintf("UNIQ_KEY\x01CANARY%d\x02", fb.n)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := fb.canary.Invoke(ctx, remoting.NewRequest(remoting.SendMessage, h.Encode(), []byte("canary")))
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("send to %s answered %d %q", topic, resp.Code, resp.Remark)
	}
	return nil
}

// report logs why the broker failed an input: its stop error, if it
// stopped, and the end of its log, whose last megabyte goes to a file
// under testdata/fuzz-logs.
func (fb *fuzzBroker) report(t *testing.T) {
	select {
	case <-fb.b.Done():
		t.Logf("the broker stopped: %v", fb.b.Err())
	default:
		t.Logf("the broker is still running")
	}
	log := fb.log.bytes()
	dir := filepath.Join("testdata", "fuzz-logs")
	path := filepath.Join(dir, fmt.Sprintf("FuzzBrokerConnection-%s-%d.log", time.Now().UTC().Format("20060102T150405"), os.Getpid()))
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(path, log, 0o644)
	}
	if err != nil {
		t.Logf("keep the broker's log: %v", err)
		path = "(not written)"
	}
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	t.Logf("the broker's log: %s; its last lines:\n%s", path, strings.Join(lines[max(0, len(lines)-40):], "\n"))
}

// logRing keeps about the last max bytes written to it.
type logRing struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (r *logRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if len(r.buf) > r.max {
		keep := r.max / 2
		copy(r.buf, r.buf[len(r.buf)-keep:])
		r.buf = r.buf[:keep]
	}
	return len(p), nil
}

func (r *logRing) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.buf...)
}
