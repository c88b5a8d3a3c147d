package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// The gRPC side of a pop run (PopConfig.GRPC): after the remoting pop,
// cfg.Consumers RocketMQ 5 clients of another new group (each one HTTP/2
// connection to the leader's gRPC endpoint, as QueryRoute names it)
// receive the same range with ReceiveMessage, cfg.Batch messages at a
// time, and ack each received batch with one AckMessage. A gRPC receive of
// a group without a committed offset starts at the queue's end, so the
// group's offsets are committed at the range's start first (remoting
// UPDATE_CONSUMER_OFFSET).

// grpcPopReceiveWait is the receives' long polling timeout.
const grpcPopReceiveWait = time.Second

func grpcPopRun(ctx context.Context, c *client.Client, cfg PopConfig, out *PopResult) (Result, error) {
	leader, err := grpcLeader(ctx, cfg.GRPC, cfg.GRPCClient, cfg.Topic)
	if err != nil {
		return Result{}, err
	}
	spans, ranges, err := consumeRanges(ctx, c, []string{cfg.Topic}, cfg.Queues)
	if err != nil {
		return Result{}, err
	}
	group := fmt.Sprintf("bench-grpc-pop-%d", time.Now().UnixNano())
	pc := c.NewPullConsumer(group)
	for _, r := range ranges {
		if err := pc.CommitOffset(ctx, cfg.Topic, r.Queue-spans[0].base, r.Lo); err != nil {
			return Result{}, fmt.Errorf("bench: grpc pop: place group %s: %w", group, err)
		}
	}
	run, err := newConsumeRun(spans, ranges)
	if err != nil {
		return Result{}, err
	}
	var (
		acks, receives latencies
		mu             sync.Mutex
		ackFailures    int64
		nReceives      int64
	)
	conns := make([]rmqpb.MessagingServiceClient, 0, cfg.Consumers)
	for range cfg.Consumers {
		cc, closeCC, err := grpcDial(ctx, leader, cfg.GRPCClient, false)
		if err != nil {
			return Result{}, err
		}
		defer closeCC()
		conns = append(conns, rmqpb.NewMessagingServiceClient(cc))
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run.begin()
	stop := make(chan struct{})
	go progress(cfg.Progress, "grpc pop", &run.cnt, run.start, stop)
	var wg sync.WaitGroup
	for i, mc := range conns {
		var id [6]byte
		_, _ = rand.Read(id[:])
		cctx := grpcMetadata(rctx, "bench-pop-"+hex.EncodeToString(id[:])+strconv.Itoa(i))
		wg.Go(func() {
			for rctx.Err() == nil {
				t0 := time.Now()
				msgs, err := grpcReceive(cctx, mc, group, cfg)
				if err != nil {
					if rctx.Err() == nil {
						run.cnt.fail(err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				receives.add(time.Since(t0))
				mu.Lock()
				nReceives++
				mu.Unlock()
				if len(msgs) == 0 {
					continue
				}
				req := &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: cfg.Topic}}
				for _, m := range msgs {
					req.Entries = append(req.Entries, &rmqpb.AckMessageEntry{MessageId: m.GetSystemProperties().GetMessageId(),
						ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()})
				}
				t0 = time.Now()
				resp, err := mc.AckMessage(cctx, req)
				d := time.Since(t0)
				if err != nil {
					if rctx.Err() == nil {
						mu.Lock()
						ackFailures += int64(len(msgs))
						mu.Unlock()
						run.cnt.fail(fmt.Errorf("grpc AckMessage: %w", err))
					}
					continue
				}
				var done []*client.MessageExt
				for j, e := range resp.GetEntries() {
					if j >= len(msgs) {
						break
					}
					if c := e.GetStatus().GetCode(); c != rmqpb.Code_OK {
						mu.Lock()
						ackFailures++
						mu.Unlock()
						run.cnt.fail(fmt.Errorf("grpc AckMessage: %s %s", c, e.GetStatus().GetMessage()))
						continue
					}
					sp := msgs[j].GetSystemProperties()
					done = append(done, &client.MessageExt{Topic: msgs[j].GetTopic().GetName(), QueueID: sp.GetQueueId(),
						QueueOffset: sp.GetQueueOffset(), Body: msgs[j].GetBody()})
				}
				if len(done) == len(msgs) {
					acks.add(d)
				}
				run.take(done)
			}
		})
	}
	elapsed, err := waitConsumed(ctx, run, cfg.Stall)
	close(stop)
	cancel()
	wg.Wait()
	out.GRPCReceives, out.GRPCAcks, out.GRPCAckFailures = nReceives, int64(len(acks.d)), ackFailures
	out.GRPCAckP50, out.GRPCAckP99, _ = acks.quantiles()
	out.GRPCReceiveP50, out.GRPCReceiveP99, _ = receives.quantiles()
	res := run.result(fmt.Sprintf("grpc pop, %d consumers, %s", cfg.Consumers, layout(1, len(ranges))), elapsed)
	res.Batch, res.Consumers, res.Window = cfg.Batch, cfg.Consumers, 1
	return res, err
}

// grpcReceive makes one ReceiveMessage call and returns its messages (none
// when the status is MESSAGE_NOT_FOUND).
func grpcReceive(ctx context.Context, mc rmqpb.MessagingServiceClient, group string, cfg PopConfig) ([]*rmqpb.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, grpcPopReceiveWait+5*time.Second)
	defer cancel()
	rs, err := mc.ReceiveMessage(ctx, &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: group},
		MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: cfg.Topic}, Id: -1},
		BatchSize:    int32(cfg.Batch), InvisibleDuration: durationpb.New(cfg.Invisible),
		LongPollingTimeout: durationpb.New(grpcPopReceiveWait)})
	if err != nil {
		return nil, fmt.Errorf("grpc ReceiveMessage: %w", err)
	}
	var msgs []*rmqpb.Message
	var status *rmqpb.Status
	for {
		r, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("grpc ReceiveMessage: %w", err)
		}
		switch {
		case r.GetStatus() != nil:
			status = r.GetStatus()
		case r.GetMessage() != nil:
			msgs = append(msgs, r.GetMessage())
		}
	}
	switch c := status.GetCode(); {
	case status == nil:
		return nil, errors.New("grpc ReceiveMessage: no status")
	case c == rmqpb.Code_OK:
		return msgs, nil
	case c == rmqpb.Code_MESSAGE_NOT_FOUND:
		return nil, nil
	default:
		return nil, fmt.Errorf("grpc ReceiveMessage: %s %s", c, status.GetMessage())
	}
}
