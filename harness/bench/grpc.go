package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftmq/raftmq/protocol/grpc/h2"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// The gRPC side of a produce run (ProduceConfig.GRPC): each producer is a
// RocketMQ 5 client id that keeps Window SendMessage calls in flight,
// each carrying Batch messages, to the leader's gRPC endpoint as
// QueryRoute names it, on one of GRPCConns HTTP/2 connections the
// producers share. The node picks the queue (round robin), so the run
// has no per-queue counts. On the lean client a call's answer is read by
// hand (grpcSendAnswer): the codes are all a run needs of it.

// The gRPC clients a run can send with (ProduceConfig.GRPCClient,
// PopConfig.GRPCClient).
const (
	// GRPCLean is protocol/grpc/h2's client: one HTTP/2 connection, the
	// caller writing its own frames, one reader goroutine.
	GRPCLean = "lean"
	// GRPCGo is grpc-go's client (grpc.NewClient).
	GRPCGo = "grpc-go"
)

// grpcDial connects to addr with the client kind names ("" is GRPCLean);
// send picks the produce run's options (larger buffers and windows).
func grpcDial(ctx context.Context, addr, kind string, send bool) (grpc.ClientConnInterface, func() error, error) {
	switch kind {
	case "", GRPCLean:
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		opts := h2.ClientOptions{}
		if send {
			opts.ReadBufferSize, opts.WriteBufferSize = 256<<10, 256<<10
		}
		cc, err := h2.Dial(dctx, addr, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: grpc %s: %w", addr, err)
		}
		return cc, cc.Close, nil
	case GRPCGo:
		dopts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if send {
			dopts = grpcSendOptions()
		}
		cc, err := grpc.NewClient(addr, dopts...)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: grpc %s: %w", addr, err)
		}
		return cc, cc.Close, nil
	}
	return nil, nil, fmt.Errorf("bench: no gRPC client %q (%s or %s)", kind, GRPCLean, GRPCGo)
}

// grpcKind is the client kind's name ("" is GRPCLean).
func grpcKind(kind string) string {
	if kind == "" {
		return GRPCLean
	}
	return kind
}

// grpcLeader asks addr's QueryRoute for topic and returns the address of
// the broker it names as the leader (broker id 0).
func grpcLeader(ctx context.Context, addr, kind, topic string) (string, error) {
	cc, closeCC, err := grpcDial(ctx, addr, kind, false)
	if err != nil {
		return "", err
	}
	defer closeCC()
	ctx = grpcMetadata(ctx, "bench-route")
	resp, err := rmqpb.NewMessagingServiceClient(cc).QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: topic}})
	if err != nil {
		return "", fmt.Errorf("bench: grpc QueryRoute at %s: %w", addr, err)
	}
	if c := resp.GetStatus().GetCode(); c != rmqpb.Code_OK {
		return "", fmt.Errorf("bench: grpc QueryRoute at %s: %s %s", addr, c, resp.GetStatus().GetMessage())
	}
	for _, q := range resp.MessageQueues {
		if b := q.GetBroker(); b.GetId() == 0 {
			for _, a := range b.GetEndpoints().GetAddresses() {
				return net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port))), nil
			}
		}
	}
	return "", fmt.Errorf("bench: grpc QueryRoute at %s names no leader for %s", addr, topic)
}

// grpcMetadata adds the metadata a RocketMQ 5 client sends with each call.
func grpcMetadata(ctx context.Context, clientID string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", clientID,
		"x-mq-date-time", time.Now().UTC().Format("20060102T150405Z"), "x-mq-language", "GOLANG", "x-mq-protocol", "v2")
}

// grpcSendMetadata is the metadata of a produce run's calls: the client
// id only (a node's SendMessage reads no other field unless an ACL asks
// for a signature, which the bench does not make), as one prepared MD
// rather than pairs grpc-go joins on every call.
func grpcSendMetadata(ctx context.Context, clientID string) context.Context {
	return metadata.NewOutgoingContext(ctx, metadata.MD{"x-mq-client-id": []string{clientID}})
}

// grpcSendOptions are the options of a produce run's connections: larger
// socket buffers than grpc-go's 32 KiB (fewer read and write calls for 64
// calls in flight); fixed flow-control windows, which turn off grpc-go's
// bandwidth estimate (a PING and its answer every round trip); no
// retries (a retried call's request is buffered for replay) and no
// service config from a resolver.
func grpcSendOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithReadBufferSize(256 << 10), grpc.WithWriteBufferSize(256 << 10),
		grpc.WithInitialWindowSize(1 << 20), grpc.WithInitialConnWindowSize(16 << 20),
		grpc.WithDisableRetry(), grpc.WithDisableServiceConfig()}
}

// grpcProducer runs producer p of a gRPC produce run on cc until end,
// the context's end or reserve running out, recording each answered call.
func grpcProducer(ctx context.Context, cfg ProduceConfig, cc grpc.ClientConnInterface, topics []string, p int, body []byte,
	reserve func(int) int, end time.Time, cnt *counters, lat *recorder) {
	mc := rmqpb.NewMessagingServiceClient(cc)
	_, lean := cc.(*h2.ClientConn)
	var run [8]byte
	_, _ = rand.Read(run[:])
	prefix := hex.EncodeToString(run[:]) + strconv.Itoa(p)
	// One context for every call: the metadata is the same on each, and a
	// call still running 30 s after the run's end is given up. The
	// context has no deadline, so that a call carries no grpc-timeout (a
	// timer per call on the node, and a new HPACK entry each time).
	cctx, cancel := context.WithCancel(grpcSendMetadata(ctx, "bench-"+prefix))
	defer cancel()
	stop := time.AfterFunc(time.Until(end.Add(30*time.Second)), cancel)
	defer stop.Stop()
	var seq atomic.Int64
	var next atomic.Int64
	next.Store(int64(p))
	var wg sync.WaitGroup
	for range cfg.Window {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A worker's calls run one after another, and a call has
			// encoded its request when it returns: the messages are
			// reused, with a new id and birth time each.
			var ms []*rmqpb.Message
			var req rmqpb.SendMessageRequest
			var ans grpcSendAnswer
			var idBuf []byte
			for time.Now().Before(end) && ctx.Err() == nil {
				n := reserve(cfg.Batch)
				if n == 0 {
					return
				}
				topic := topics[int(next.Add(1))%len(topics)]
				for len(ms) < n {
					ms = append(ms, &rmqpb.Message{Topic: &rmqpb.Resource{}, Body: body,
						SystemProperties: &rmqpb.SystemProperties{MessageType: rmqpb.MessageType_NORMAL,
							BodyEncoding: rmqpb.Encoding_IDENTITY, BornTimestamp: &timestamppb.Timestamp{}, BornHost: "bench"}})
				}
				now := time.Now()
				for _, m := range ms[:n] {
					m.Topic.Name = topic
					sp := m.SystemProperties
					idBuf = strconv.AppendInt(append(append(idBuf[:0], prefix...), '-'), seq.Add(1), 10)
					sp.MessageId = string(idBuf)
					sp.BornTimestamp.Seconds, sp.BornTimestamp.Nanos = now.Unix(), int32(now.Nanosecond())
				}
				req.Messages = ms[:n]
				t0 := time.Now()
				var err error
				if lean {
					if err = cc.Invoke(cctx, rmqpb.MessagingService_SendMessage_FullMethodName, &req, &ans); err == nil {
						err = ans.err()
					}
				} else {
					var resp *rmqpb.SendMessageResponse
					if resp, err = mc.SendMessage(cctx, &req); err == nil {
						err = grpcSendErr(resp)
					}
				}
				if err != nil {
					cnt.fail(err)
					continue
				}
				cnt.msgs.Add(int64(n))
				lat.add(time.Since(t0), n)
			}
		}()
	}
	wg.Wait()
}

// grpcSendAnswer is what a run reads of a SendMessageResponse (an
// h2.Decoder): the top status and each entry's, a status's message kept
// only when its code is not OK.
type grpcSendAnswer struct {
	st      grpcStatus
	entries []grpcStatus // reused from call to call
}

type grpcStatus struct {
	code rmqpb.Code
	msg  string
}

func (a *grpcSendAnswer) UnmarshalProto(b []byte) error {
	a.st, a.entries = grpcStatus{}, a.entries[:0]
	return protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1: // status
			return a.st.decode(v)
		case 2: // entries
			var e grpcStatus
			err := protoFields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == 1 && typ == protowire.BytesType {
					return e.decode(v)
				}
				return nil
			})
			a.entries = append(a.entries, e)
			return err
		}
		return nil
	})
}

func (st *grpcStatus) decode(b []byte) error {
	var msg []byte
	err := protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			st.code = rmqpb.Code(int32(x))
		case num == 2 && typ == protowire.BytesType:
			msg = v
		}
		return nil
	})
	if st.code != rmqpb.Code_OK {
		st.msg = string(msg)
	}
	return err
}

// protoFields calls f for each field of b (v a bytes field's value, x a
// varint's), or returns the error of the first that does not decode.
func protoFields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// err is the answer's first failed entry, or its failed status, or nil,
// as grpcSendErr reads the generated response.
func (a *grpcSendAnswer) err() error {
	for _, e := range a.entries {
		if e.code != rmqpb.Code_OK {
			return fmt.Errorf("grpc send: %s %s", e.code, e.msg)
		}
	}
	if a.st.code != rmqpb.Code_OK {
		return fmt.Errorf("grpc send: %s %s", a.st.code, a.st.msg)
	}
	if len(a.entries) == 0 {
		return errors.New("grpc send: an answer without entries")
	}
	return nil
}

// grpcSendErr is the first failed entry of a SendMessage answer, or nil.
func grpcSendErr(resp *rmqpb.SendMessageResponse) error {
	for _, e := range resp.GetEntries() {
		if c := e.GetStatus().GetCode(); c != rmqpb.Code_OK {
			return fmt.Errorf("grpc send: %s %s", c, e.GetStatus().GetMessage())
		}
	}
	if c := resp.GetStatus().GetCode(); c != rmqpb.Code_OK {
		return fmt.Errorf("grpc send: %s %s", c, resp.GetStatus().GetMessage())
	}
	if len(resp.GetEntries()) == 0 {
		return errors.New("grpc send: an answer without entries")
	}
	return nil
}
