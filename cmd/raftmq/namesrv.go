package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/namesrv"
)

func newNamesrvCmd(logger func() *slog.Logger) *cobra.Command {
	var (
		listen string
		expiry time.Duration
		scan   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "namesrv",
		Short: "Run a RocketMQ-compatible name server (brokers register, clients ask for routes)",
		Long: "namesrv serves RocketMQ's name-server protocol: brokers register every 30 s and at once on a\n" +
			"leader change (REGISTER_BROKER, UNREGISTER_BROKER); clients and admin tools ask for topic\n" +
			"routes, the cluster and the topic list. Start brokers with --namesrv ADDR;ADDR (or NAMESRV_ADDR).",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			log := logger()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("namesrv: listen: %w", err)
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log.Info("namesrv: serving", "listen", ln.Addr().String(), "expiry", expiry)
			return namesrv.New(namesrv.Config{Expiry: expiry, Logger: log}).Serve(ctx, ln, scan)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "0.0.0.0:9876", "address to serve on (RocketMQ's name servers use port 9876)")
	cmd.Flags().DurationVar(&expiry, "expire", namesrv.DefaultExpiry, "how long a broker's registration lives without renewal")
	cmd.Flags().DurationVar(&scan, "scan", 5*time.Second, "how often expired registrations are dropped")
	return cmd
}
