package main

import (
	"context"
	"fmt"
	"maps"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
	"github.com/raftmq/raftmq/message"
)

// newDLQCmd returns `admin dlq` and its subcommands: list a consumer
// group's dead letters and send them back to the group.
func newDLQCmd(withClient func(func(context.Context, *client.Client, []string) error) func(*cobra.Command, []string) error) (*cobra.Command, []*cobra.Command) {
	var group, uniq string
	var max int
	var asJSON, all bool
	dlq := &cobra.Command{Use: "dlq", Short: "A consumer group's dead-letter queue (%DLQ%group): list and resend"}
	list := &cobra.Command{Use: "list", Short: "Print the group's dead letters, oldest first, with their properties", Args: cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, cl *client.Client, _ []string) error {
			ms, err := deadLetters(ctx, cl, group, max)
			if err != nil {
				return err
			}
			if len(ms) == 0 {
				fmt.Fprintf(dlq.ErrOrStderr(), "group %s has no dead letters\n", group)
				return nil
			}
			return printMessages(dlq.OutOrStdout(), ms, asJSON)
		})}
	list.Flags().IntVar(&max, "max", 100, "most messages to print (0: all)")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON, one object per message")
	resend := &cobra.Command{Use: "resend", Short: "Send dead letters back to the group (its %RETRY% topic, reconsume count 0): --uniq ID for one, --all for every one", Args: cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, cl *client.Client, _ []string) error {
			ms, err := deadLetters(ctx, cl, group, 0)
			if err != nil {
				return err
			}
			p := cl.NewProducer(client.ProducerOptions{Group: "raftmq-admin-dlq"})
			n := 0
			for _, m := range ms {
				if !all && m.MsgID != uniq {
					continue
				}
				props := maps.Clone(m.Properties())
				if props == nil {
					props = map[string]string{}
				}
				if props[message.PropertyRetryTopic] == "" {
					props[message.PropertyRetryTopic] = m.Topic
				}
				res, err := p.Send(ctx, &client.Message{Topic: client.RetryTopic(group), QueueID: 0, Body: m.Body, Flag: m.Flag, Properties: props})
				if err != nil {
					return fmt.Errorf("resend %s: %w (%d resent before it)", m.MsgID, err, n)
				}
				fmt.Fprintf(dlq.OutOrStdout(), "resent %s to %s (queue %d offset %d)\n", m.MsgID, client.RetryTopic(group), res.QueueID, res.QueueOffset)
				n++
			}
			if n == 0 {
				return fmt.Errorf("no dead letter of group %s matched", group)
			}
			return nil
		})}
	resend.Flags().StringVar(&uniq, "uniq", "", "the dead letter's msgId (UNIQ_KEY)")
	resend.Flags().BoolVar(&all, "all", false, "resend every dead letter")
	resend.MarkFlagsOneRequired("uniq", "all")
	resend.MarkFlagsMutuallyExclusive("uniq", "all")
	for _, c := range []*cobra.Command{list, resend} {
		c.Flags().StringVar(&group, "group", "", "consumer group")
		_ = c.MarkFlagRequired("group")
	}
	dlq.AddCommand(list, resend)
	return dlq, []*cobra.Command{list, resend}
}

// deadLetters reads a group's dead-letter topic from its start (up to max
// messages; 0: all), as the console's DLQ page does.
func deadLetters(ctx context.Context, cl *client.Client, group string, max int) ([]*client.MessageExt, error) {
	return admin.DeadLetters(ctx, cl, group, max)
}
