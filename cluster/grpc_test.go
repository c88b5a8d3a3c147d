package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/certs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store/pop"
)

// startGRPCBrokers starts three nodes, each serving gRPC at an address the
// peers list, on the transport $RAFTMQ_TEST_GRPC_TRANSPORT names (the
// default, lean, when unset), so that the same tests run on both.
func startGRPCBrokers(t testing.TB, mod func(*Config)) *testBrokers {
	addrs := freeAddrs(t, 3)
	transport := os.Getenv("RAFTMQ_TEST_GRPC_TRANSPORT")
	return startBrokersWith(t, func(c *Config) {
		c.GRPCAddr = addrs[c.ID-1]
		c.GRPCTransport = transport
		for id := range c.Peers {
			q := c.Peers[id]
			q.GRPC = addrs[id-1]
			c.Peers[id] = q
		}
		c.AutoCreateTopics = true
		if mod != nil {
			mod(c)
		}
	})
}

func grpcClient(t testing.TB, addr string) rmqpb.MessagingServiceClient {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return rmqpb.NewMessagingServiceClient(cc)
}

// clientCtx is a call's context with the metadata RocketMQ 5 clients send;
// creds, if set, sign it.
func clientCtx(t testing.TB, clientID string, creds *acl.Credentials) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	dt := time.Now().UTC().Format("20060102T150405Z")
	kv := []string{mdClientID, clientID, mdDateTime, dt, mdLanguage, "HTTP", mdVersion, "1.0.8"}
	if creds != nil {
		kv = append(kv, mdAuthorization, creds.SignV2(dt))
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func grpcMsg(topic, id string, body string, mod func(*rmqpb.SystemProperties)) *rmqpb.Message {
	sp := &rmqpb.SystemProperties{MessageId: id, MessageType: rmqpb.MessageType_NORMAL, BodyEncoding: rmqpb.Encoding_IDENTITY,
		BornTimestamp: timestamppb.Now(), BornHost: "test", Keys: []string{"k-" + id}}
	if mod != nil {
		mod(sp)
	}
	return &rmqpb.Message{Topic: &rmqpb.Resource{Name: topic}, SystemProperties: sp, Body: []byte(body), UserProperties: map[string]string{"color": "blue"}}
}

// A RocketMQ 5 client talking to a follower: the route names the leader's
// gRPC endpoint; sends (normal, FIFO, delay, transactional) are stored
// through the leader once, deduplicated by message id; FIFO messages of
// one group land in one queue; a half message is committed by
// EndTransaction; a bad receive and a forged receipt are refused.
func TestGRPCSendsThroughAFollower(t *testing.T) {
	tb := startGRPCBrokers(t, func(c *Config) { c.FailoverRoutes = true })
	l, f := tb.leader(), tb.follower()
	fc := grpcClient(t, f.GRPCAddr())
	ctx := clientCtx(t, "host@1@0@test", nil)

	// The topic exists once created (auto-created by the first send here).
	resp, err := fc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("G", "01AA", "first", nil)}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	require.Equal(t, "01AA", resp.Entries[0].MessageId)

	route, err := fc.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "G"}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, route.Status.Code)
	require.Len(t, route.MessageQueues, 12, "4 queues on the leader, 4 write-only on each follower")
	require.Equal(t, int32(0), route.MessageQueues[0].Id)
	require.Equal(t, rmqpb.Permission_READ_WRITE, route.MessageQueues[0].Permission)
	ep := route.MessageQueues[0].Broker.Endpoints.Addresses[0]
	require.Equal(t, l.GRPCAddr(), fmt.Sprintf("%s:%d", ep.Host, ep.Port), "the route names the leader's gRPC endpoint")
	followerEPs := map[string]bool{}
	for _, mq := range route.MessageQueues[4:] {
		require.Equal(t, rmqpb.Permission_WRITE, mq.Permission)
		a := mq.Broker.Endpoints.Addresses[0]
		followerEPs[mq.Broker.Name+" "+fmt.Sprintf("%s:%d", a.Host, a.Port)] = true
	}
	for _, b := range tb.bs {
		if b != l {
			require.True(t, followerEPs[FailoverBrokerName("raftmq", b.cfg.ID)+" "+b.GRPCAddr()], "follower %d listed: %v", b.cfg.ID, followerEPs)
		}
	}
	missing, err := fc.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "%bad topic%"}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_TOPIC_NOT_FOUND, missing.Status.Code)

	// A retried send (same message id) is stored once.
	resp, err = fc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("G", "01AA", "first", nil)}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code)
	require.Eventually(t, func() bool { return storedIn(l, "G", 4) == 1 }, 5*time.Second, 10*time.Millisecond)
	got, err := l.Replica().Store().QueryByUniqKey("G", "01AA")
	require.NoError(t, err)
	require.Equal(t, "first", string(got.Body))
	require.Equal(t, "blue", got.Properties["color"])
	require.Equal(t, "k-01AA", got.Properties[message.PropertyKeys])

	// FIFO: every message of a group in one queue, in order.
	for i := range 6 {
		resp, err = fc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("G", fmt.Sprintf("02%02d", i), fmt.Sprint(i), func(sp *rmqpb.SystemProperties) {
			sp.MessageType, sp.MessageGroup = rmqpb.MessageType_FIFO, ptr("order-7")
		})}})
		require.NoError(t, err)
		require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	}
	q := int32(uint32(message.JavaHashCode("order-7")) % 4)
	require.Eventually(t, func() bool { return storedIn(l, "G", 4) == 7 }, 5*time.Second, 10*time.Millisecond)
	for i := range 6 {
		m, err := l.Replica().Store().QueryByUniqKey("G", fmt.Sprintf("02%02d", i))
		require.NoError(t, err)
		require.Equal(t, q, m.QueueID)
		require.Equal(t, "order-7", m.Properties[message.PropertyShardingKey])
	}

	// A FIFO message without its group is refused, with the reason.
	resp, err = fc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("G", "03", "x", func(sp *rmqpb.SystemProperties) {
		sp.MessageType = rmqpb.MessageType_FIFO
	})}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, resp.Status.Code)
	resp, err = fc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("G", "", "x", nil)}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_ILLEGAL_MESSAGE_ID, resp.Status.Code)
	big := grpcMsg("G", "04", "", nil)
	big.Body = make([]byte, message.MaxBodySize+1)
	resp, err = fc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{big}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_MESSAGE_BODY_TOO_LARGE, resp.Status.Code)

	// Delay: held back until due, then delivered to its topic.
	due := time.Now().Add(1500 * time.Millisecond)
	resp, err = fc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("D", "05", "later", func(sp *rmqpb.SystemProperties) {
		sp.MessageType, sp.DeliveryTimestamp = rmqpb.MessageType_DELAY, timestamppb.New(due)
	})}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	require.Zero(t, storedIn(l, "D", 4), "not before it is due")
	require.Eventually(t, func() bool { return storedIn(l, "D", 4) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.False(t, time.Now().Before(due), "delivered early")

	// Transaction: the half message is invisible until committed.
	resp, err = fc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("X", "06", "txn", func(sp *rmqpb.SystemProperties) {
		sp.MessageType = rmqpb.MessageType_TRANSACTION
	})}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	txnID := resp.Entries[0].TransactionId
	require.NotEmpty(t, txnID)
	require.Zero(t, storedIn(l, "X", 4))
	end, err := fc.EndTransaction(ctx, &rmqpb.EndTransactionRequest{Topic: &rmqpb.Resource{Name: "X"}, MessageId: "06", TransactionId: txnID,
		Resolution: rmqpb.TransactionResolution_COMMIT, Source: rmqpb.TransactionSource_SOURCE_CLIENT})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, end.Status.Code, end.Status.Message)
	require.Eventually(t, func() bool { return storedIn(l, "X", 4) == 1 }, 5*time.Second, 10*time.Millisecond)
	end, err = fc.EndTransaction(ctx, &rmqpb.EndTransactionRequest{Topic: &rmqpb.Resource{Name: "X"}, MessageId: "06", TransactionId: "nonsense",
		Resolution: rmqpb.TransactionResolution_COMMIT})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_INVALID_TRANSACTION_ID, end.Status.Code)

	// A bad receive is answered with its status alone, then the time.
	rs, err := fc.ReceiveMessage(ctx, &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "g"}, BatchSize: 16})
	require.NoError(t, err)
	first, err := rs.Recv()
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_ILLEGAL_TOPIC, first.GetStatus().GetCode())
	last, err := rs.Recv()
	require.NoError(t, err)
	require.NotNil(t, last.GetDeliveryTimestamp())
	// A handle raftmq did not issue is refused before anything is asked.
	ack, err := fc.AckMessage(ctx, &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: "g"}, Topic: &rmqpb.Resource{Name: "G"},
		Entries: []*rmqpb.AckMessageEntry{{MessageId: "01AA", ReceiptHandle: "forged"}}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_INVALID_RECEIPT_HANDLE, ack.Status.Code)
}

// The Telemetry stream: Settings are answered with what clients need
// (exponential backoff, a body bound), the producer is registered under its
// topic, and a transaction left open is checked back over the stream; the
// producer's EndTransaction (SOURCE_SERVER_CHECK) rolls it back.
func TestGRPCTelemetryAndCheckBack(t *testing.T) {
	tb := startGRPCBrokers(t, func(c *Config) { c.TxnTimeout, c.TxnCheckInterval = time.Second, time.Second })
	l := tb.leader()
	lc := grpcClient(t, l.GRPCAddr())
	ctx := clientCtx(t, "host@2@0@test", nil)

	hb, err := lc.Heartbeat(ctx, &rmqpb.HeartbeatRequest{ClientType: rmqpb.ClientType_PRODUCER})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE, hb.Status.Code, "a heartbeat before settings")

	tel, err := lc.Telemetry(ctx)
	require.NoError(t, err)
	require.NoError(t, tel.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
		ClientType: ptr(rmqpb.ClientType_PRODUCER), RequestTimeout: durationpb.New(3 * time.Second),
		PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: "Y"}}}}}}}))
	reply, err := tel.Recv()
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, reply.GetStatus().GetCode())
	set := reply.GetSettings()
	require.NotNil(t, set.GetBackoffPolicy().GetExponentialBackoff(), "producers need an exponential backoff")
	require.Equal(t, int32(message.MaxBodySize), set.GetPublishing().GetMaxBodySize())
	require.Len(t, l.members.Producers("Y"), 1, "registered under its topic")

	hb, err = lc.Heartbeat(ctx, &rmqpb.HeartbeatRequest{ClientType: rmqpb.ClientType_PRODUCER})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, hb.Status.Code)

	resp, err := lc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("Y", "07", "open", func(sp *rmqpb.SystemProperties) {
		sp.MessageType = rmqpb.MessageType_TRANSACTION
	})}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	check, err := tel.Recv()
	require.NoError(t, err)
	rec := check.GetRecoverOrphanedTransactionCommand()
	require.NotNil(t, rec, "a check-back, got %v", check)
	require.Equal(t, resp.Entries[0].TransactionId, rec.TransactionId)
	require.Equal(t, "07", rec.Message.SystemProperties.MessageId)
	require.Equal(t, "open", string(rec.Message.Body))
	require.NotNil(t, rec.Message.SystemProperties.BodyDigest)
	end, err := lc.EndTransaction(ctx, &rmqpb.EndTransactionRequest{Topic: &rmqpb.Resource{Name: "Y"}, MessageId: "07", TransactionId: rec.TransactionId,
		Resolution: rmqpb.TransactionResolution_ROLLBACK, Source: rmqpb.TransactionSource_SOURCE_SERVER_CHECK})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, end.Status.Code, end.Status.Message)
	require.Eventually(t, func() bool { return len(l.Replica().Store().PendingTransactions()) == 0 }, 5*time.Second, 10*time.Millisecond)
	require.Zero(t, storedIn(l, "Y", 4), "rolled back")

	// A consumer's settings: the node's policy back, the group created and
	// its member listed (admin consumer connection reads these).
	ctel, err := lc.Telemetry(clientCtx(t, "host@3@0@test", nil))
	require.NoError(t, err)
	require.NoError(t, ctel.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
		ClientType: ptr(rmqpb.ClientType_SIMPLE_CONSUMER),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: "cg"},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: "Y"}, Expression: &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "a || b"}}}}}}}}))
	creply, err := ctel.Recv()
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, creply.GetStatus().GetCode())
	require.Equal(t, int32(32), creply.GetSettings().GetSubscription().GetReceiveBatchSize())
	require.False(t, creply.GetSettings().GetSubscription().GetFifo())
	require.Equal(t, int32(17), creply.GetSettings().GetBackoffPolicy().GetMaxAttempts(), "16 retries + 1, the group's default")
	require.Eventually(t, func() bool { _, found := l.Replica().Store().SubscriptionGroup("cg"); return found }, 5*time.Second, 10*time.Millisecond)
	cons := l.members.Consumers("cg")
	require.Len(t, cons, 1)
	require.Equal(t, "host@3@0@test", cons[0].ClientID)
	require.Equal(t, "a || b", cons[0].Subscriptions[0].SubString)
	// The client's streams go to the leader only (as with failover routes
	// off); a follower asked for the group's and the topic's clients
	// answers with the leader's registry, not "not online".
	f := tb.follower()
	require.Empty(t, f.members.Consumers("cg"))
	fc := dial(t, f.ClientAddr())
	for _, q := range []struct {
		code int32
		ext  map[string]string
	}{
		{remoting.GetConsumerConnectionList, (&remoting.ConsumerConnectionRequestHeader{ConsumerGroup: "cg"}).Encode()},
		{remoting.GetProducerConnectionList, (&remoting.ProducerConnectionRequestHeader{ProducerGroup: "Y"}).Encode()},
	} {
		resp := invoke(t, fc, remoting.NewRequest(q.code, q.ext, nil))
		require.Equal(t, remoting.Success, resp.Code, "code %d: %s", q.code, resp.Remark)
		var cc remoting.ConsumerConnection // ProducerConnection's ConnectionSet is the same field
		require.NoError(t, remoting.DecodeJSON(resp.Body, &cc))
		require.Len(t, cc.ConnectionSet, 1, "code %d: %s", q.code, resp.Body)
	}
	require.NoError(t, ctel.CloseSend())
	require.Eventually(t, func() bool { return len(l.members.Consumers("cg")) == 0 }, 5*time.Second, 10*time.Millisecond, "gone with its stream")

	term, err := lc.NotifyClientTermination(ctx, &rmqpb.NotifyClientTerminationRequest{})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, term.Status.Code)
	require.Empty(t, l.members.Producers("Y"))
}

// With an ACL, gRPC calls are checked against the same accounts as
// remoting ones: unsigned and wrongly signed sends are refused with the
// reason, a signed one with PUB on the topic is stored (through a
// follower too), one without is FORBIDDEN.
func TestGRPCACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(testACL), 0o644))
	key := acl.NewKey()
	tb := startGRPCBrokers(t, func(c *Config) { c.ACLFile, c.ACLKey = file, key })
	l := tb.leader()
	operator := acl.Credentials{AccessKey: "operator", SecretKey: "operator-secret"}
	lc := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	require.Eventually(t, func() bool {
		return invoke(t, lc, signed(remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil), operator)).Code == remoting.Success
	}, 10*time.Second, 50*time.Millisecond)

	fc := grpcClient(t, tb.follower().GRPCAddr())
	send := func(creds *acl.Credentials, topic, id string) *rmqpb.Status {
		resp, err := fc.SendMessage(clientCtx(t, "c@1", creds), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg(topic, id, "x", nil)}})
		require.NoError(t, err)
		return resp.Status
	}
	s := send(nil, "T", "A1")
	require.Equal(t, rmqpb.Code_UNAUTHORIZED, s.Code)
	require.Contains(t, s.Message, "No accessKey is configured")
	s = send(&acl.Credentials{AccessKey: "producer1", SecretKey: "wrong"}, "T", "A2")
	require.Equal(t, rmqpb.Code_UNAUTHORIZED, s.Code)
	require.Contains(t, s.Message, "Check signature failed")
	s = send(&acl.Credentials{AccessKey: "producer1", SecretKey: "producer-secret"}, "T", "A3")
	require.Equal(t, rmqpb.Code_OK, s.Code, s.Message)
	s = send(&acl.Credentials{AccessKey: "producer1", SecretKey: "producer-secret"}, "U", "A4")
	require.Equal(t, rmqpb.Code_FORBIDDEN, s.Code)
	require.Contains(t, s.Message, "No default permission for topic:U")
	require.Eventually(t, func() bool { return storedIn(l, "T", 4) == 1 }, 5*time.Second, 10*time.Millisecond)
}

// The gRPC port takes the node's TLS mode: enforcing serves TLS (HTTP/2
// by ALPN) with the node's certificate and refuses plaintext; permissive
// serves both on one port.
func TestGRPCTLS(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, certs.Demo(dir, 3))
	for _, mode := range []remoting.TLSMode{remoting.TLSEnforcing, remoting.TLSPermissive} {
		t.Run(mode.String(), func(t *testing.T) {
			tb := startGRPCBrokers(t, func(c *Config) {
				c.TLS = &TLSConfig{Mode: mode, CAFile: filepath.Join(dir, "ca.pem"),
					CertFile: filepath.Join(dir, fmt.Sprintf("n%d.pem", c.ID)), KeyFile: filepath.Join(dir, fmt.Sprintf("n%d-key.pem", c.ID))}
			})
			addr := tb.follower().GRPCAddr()
			cfg, err := client.LoadTLS(client.TLSFiles{CAFile: filepath.Join(dir, "ca.pem")})
			require.NoError(t, err)
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
			require.NoError(t, err)
			defer cc.Close()
			ctx := clientCtx(t, "tls@1", nil)
			resp, err := rmqpb.NewMessagingServiceClient(cc).SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("S", "T1", "sealed", nil)}})
			require.NoError(t, err)
			require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)

			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_, err = grpcClient(t, addr).QueryRoute(pctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "S"}})
			if mode == remoting.TLSEnforcing {
				require.Error(t, err, "plaintext to an enforcing port")
			} else {
				require.NoError(t, err, "plaintext to a permissive port")
			}
		})
	}
}

// A method the service does not have is UNIMPLEMENTED, naming it; a
// message over the frame bound is refused before it is decoded.
func TestGRPCBadCalls(t *testing.T) {
	tb := startGRPCBrokers(t, nil)
	addr := tb.leader().GRPCAddr()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	ctx := clientCtx(t, "bad@1", nil)
	err = cc.Invoke(ctx, "/apache.rocketmq.v2.MessagingService/NoSuchRPC", &rmqpb.HeartbeatRequest{}, &rmqpb.HeartbeatResponse{})
	require.Equal(t, codes.Unimplemented, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "NoSuchRPC")

	huge := grpcMsg("H", "H1", "", nil)
	huge.Body = make([]byte, remoting.DefaultMaxFrame+1)
	_, err = grpcClient(t, addr).SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{huge}})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Zero(t, storedIn(tb.leader(), "H", 4))

	// A send the leader takes itself records the client's address.
	resp, err := grpcClient(t, addr).SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("H", "H2", "small", nil)}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	got, err := tb.leader().Replica().Store().QueryByUniqKey("H", "H2")
	require.NoError(t, err)
	require.True(t, got.BornHost.Addr().IsLoopback() && got.BornHost.Port() != 0, "born host %v: want the client's address", got.BornHost)
	require.True(t, got.BornHost.Addr().Is4(), "born host %v: want an IPv4 address, as remoting stores it", got.BornHost)
}

// receiveAll reads one ReceiveMessage stream: its status, messages and
// whether it ended with the delivery timestamp.
func receiveAll(t *testing.T, c rmqpb.MessagingServiceClient, ctx context.Context, req *rmqpb.ReceiveMessageRequest) (*rmqpb.Status, []*rmqpb.Message, error) {
	t.Helper()
	rs, err := c.ReceiveMessage(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	var stat *rmqpb.Status
	var msgs []*rmqpb.Message
	for {
		r, err := rs.Recv()
		if err != nil {
			return stat, msgs, err
		}
		switch {
		case r.GetStatus() != nil:
			stat = r.GetStatus()
		case r.GetMessage() != nil:
			msgs = append(msgs, r.GetMessage())
		case r.GetDeliveryTimestamp() != nil:
			return stat, msgs, nil
		}
	}
}

// The receive side over pop consumption: a SimpleConsumer's receive long
// polls until messages arrive, gets them with receipt handles and body
// digests; an ack hides one for good; a change of invisible time to 0
// makes one visible again at once, delivered with attempt 2, and the old
// handle no longer acks it.
func TestGRPCReceiveAckChange(t *testing.T) {
	tb := startGRPCBrokers(t, nil)
	l := tb.leader()
	c := grpcClient(t, tb.follower().GRPCAddr())
	ctx := clientCtx(t, "host@4@0@test", nil)
	resp, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("R", "R0", "before", nil)}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)

	// The consumer's settings create its group.
	tel, err := grpcClient(t, l.GRPCAddr()).Telemetry(ctx)
	require.NoError(t, err)
	require.NoError(t, tel.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
		ClientType: ptr(rmqpb.ClientType_SIMPLE_CONSUMER),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: "rg"},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: "R"}, Expression: &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "*"}}}}}}}}))
	_, err = tel.Recv()
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, found := l.Replica().Store().SubscriptionGroup("rg"); return found }, 5*time.Second, 10*time.Millisecond)

	recv := func(poll time.Duration) (*rmqpb.Status, []*rmqpb.Message) {
		st, msgs, err := receiveAll(t, c, ctx, &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "rg"},
			MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "R"}}, BatchSize: 8,
			InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(poll)})
		require.NoError(t, err)
		require.NotNil(t, st, "a status first")
		return st, msgs
	}
	// The group's first receive starts it near the end of the queues (as
	// RocketMQ's proxy pops, initMode MAX): "before" or nothing.
	st, msgs := recv(time.Second)
	require.Contains(t, []rmqpb.Code{rmqpb.Code_OK, rmqpb.Code_MESSAGE_NOT_FOUND}, st.Code, st.Message)
	require.LessOrEqual(t, len(msgs), 1)

	go func() {
		time.Sleep(300 * time.Millisecond)
		for i := range 3 {
			_, _ = c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("R", fmt.Sprintf("R%d", i+1), fmt.Sprintf("m%d", i+1), nil)}})
		}
	}()
	var got []*rmqpb.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		st, msgs = recv(5 * time.Second)
		require.Contains(t, []rmqpb.Code{rmqpb.Code_OK, rmqpb.Code_MESSAGE_NOT_FOUND}, st.Code, st.Message)
		got = append(got, msgs...)
	}
	require.Len(t, got, 3)
	byID := map[string]*rmqpb.Message{}
	for _, m := range got {
		sp := m.SystemProperties
		require.NotEmpty(t, sp.GetReceiptHandle())
		require.Equal(t, rmqpb.DigestType_MD5, sp.BodyDigest.Type)
		require.Equal(t, int32(1), sp.GetDeliveryAttempt())
		byID[sp.MessageId] = m
	}
	require.Contains(t, byID, "R1")
	require.Contains(t, byID, "R2")

	ack, err := c.AckMessage(ctx, &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: "rg"}, Topic: &rmqpb.Resource{Name: "R"},
		Entries: []*rmqpb.AckMessageEntry{{MessageId: "R1", ReceiptHandle: byID["R1"].SystemProperties.GetReceiptHandle()}}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, ack.Status.Code, ack.Status.Message)

	old := byID["R2"].SystemProperties.GetReceiptHandle()
	ch, err := c.ChangeInvisibleDuration(ctx, &rmqpb.ChangeInvisibleDurationRequest{Group: &rmqpb.Resource{Name: "rg"}, Topic: &rmqpb.Resource{Name: "R"},
		ReceiptHandle: old, InvisibleDuration: durationpb.New(0), MessageId: "R2"})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, ch.Status.Code, ch.Status.Message)
	require.NotEqual(t, old, ch.ReceiptHandle, "a new handle")

	var again *rmqpb.Message
	require.Eventually(t, func() bool {
		_, msgs := recv(time.Second)
		for _, m := range msgs {
			if m.SystemProperties.MessageId == "R2" {
				again = m
			}
		}
		return again != nil
	}, 15*time.Second, 10*time.Millisecond, "R2 visible again")
	require.Equal(t, int32(2), again.SystemProperties.GetDeliveryAttempt())
	ack, err = c.AckMessage(ctx, &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: "rg"}, Topic: &rmqpb.Resource{Name: "R"},
		Entries: []*rmqpb.AckMessageEntry{{MessageId: "R2", ReceiptHandle: old}}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_INVALID_RECEIPT_HANDLE, ack.Status.Code, "the superseded handle: %s", ack.Status.Message)
	ack, err = c.AckMessage(ctx, &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: "rg"}, Topic: &rmqpb.Resource{Name: "R"},
		Entries: []*rmqpb.AckMessageEntry{{MessageId: "R2", ReceiptHandle: again.SystemProperties.GetReceiptHandle()}}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, ack.Status.Code, ack.Status.Message)
}

// ForwardMessageToDeadLetterQueue through a follower: the message goes to
// %DLQ%group on every node with its origin recorded, its pop record goes
// with it, and the same handle (or a garbled one) is refused without a
// second copy.
func TestGRPCForwardToDeadLetter(t *testing.T) {
	tb := startGRPCBrokers(t, nil)
	l := tb.leader()
	c := grpcClient(t, tb.follower().GRPCAddr())
	ctx := clientCtx(t, "host@5@0@test", nil)
	tel, err := grpcClient(t, l.GRPCAddr()).Telemetry(ctx)
	require.NoError(t, err)
	require.NoError(t, tel.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
		ClientType: ptr(rmqpb.ClientType_PUSH_CONSUMER),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: "dg"},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: "D"}, Expression: &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "*"}}}}}}}}))
	_, err = tel.Recv()
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, found := l.Replica().Store().SubscriptionGroup("dg"); return found }, 5*time.Second, 10*time.Millisecond)

	recv := func() []*rmqpb.Message {
		st, msgs, err := receiveAll(t, c, ctx, &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "dg"},
			MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "D"}}, BatchSize: 8,
			InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(time.Second)})
		require.NoError(t, err)
		require.Contains(t, []rmqpb.Code{rmqpb.Code_OK, rmqpb.Code_MESSAGE_NOT_FOUND}, st.Code, st.Message)
		return msgs
	}
	// The topic exists and the group's cursor starts at its end before the
	// message is sent (a first receive starts at the end of the queues).
	resp, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("D", "D0", "warm", nil)}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	recv()
	resp, err = c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("D", "D1", "doomed", nil)}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	var m *rmqpb.Message
	require.Eventually(t, func() bool {
		for _, g := range recv() {
			if g.SystemProperties.MessageId == "D1" {
				m = g
			}
		}
		return m != nil
	}, 15*time.Second, 10*time.Millisecond, "D1 received")
	handle := m.SystemProperties.GetReceiptHandle()
	fwd := func(h string) *rmqpb.Status {
		r, err := c.ForwardMessageToDeadLetterQueue(ctx, &rmqpb.ForwardMessageToDeadLetterQueueRequest{Group: &rmqpb.Resource{Name: "dg"},
			Topic: &rmqpb.Resource{Name: "D"}, ReceiptHandle: h, MessageId: "D1", DeliveryAttempt: 1, MaxDeliveryAttempts: 1})
		require.NoError(t, err)
		return r.Status
	}
	require.Equal(t, rmqpb.Code_INVALID_RECEIPT_HANDLE, fwd("not a handle").Code)
	dlq := DLQGroupTopic("dg")
	require.Zero(t, storedIn(l, dlq, 1))

	s := fwd(handle)
	require.Equal(t, rmqpb.Code_OK, s.Code, s.Message)
	for _, b := range tb.bs {
		require.Eventually(t, func() bool { return storedIn(b, dlq, 1) == 1 }, 10*time.Second, 10*time.Millisecond, "node %d holds the dead letter", b.cfg.ID)
	}
	gr, err := l.Replica().Store().GetMessages(dlq, 0, 0, 1, 1<<20, nil)
	require.NoError(t, err)
	require.Len(t, gr.Records, 1)
	dm, _, err := message.Decode(gr.Records[0])
	require.NoError(t, err)
	require.Equal(t, "doomed", string(dm.Body))
	require.Equal(t, "D", dm.Properties[message.PropertyDLQOriginTopic])
	require.Equal(t, "D1", dm.Properties[message.PropertyDLQOriginMessageID])
	q, off, _, err := receipt(handle)
	require.NoError(t, err)
	pq, found := l.Replica().Store().PopQueue(pop.Key{Group: "dg", Topic: "D", Queue: q})
	require.True(t, found)
	require.NotContains(t, pq.InFlight, off, "the pop record went with the message")

	s = fwd(handle)
	require.Equal(t, rmqpb.Code_INVALID_RECEIPT_HANDLE, s.Code, "the same handle again: %s", s.Message)
	ack, err := c.AckMessage(ctx, &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: "dg"}, Topic: &rmqpb.Resource{Name: "D"},
		Entries: []*rmqpb.AckMessageEntry{{MessageId: "D1", ReceiptHandle: handle}}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, ack.Status.Code, "an ack after the dead letter is a repeated ack: %s", ack.Status.Message)
	require.Empty(t, recv(), "the dead letter is not delivered again")
	require.Equal(t, int64(1), storedIn(l, dlq, 1))
}

// AckMessage acks its entries in one batch, each with its own status: a
// garbled handle and a superseded one fail alone while the others are
// acked (their pop records gone on the leader), and an entry acked again
// answers OK.
func TestGRPCAckBatchPerEntry(t *testing.T) {
	tb := startGRPCBrokers(t, nil)
	l := tb.leader()
	c := grpcClient(t, tb.follower().GRPCAddr())
	ctx := clientCtx(t, "host@5@0@test", nil)
	require.NoError(t, l.ensureGroup(ctx, "bg"))
	send := func(i int) {
		resp, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("B", fmt.Sprintf("B%d", i), "x", nil)}})
		require.NoError(t, err)
		require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	}
	send(0) // creates the topic
	recv := func() []*rmqpb.Message {
		st, msgs, err := receiveAll(t, c, ctx, &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "bg"},
			MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "B"}}, BatchSize: 32,
			InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(time.Second)})
		require.NoError(t, err)
		require.Contains(t, []rmqpb.Code{rmqpb.Code_OK, rmqpb.Code_MESSAGE_NOT_FOUND}, st.Code, st.Message)
		return msgs
	}
	recv() // the group starts at the queues' ends
	for i := 1; i <= 8; i++ {
		send(i)
	}
	var got []*rmqpb.Message
	for len(got) < 8 {
		msgs := recv()
		got = append(got, msgs...)
		require.LessOrEqual(t, len(got), 8)
	}
	queues := map[int32]bool{}
	for _, m := range got {
		queues[m.SystemProperties.GetQueueId()] = true
	}
	// got[0]'s handle is superseded by a change of its invisible time.
	ch, err := c.ChangeInvisibleDuration(ctx, &rmqpb.ChangeInvisibleDurationRequest{Group: &rmqpb.Resource{Name: "bg"}, Topic: &rmqpb.Resource{Name: "B"},
		ReceiptHandle: got[0].SystemProperties.GetReceiptHandle(), InvisibleDuration: durationpb.New(time.Minute), MessageId: got[0].SystemProperties.MessageId})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, ch.Status.Code, ch.Status.Message)

	entries := []*rmqpb.AckMessageEntry{{MessageId: "garbled", ReceiptHandle: "forged"}}
	for _, m := range got {
		entries = append(entries, &rmqpb.AckMessageEntry{MessageId: m.SystemProperties.MessageId, ReceiptHandle: m.SystemProperties.GetReceiptHandle()})
	}
	ack, err := c.AckMessage(ctx, &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: "bg"}, Topic: &rmqpb.Resource{Name: "B"}, Entries: entries})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_MULTIPLE_RESULTS, ack.Status.Code, ack.Status.Message)
	require.Len(t, ack.Entries, len(entries))
	require.Equal(t, rmqpb.Code_INVALID_RECEIPT_HANDLE, ack.Entries[0].Status.Code, ack.Entries[0].Status.Message)
	require.Equal(t, rmqpb.Code_INVALID_RECEIPT_HANDLE, ack.Entries[1].Status.Code, "superseded: %s", ack.Entries[1].Status.Message)
	for i, e := range ack.Entries[2:] {
		require.Equal(t, rmqpb.Code_OK, e.Status.Code, "entry %d: %s", i+2, e.Status.Message)
		require.Equal(t, entries[i+2].MessageId, e.MessageId)
	}
	for _, m := range got {
		k := pop.Key{Group: "bg", Topic: "B", Queue: m.SystemProperties.GetQueueId()}
		q, found := l.Replica().Store().PopQueue(k)
		require.True(t, found)
		_, held := q.InFlight[m.SystemProperties.GetQueueOffset()]
		require.Equal(t, m == got[0], held, "message %s: held only if its ack failed", m.SystemProperties.MessageId)
	}

	// All valid, over several queues, one of them acked before: OK.
	require.Greater(t, len(queues), 1, "the messages span queues")
	ack, err = c.AckMessage(ctx, &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: "bg"}, Topic: &rmqpb.Resource{Name: "B"},
		Entries: append([]*rmqpb.AckMessageEntry{{MessageId: got[0].SystemProperties.MessageId, ReceiptHandle: ch.ReceiptHandle}}, entries[2:]...)})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, ack.Status.Code, ack.Status.Message)
	k := pop.Key{Group: "bg", Topic: "B", Queue: got[0].SystemProperties.GetQueueId()}
	q, _ := l.Replica().Store().PopQueue(k)
	require.NotContains(t, q.InFlight, got[0].SystemProperties.GetQueueOffset())
}
