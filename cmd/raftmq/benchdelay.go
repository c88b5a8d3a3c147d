package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/harness/bench"
)

// newBenchDelayCmd returns `bench delay`: timer messages due a fixed time
// after they are sent, and how late each is delivered.
func newBenchDelayCmd(logger func() *slog.Logger) *cobra.Command {
	var addrs, htmlOut string
	var asJSON bool
	var dc bench.DelayConfig
	cmd := &cobra.Command{
		Use:   "delay",
		Short: "Send --messages timer messages due --delay later, consume them, and report send rate and delivery lateness",
		Long: "Each message carries TIMER_DELIVER_MS = send time + --delay (+ up to --spread); pull consumers read the topic from its\n" +
			"end and measure, for every message, how long after its due time it was received and stored in its topic. With a\n" +
			"large --messages and a --delay longer than the send phase, the due messages pile up in the schedule and drain together:\n" +
			"with --same-due, every message is due at the same time: the backlog test (`--messages 1000000 --delay 120s --same-due`).",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := newClient(c.Context(), addrs, logger())
			if err != nil {
				return err
			}
			defer cl.Close()
			if !asJSON {
				dc.Progress = c.ErrOrStderr()
			}
			r, err := bench.Delay(c.Context(), cl, dc)
			if asJSON {
				b, jerr := json.Marshal(r)
				if jerr != nil {
					return jerr
				}
				fmt.Fprintln(c.OutOrStdout(), string(b))
			} else {
				fmt.Fprintln(c.OutOrStdout(), r.String())
			}
			if htmlOut != "" {
				if herr := writeReport(htmlOut, "raftmq bench delay", r.String(), "delivery lateness", r.Series, nil); herr != nil {
					return herr
				}
			}
			return err
		},
	}
	addrFlag(cmd, &addrs)
	cmd.Flags().StringVar(&dc.Topic, "topic", "bench-delay", "topic (created if missing)")
	cmd.Flags().IntVar(&dc.Queues, "queues", 4, "queues of the topic")
	cmd.Flags().IntVar(&dc.Size, "size", 1024, "message body bytes (at least 16)")
	cmd.Flags().Int64Var(&dc.Messages, "messages", 100_000, "timer messages to send")
	cmd.Flags().DurationVar(&dc.Delay, "delay", 10*time.Second, "each message is due this long after it is sent")
	cmd.Flags().DurationVar(&dc.Spread, "spread", 0, "add a random delay up to this to each message")
	cmd.Flags().IntVar(&dc.Window, "window", 256, "sends in flight")
	cmd.Flags().BoolVar(&dc.SameDue, "same-due", false, "every message due --delay after the run starts: a backlog that falls due at once")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON line")
	cmd.Flags().StringVar(&htmlOut, "html", "", "also write an HTML report (deliveries and their lateness over time) to this file")
	return cmd
}
