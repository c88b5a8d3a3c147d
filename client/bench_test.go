package client

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// newEchoBroker starts a node that answers every send at once with a fixed
// result and serves a route naming itself leader: it measures the client,
// not a store.
func newEchoBroker(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	addr := ln.Addr().String()
	var off atomic.Int64
	route, err := (&remoting.TopicRouteData{
		QueueDatas:  []remoting.QueueData{{BrokerName: "b", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
		BrokerDatas: []remoting.BrokerData{{BrokerName: "b", BrokerAddrs: map[int64]string{0: addr}}},
	}).Encode()
	require.NoError(b, err)
	srv := &remoting.Server{Handler: func(_ context.Context, _ *remoting.ServerConn, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		switch req.Code {
		case remoting.GetRouteInfoByTopic:
			resp.Body = route
		case remoting.SendMessageV2:
			resp.ExtFields = map[string]string{
				"msgId":       "7F00000100002A9F0000000000000000",
				"queueId":     req.ExtFields["queueId"],
				"queueOffset": strconv.FormatInt(off.Add(1), 10),
			}
		}
		return resp
	}}
	go func() { _ = srv.Serve(ln) }() // nil on Close
	b.Cleanup(func() { _ = srv.Close() })
	return addr
}

func BenchmarkSendAsync(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			addr := newEchoBroker(b)
			c, err := New(Options{Addrs: []string{addr}})
			require.NoError(b, err)
			defer c.Close()
			p := c.NewProducer(ProducerOptions{Window: 1000})
			ctx := context.Background()
			_, err = c.Route(ctx, "Bench", false)
			require.NoError(b, err)
			body := make([]byte, size)
			var failed atomic.Int64
			cb := func(_ SendResult, err error) {
				if err != nil {
					failed.Add(1)
				}
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				m := Message{Topic: "Bench", QueueID: AnyQueue, Body: body, Tags: "t"}
				if err := p.SendAsync(ctx, &m, cb); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, p.Flush(ctx))
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			require.Zero(b, failed.Load())
		})
	}
}

// BenchmarkDecodeMessages decodes a pull of 32 1 KiB records, as a consumer
// does for every pull (properties stay encoded until asked for).
func BenchmarkDecodeMessages(b *testing.B) {
	var body []byte
	for i := 0; i < 32; i++ {
		body = append(body, record(b, "T", 0, int64(i), int64(i)*1200, make([]byte, 1024),
			map[string]string{message.PropertyUniqKey: fmt.Sprintf("U%031d", i), message.PropertyTags: "TagA", message.PropertyKeys: "k1 k2"})...)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ms, err := DecodeMessages(body, "T", 0)
		if err != nil || len(ms) != 32 {
			b.Fatal(len(ms), err)
		}
	}
}
