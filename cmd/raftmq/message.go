package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
)

// messageQueryFlags are `raftmq admin message query`'s flags.
type messageQueryFlags struct {
	topic, key, id, uniq string
	max                  int
	since                time.Duration
	json                 bool
}

// newMessageCmd returns `admin message query`: find messages by key,
// UNIQ_KEY (the client's msgId) or offsetMsgId (the broker's msgId), as
// mqadmin's queryMsgByKey, queryMsgByUniqueKey and queryMsgById do.
func newMessageCmd(withClient func(func(context.Context, *client.Client, []string) error) func(*cobra.Command, []string) error) (*cobra.Command, *cobra.Command) {
	var f messageQueryFlags
	msg := &cobra.Command{Use: "message", Short: "Find and print messages"}
	query := &cobra.Command{Use: "query", Short: "Find messages by --key, --uniq (client msgId) or --id (offsetMsgId) and print them with their properties", Args: cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, cl *client.Client, _ []string) error {
			ms, err := queryMessages(ctx, cl, f)
			if err != nil {
				return err
			}
			if len(ms) == 0 {
				return fmt.Errorf("no message found")
			}
			return printMessages(msg.OutOrStdout(), ms, f.json)
		})}
	query.Flags().StringVarP(&f.topic, "topic", "t", "", "topic (required with --key and --uniq)")
	query.Flags().StringVarP(&f.key, "key", "k", "", "a key of the message's KEYS")
	query.Flags().StringVar(&f.uniq, "uniq", "", "the message's UNIQ_KEY (the msgId a producer is given)")
	query.Flags().StringVarP(&f.id, "id", "i", "", "the message's offsetMsgId (the broker's msgId)")
	query.Flags().IntVar(&f.max, "max", 32, "most messages to print (the broker caps it at 64)")
	query.Flags().DurationVar(&f.since, "since", 0, "only messages stored within this long before now (0: any time)")
	query.Flags().BoolVar(&f.json, "json", false, "print JSON, one object per message")
	query.MarkFlagsOneRequired("key", "uniq", "id")
	query.MarkFlagsMutuallyExclusive("key", "uniq", "id")
	msg.AddCommand(query)
	return msg, query
}

func queryMessages(ctx context.Context, cl *client.Client, f messageQueryFlags) ([]*client.MessageExt, error) {
	if f.id == "" && f.topic == "" {
		return nil, fmt.Errorf("--topic is required with --key and --uniq")
	}
	q := admin.Query{Topic: f.topic, Key: f.key, Uniq: f.uniq, ID: f.id, Max: f.max}
	if f.since > 0 {
		q.Begin = time.Now().Add(-f.since)
	}
	return admin.Messages(ctx, cl, q)
}

// printMessages writes each message with its properties, as text or JSON.
func printMessages(w io.Writer, ms []*client.MessageExt, asJSON bool) error {
	for _, m := range ms {
		props := m.Properties()
		if asJSON {
			b, err := json.Marshal(map[string]any{
				"topic": m.Topic, "queueId": m.QueueID, "queueOffset": m.QueueOffset, "commitLogOffset": m.CommitLogOffset,
				"msgId": m.MsgID, "offsetMsgId": m.OffsetMsgID, "tags": m.Tags, "keys": m.Keys,
				"bornTimestamp": m.BornTimestamp, "storeTimestamp": m.StoreTimestamp, "bornHost": m.BornHost, "storeHost": m.StoreHost,
				"reconsumeTimes": m.ReconsumeTimes, "properties": props, "body": string(m.Body),
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(w, string(b))
			continue
		}
		fmt.Fprintf(w, "topic %s  queue %d  offset %d  commitlog offset %d\n", m.Topic, m.QueueID, m.QueueOffset, m.CommitLogOffset)
		fmt.Fprintf(w, "  msgId %s  offsetMsgId %s\n", m.MsgID, m.OffsetMsgID)
		fmt.Fprintf(w, "  born %s at %s  stored %s at %s  reconsumed %d times\n",
			time.UnixMilli(m.BornTimestamp).Format(time.RFC3339Nano), m.BornHost, time.UnixMilli(m.StoreTimestamp).Format(time.RFC3339Nano), m.StoreHost, m.ReconsumeTimes)
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(w, "  %s=%s\n", k, props[k])
		}
		fmt.Fprintf(w, "  body (%d bytes): %q\n", len(m.Body), m.Body)
	}
	return nil
}
