package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
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
			if all {
				uniq = ""
			}
			rs, err := admin.ResendDeadLetters(ctx, cl, group, uniq)
			for _, r := range rs {
				fmt.Fprintf(dlq.OutOrStdout(), "resent %s to %s (queue %d offset %d)\n", r.MsgID, r.Topic, r.QueueID, r.QueueOffset)
			}
			if err != nil {
				return err
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
