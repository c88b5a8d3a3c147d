package cluster

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// Sends made to the leader at once are queued and submitted together
// (grpc_sendfast.go): each call still gets its own message's answer (the
// queue offset the stored message with its id holds), and a send made
// again with the same message id is deduplicated, not stored twice.
func TestGRPCConcurrentSendsAnsweredEach(t *testing.T) {
	tb := startGRPCBrokers(t, nil)
	l := tb.leader()
	const topic, n = "inline", 64
	createTopic(t, l.rep, topic, 1)
	c := grpcClient(t, l.GRPCAddr())
	ctx := clientCtx(t, "inline-producer", nil)

	send := func(ids []string) map[string]int64 {
		var mu sync.Mutex
		got := map[string]int64{}
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg(topic, id, "body-"+id, nil)}})
				if err != nil {
					t.Errorf("send %s: %v", id, err)
					return
				}
				if resp.Status.Code != rmqpb.Code_OK || len(resp.Entries) != 1 || resp.Entries[0].MessageId != id {
					t.Errorf("send %s: %v", id, resp)
					return
				}
				mu.Lock()
				got[id] = resp.Entries[0].Offset
				mu.Unlock()
			}()
		}
		wg.Wait()
		return got
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("inline-%d", i)
	}
	got := send(ids)
	require.Len(t, got, n)

	read := func() map[int64]string {
		res, err := l.rep.Store().GetMessages(topic, 0, 0, 2*n, 1<<24, nil)
		require.NoError(t, err)
		stored := map[int64]string{}
		for i, rec := range res.Records {
			m, _, err := message.Decode(rec)
			require.NoError(t, err)
			require.Equal(t, "body-"+m.UniqKey(), string(m.Body))
			stored[res.QueueOffsets[i]] = m.UniqKey()
		}
		return stored
	}
	stored := read()
	require.Len(t, stored, n)
	for id, off := range got {
		require.Equal(t, id, stored[off], "the answer to %s names offset %d", id, off)
	}

	// The same ids again, at once: answered, not stored again.
	again := send(ids[:16])
	require.Len(t, again, 16)
	require.Len(t, read(), n)
}

// A gRPC send's properties, built without a map, encode as
// message.EncodeProperties encodes the same pairs as a map (names sorted),
// so the stored record is the one the remoting-shaped request gave.
func TestGRPCPropsEncodeAsMap(t *testing.T) {
	pairs := [][2]string{{message.PropertyUniqKey, "ID-1"}, {"zeta", "1"}, {"alpha", ""}, {message.PropertyTags, "t"},
		{"Mixed", "v w"}, {message.PropertyKeys, "k1 k2"}, {"a", "x"}, {"b", "y"}, {"c", "z"}, {"d", "more than the stack"}}
	for n := 0; n <= len(pairs); n++ {
		var ps grpcProps
		m := map[string]string{}
		for _, p := range pairs[:n] {
			ps = append(ps, grpcProp{p[0], p[1]})
			m[p[0]] = p[1]
		}
		require.Equal(t, message.EncodeProperties(m), ps.encode(), "%d pairs", n)
	}
}

// A stored send's answer, encoded by hand (grpcSendOK), is the bytes
// proto.Marshal makes of the same SendMessageResponse, for every field
// set or left empty.
func TestGRPCSendOKEncoding(t *testing.T) {
	for _, r := range []grpcSendOK{
		{},
		{messageID: "01AB"},
		{messageID: "01AB", offset: 7},
		{messageID: "01AB", offset: 1 << 40, txnID: "7F000001-12"},
		{messageID: "01AB", offset: -1, recall: "handle"},
		{messageID: string(make([]byte, 300)), txnID: "t", offset: 1, recall: "r"},
	} {
		want, err := proto.Marshal(&rmqpb.SendMessageResponse{Status: ok(), Entries: []*rmqpb.SendResultEntry{
			{Status: ok(), MessageId: r.messageID, TransactionId: r.txnID, Offset: r.offset, RecallHandle: r.recall}}})
		require.NoError(t, err)
		require.Equal(t, want, r.AppendProto(nil), "%+v", r)
		require.Equal(t, append([]byte("prefix"), want...), r.AppendProto([]byte("prefix")))
	}
}
