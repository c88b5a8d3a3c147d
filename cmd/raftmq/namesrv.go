package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/protocol/remoting"
)

func newNamesrvCmd(logger func() *slog.Logger) *cobra.Command {
	var (
		listen string
		expiry time.Duration
		scan   time.Duration
		tf     serverTLSFlags
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
			tc, err := tf.config()
			if err != nil {
				return fmt.Errorf("namesrv: %w", err)
			}
			cfg := namesrv.Config{Expiry: expiry, Logger: log}
			if cfg.TLS, err = tc.ServerTLS(); err != nil {
				return fmt.Errorf("namesrv: %w", err)
			}
			if tc != nil {
				cfg.TLSMode = tc.Mode
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("namesrv: listen: %w", err)
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log.Info("namesrv: serving", "listen", ln.Addr().String(), "expiry", expiry, "tls", cfg.TLSMode.String())
			return namesrv.New(cfg).Serve(ctx, ln, scan)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "0.0.0.0:9876", "address to serve on (RocketMQ's name servers use port 9876)")
	cmd.Flags().DurationVar(&expiry, "expire", namesrv.DefaultExpiry, "how long a broker's registration lives without renewal")
	cmd.Flags().DurationVar(&scan, "scan", 5*time.Second, "how often expired registrations are dropped")
	tf.register(cmd, namesrvTLSHelp)
	addConfigFlags(cmd, configOptions{title: "raftmq name server configuration: raftmq namesrv --config FILE (YAML)"})
	return cmd
}

// printClusterList asks a name server for GET_BROKER_CLUSTER_INFO and
// prints each cluster's broker names with their addresses by broker id.
func printClusterList(ctx context.Context, w io.Writer, addr string, asJSON bool) error {
	ci, err := namesrvClusterInfo(ctx, addr)
	if err != nil {
		return err
	}
	if asJSON {
		b, err := json.MarshalIndent(ci, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(w, string(b))
		return nil
	}
	clusters := make([]string, 0, len(ci.ClusterAddrTable))
	for c := range ci.ClusterAddrTable {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	for _, cl := range clusters {
		fmt.Fprintf(w, "cluster %s\n", cl)
		for _, name := range ci.ClusterAddrTable[cl] {
			bd := ci.BrokerAddrTable[name]
			ids := make([]int64, 0, len(bd.BrokerAddrs))
			for id := range bd.BrokerAddrs {
				ids = append(ids, id)
			}
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			var parts []string
			for _, id := range ids {
				role := "follower"
				switch {
				case strings.Contains(name, "@"):
					role = "failover write route"
				case id == remoting.MasterID:
					role = "leader"
				}
				parts = append(parts, fmt.Sprintf("%d=%s (%s)", id, bd.BrokerAddrs[id], role))
			}
			fmt.Fprintf(w, "  %-16s %s\n", name, strings.Join(parts, "  "))
		}
	}
	return nil
}

// namesrvClusterInfo asks the name server at addr for every cluster and
// broker it knows (GET_BROKER_CLUSTER_INFO), over TLS when the command's
// client TLS flags (--tls, --tls-ca, ...) ask for it.
func namesrvClusterInfo(ctx context.Context, addr string) (remoting.ClusterInfo, error) {
	var ci remoting.ClusterInfo
	cfg, err := clientTLS(ctx)
	if err != nil {
		return ci, err
	}
	var opts remoting.Options
	if cfg != nil {
		var d net.Dialer
		opts.Dial = remoting.TLSDialer(d.DialContext, cfg)
	}
	c, err := remoting.Dial(ctx, addr, opts)
	if err != nil {
		return ci, fmt.Errorf("name server %s: %w", addr, err)
	}
	defer c.Close()
	resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
	if err != nil {
		return ci, fmt.Errorf("name server %s: %w", addr, err)
	}
	if resp.Code != remoting.Success {
		return ci, fmt.Errorf("name server %s answered %d: %s", addr, resp.Code, resp.Remark)
	}
	if err := remoting.DecodeJSON(resp.Body, &ci); err != nil {
		return ci, fmt.Errorf("name server %s: %w", addr, err)
	}
	return ci, nil
}
