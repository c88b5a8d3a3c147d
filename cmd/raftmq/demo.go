package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/store"
)

// newStoreDemoCmd runs the single-node store demo (no replication): a
// quick look at the storage engine and its files.
func newStoreDemoCmd(logger func() *slog.Logger) *cobra.Command {
	var data string
	var count, size int
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Write and read messages through a single-node store (no replication)",
		RunE: func(_ *cobra.Command, _ []string) error {
			return runDemo(logger(), data, count, size)
		},
	}
	cmd.Flags().StringVar(&data, "data", "raftmq-data/standalone", "store directory")
	cmd.Flags().IntVar(&count, "messages", 1000, "messages to write")
	cmd.Flags().IntVar(&size, "size", 1024, "message body size in bytes")
	return cmd
}

func runDemo(log *slog.Logger, dir string, count, size int) error {
	sa, err := store.OpenStandalone(store.Config{Dir: dir, Logger: log,
		StoreHost: netip.MustParseAddrPort("127.0.0.1:10911")})
	if err != nil {
		return err
	}
	defer sa.Close()
	fmt.Printf("store %s opened (clean start: %v, applied index %d)\n", dir, sa.CleanStart(), sa.AppliedIndex())
	const topic = "demo"
	if _, ok := sa.Topic(topic); !ok {
		tc := offsets.NewTopicConfig(topic, 4)
		if err := sa.Exec(&store.Command{Op: store.OpCreateTopic, Topic: &tc}); err != nil {
			return err
		}
		fmt.Printf("created topic %q with 4 queues\n", topic)
	}
	body := make([]byte, size)
	host, _ := os.Hostname()
	start := time.Now()
	var first, last store.MessageResult
	run := time.Now().UnixNano()
	for i := 0; i < count; i += 32 {
		var batch []*message.Message
		for k := i; k < i+32 && k < count; k++ {
			batch = append(batch, &message.Message{Topic: topic, QueueID: int32(k % 4), Body: body,
				BornTimestamp: time.Now().UnixMilli(), BornHost: netip.MustParseAddrPort("127.0.0.1:1"),
				Properties: map[string]string{
					message.PropertyKeys:    fmt.Sprintf("order-%d", k),
					message.PropertyTags:    "demo",
					message.PropertyUniqKey: fmt.Sprintf("%s-%d-%d", host, run, k),
				}})
		}
		rs, err := sa.Put(batch...)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Err != nil {
				return r.Err
			}
		}
		if i == 0 {
			first = rs[0]
		}
		last = rs[len(rs)-1]
	}
	el := time.Since(start)
	fmt.Printf("wrote %d messages of %d B in batches of 32 (fsync before ack): %.0f msgs/s\n", count, size, float64(count)/el.Seconds())
	fmt.Printf("first: queue %d offset %d msgId %s; last: queue %d offset %d\n", first.QueueID, first.QueueOffset, first.MsgID(), last.QueueID, last.QueueOffset)
	for q := int32(0); q < 4; q++ {
		fmt.Printf("queue %d: offsets [%d, %d)\n", q, sa.MinOffset(topic, q), sa.MaxOffset(topic, q))
	}
	r, err := sa.GetMessages(topic, first.QueueID, first.QueueOffset, 3, 1<<20, nil)
	if err != nil {
		return err
	}
	fmt.Printf("read %d messages from queue %d at offset %d: %s\n", len(r.Records), first.QueueID, first.QueueOffset, r.Status)
	m, err := sa.QueryByOffsetMsgID(first.MsgID())
	if err != nil {
		return err
	}
	fmt.Printf("looked up msgId %s: topic %s queue %d offset %d keys %q\n", first.MsgID(), m.Topic, m.QueueID, m.QueueOffset, m.Keys())
	ms, err := sa.QueryByKey(topic, "order-0", 8, 0, time.Now().Add(time.Hour).UnixMilli())
	if err != nil {
		return err
	}
	fmt.Printf("looked up key order-0: %d message(s) (one per demo run)\n", len(ms))
	fmt.Printf("done; inspect the files with: raftmq store inspect %s\n", dir)
	return nil
}
