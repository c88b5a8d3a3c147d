package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/harness/bench"
	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/namesrv"
)

// defaultAddrs are the client addresses of the group `raftmq cluster`
// starts by default: its first three nodes.
func defaultAddrs() string {
	return fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", defaultBasePort, defaultBasePort+1, defaultBasePort+2)
}

// addrFlag adds --addr to a command that talks to a group.
func addrFlag(cmd *cobra.Command, addrs *string) {
	cmd.Flags().StringVar(addrs, "addr", envAddrs(), "client addresses of any nodes of the group, comma-separated ($RAFTMQ_ADDR sets the default)")
}

// credentials are the keys the client signs its requests with, for a
// group with an ACL: the root command's --access-key, --secret-key and
// --security-token, which default to RAFTMQ_ACCESS_KEY,
// RAFTMQ_SECRET_KEY and RAFTMQ_SECURITY_TOKEN. The root command puts them
// in the command's context.
type credentials struct{ accessKey, secretKey, securityToken string }

type credentialsKey struct{}

// newClient connects to a group, signing every request with the
// credentials in ctx, if any.
func newClient(ctx context.Context, addrs string, log *slog.Logger) (*client.Client, error) {
	cr, _ := ctx.Value(credentialsKey{}).(credentials)
	tc, err := clientTLS(ctx)
	if err != nil {
		return nil, err
	}
	return client.New(client.Options{Addrs: strings.Split(addrs, ","), Logger: log,
		AccessKey: cr.accessKey, SecretKey: cr.secretKey, SecurityToken: cr.securityToken, TLS: tc})
}

func newProduceCmd(logger func() *slog.Logger) *cobra.Command {
	var addrs, topic, tags, keys string
	var queue int32
	var count int
	cmd := &cobra.Command{
		Use:   "produce [BODY...]",
		Short: "Send messages (the arguments, or one per line of stdin) and print where they landed",
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := newClient(c.Context(), addrs, logger())
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := c.Context()
			if len(args) == 0 {
				b, err := io.ReadAll(os.Stdin)
				if err != nil {
					return err
				}
				args = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			}
			p := cl.NewProducer(client.ProducerOptions{Group: "raftmq-cli"})
			for rep := 0; rep < max(count, 1); rep++ {
				for _, body := range args {
					m := &client.Message{Topic: topic, QueueID: queue, Body: []byte(body), Tags: tags}
					if keys != "" {
						m.Keys = strings.Split(keys, ",")
					}
					r, err := p.Send(ctx, m)
					if err != nil {
						return err
					}
					dup := ""
					if r.Duplicate {
						dup = " (duplicate: original returned)"
					}
					fmt.Printf("sent queue %d offset %d msgId %s offsetMsgId %s%s\n", r.QueueID, r.QueueOffset, r.MsgID, r.OffsetMsgID, dup)
				}
			}
			return nil
		},
	}
	addrFlag(cmd, &addrs)
	cmd.Flags().StringVar(&topic, "topic", "demo", "topic")
	cmd.Flags().Int32Var(&queue, "queue", -1, "queue id (-1: round robin)")
	cmd.Flags().StringVar(&tags, "tags", "", "TAGS property")
	cmd.Flags().StringVar(&keys, "keys", "", "KEYS property, comma-separated")
	cmd.Flags().IntVar(&count, "repeat", 1, "send the bodies this many times")
	return cmd
}

func newConsumeCmd(logger func() *slog.Logger) *cobra.Command {
	var addrs, topic, group, from, expr string
	var follow, commit, popMode, noAck bool
	var max int
	var invisible time.Duration
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Print the messages of a topic, from the group's committed offsets (or 0), or pop them (--pop)",
		Long: "Without --pop, pulls every queue from the group's committed offsets (or 0) and prints the messages.\n" +
			"With --pop, receives them as a SimpleConsumer of the group: each batch is hidden from the group for\n" +
			"--invisible, printed and acked in one request (unless --no-ack, when it comes back after --invisible).",
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := newClient(c.Context(), addrs, logger())
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := c.Context()
			if popMode {
				return consumePop(ctx, cl, group, topic, expr, invisible, follow, !noAck, max)
			}
			rt, err := cl.Route(ctx, topic, true)
			if err != nil {
				return err
			}
			pc := cl.NewPullConsumer(group)
			printed := 0
			offs := make([]int64, rt.ReadQueues)
			for q := range offs {
				o, ok, err := pc.FetchOffset(ctx, topic, int32(q))
				if err != nil {
					return err
				}
				if ok {
					offs[q] = o
				} else if offs[q], err = cl.MinOffset(ctx, topic, int32(q)); err != nil {
					return err
				}
			}
			for {
				got := 0
				for q := range offs {
					poll := time.Duration(0)
					if follow {
						poll = 200 * time.Millisecond
					}
					var pr client.PullResult
					if from != "" {
						pr, err = pc.PullFrom(ctx, from, topic, int32(q), offs[q], 32, poll)
					} else {
						pr, err = pc.Pull(ctx, topic, int32(q), offs[q], 32, poll)
					}
					if err != nil {
						return err
					}
					for _, m := range pr.Messages {
						fmt.Printf("queue %d offset %d msgId %s tags %q: %s\n", m.QueueID, m.QueueOffset, m.MsgID, m.Tags, m.Body)
						printed++
						got++
						if max > 0 && printed >= max {
							// Commit what was printed, up to this
							// message, before stopping.
							if commit {
								return pc.CommitOffset(ctx, topic, int32(q), m.QueueOffset+1)
							}
							return nil
						}
					}
					if pr.NextBeginOffset != offs[q] {
						offs[q] = pr.NextBeginOffset
						if commit {
							if err := pc.CommitOffset(ctx, topic, int32(q), offs[q]); err != nil {
								return err
							}
						}
					}
				}
				if got == 0 && !follow {
					fmt.Fprintf(os.Stderr, "%d messages\n", printed)
					return nil
				}
			}
		},
	}
	addrFlag(cmd, &addrs)
	cmd.Flags().StringVar(&topic, "topic", "demo", "topic")
	cmd.Flags().StringVar(&group, "group", "raftmq-cli", "consumer group")
	cmd.Flags().StringVar(&from, "from", "", "pull from this node (default: the leader)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep polling for new messages")
	cmd.Flags().BoolVar(&commit, "commit", false, "commit the group's offsets as it reads")
	cmd.Flags().IntVar(&max, "max", 0, "stop after this many messages (0: all)")
	cmd.Flags().BoolVar(&popMode, "pop", false, "receive by pop as a SimpleConsumer of --group, acking each received batch")
	cmd.Flags().DurationVar(&invisible, "invisible", 30*time.Second, "with --pop: how long a received message stays hidden from the group")
	cmd.Flags().BoolVar(&noAck, "no-ack", false, "with --pop: do not ack (the messages come back after --invisible)")
	cmd.Flags().StringVar(&expr, "tags", "", "with --pop: a TAG expression (\"TagA || TagB\"; empty: every message)")
	return cmd
}

// consumePop is consume --pop: it receives batches as a SimpleConsumer,
// prints each message and acks each batch in one request, until a receive finds nothing (or for ever
// with follow), or max messages.
func consumePop(ctx context.Context, cl *client.Client, group, topic, tags string, invisible time.Duration, follow, ack bool, max int) error {
	sc := cl.NewSimpleConsumer(group, topic, client.SimpleConsumerOptions{Expression: tags, Await: time.Second})
	if err := sc.Start(ctx); err != nil {
		return err
	}
	printed := 0
	for {
		n := 32
		if max > 0 {
			n = min(n, max-printed)
		}
		ms, err := sc.Receive(ctx, n, invisible)
		if err != nil {
			return err
		}
		for _, m := range ms {
			fmt.Printf("queue %d offset %d msgId %s tags %q attempt %d: %s\n", m.QueueID, m.QueueOffset, m.MsgID, m.Tags, m.Attempt, m.Body)
			printed++
		}
		if ack {
			if err := errors.Join(sc.AckBatch(ctx, ms)...); err != nil {
				return err
			}
		}
		if (max > 0 && printed >= max) || (len(ms) == 0 && !follow) {
			fmt.Fprintf(os.Stderr, "%d messages\n", printed)
			return nil
		}
	}
}

// adminGroupCmds are the admin subcommands that talk to a running group.
func adminGroupCmds(logger func() *slog.Logger) []*cobra.Command {
	var addrs string
	withClient := func(f func(ctx context.Context, cl *client.Client, args []string) error) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, args []string) error {
			cl, err := newClient(c.Context(), addrs, logger())
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			defer cancel()
			return f(ctx, cl, args)
		}
	}
	topic := &cobra.Command{Use: "topic", Short: "Create and list topics"}
	var queues int
	create := &cobra.Command{Use: "create TOPIC", Short: "Create or update a topic (replicated)", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, cl *client.Client, args []string) error {
			if err := cl.CreateTopic(ctx, args[0], queues); err != nil {
				return err
			}
			fmt.Printf("topic %s: %d queues\n", args[0], queues)
			return nil
		})}
	create.Flags().IntVar(&queues, "queues", 4, "read and write queues")
	var topicsJSON bool
	list := &cobra.Command{Use: "list", Short: "List topics with their queue offsets",
		RunE: withClient(func(ctx context.Context, cl *client.Client, _ []string) error {
			return listTopics(ctx, cl, topicsJSON)
		})}
	list.Flags().BoolVar(&topicsJSON, "json", false, "print JSON: each topic's config and queues")
	topic.AddCommand(create, list)

	clusterCmd := &cobra.Command{Use: "cluster", Short: "Group status"}
	var statusJSON bool
	status := &cobra.Command{Use: "status", Short: "Each node's raft role, term, commit and applied index, and disk use",
		RunE: withClient(func(ctx context.Context, cl *client.Client, _ []string) error {
			if statusJSON {
				st, err := nodeStatuses(ctx, cl, strings.Split(addrs, ","))
				if err != nil {
					return err
				}
				return printJSON(os.Stdout, st)
			}
			return printClusterStatus(ctx, cl, strings.Split(addrs, ","))
		})}
	status.Flags().BoolVar(&statusJSON, "json", false, "print each node's status as JSON")
	var nsAddr string
	var listJSON bool
	clist := &cobra.Command{Use: "list", Short: "Every group (broker name) a name server knows, with its nodes by broker id (0: the leader)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			addrs := namesrv.AddrsFromEnv(nsAddr)
			if len(addrs) == 0 {
				return fmt.Errorf("no name server: give --namesrv ADDR or set NAMESRV_ADDR")
			}
			ctx, cancel := context.WithTimeout(c.Context(), 10*time.Second)
			defer cancel()
			return printClusterList(ctx, c.OutOrStdout(), addrs[0], listJSON)
		}}
	clist.Flags().StringVar(&nsAddr, "namesrv", "", "name server address (default: $NAMESRV_ADDR)")
	clist.Flags().BoolVar(&listJSON, "json", false, "print the name server's JSON answer")
	clusterCmd.AddCommand(status, clist)

	var to uint64
	transfer := &cobra.Command{Use: "transfer-leader", Short: "Hand leadership to node --to", RunE: withClient(func(ctx context.Context, cl *client.Client, _ []string) error {
		if err := cl.TransferLeader(ctx, to); err != nil {
			return err
		}
		fmt.Printf("leadership transfer to node %d requested\n", to)
		// Watch it happen: raft gives up a transfer after an election
		// timeout, and the old leader goes on leading.
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, err := nodeStatuses(ctx, cl, strings.Split(addrs, ","))
			if err == nil {
				for _, ns := range st {
					if ns.Status.ID == to && ns.Status.Leader == to {
						fmt.Printf("node %d leads (term %d)\n", to, ns.Status.Term)
						return nil
					}
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %d did not take over within 5s (is it caught up and reachable?); see `raftmq admin cluster status`", to)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})}
	transfer.Flags().Uint64Var(&to, "to", 0, "node id")

	node := &cobra.Command{Use: "node", Short: "Add or remove group members (raft ConfChange)"}
	add := &cobra.Command{Use: "add ID=CLIENTADDR/RAFTADDR", Short: "Add a member, as a learner until it has caught up; then start it with `raftmq broker --join`", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, cl *client.Client, args []string) error {
			id, p, err := cluster.ParsePeer(args[0])
			if err != nil {
				return err
			}
			if err := cl.AddNode(ctx, id, p.Client, p.Raft); err != nil {
				return err
			}
			fmt.Printf("added node %d as a learner; it becomes a voter once caught up\n", id)
			fmt.Printf("start it with: raftmq broker --id %d --join --peer %s ...(the other members), then follow its catch-up with: raftmq admin node wait %d\n", id, args[0], id)
			return nil
		})}
	remove := &cobra.Command{Use: "remove ID", Short: "Remove a member (voter or learner); the removed node stops itself", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, cl *client.Client, args []string) error {
			var id uint64
			if _, err := fmt.Sscan(args[0], &id); err != nil {
				return fmt.Errorf("bad node id %q", args[0])
			}
			if err := cl.RemoveNode(ctx, id); err != nil {
				return err
			}
			fmt.Printf("node %d removed\n", id)
			return nil
		})}
	var waitFor time.Duration
	var waitEvery time.Duration
	wait := &cobra.Command{Use: "wait ID", Short: "Print a member's catch-up (entries and bytes behind the leader, rate) until it has caught up",
		Long: "wait asks the leader (through any node) every --every how far member ID's log is behind its own,\n" +
			"prints the entries and bytes it lacks and the rate it closes the gap at, and returns once the\n" +
			"member is active and lacks nothing (exit 1 after --timeout). Use it after `raftmq broker --join`\n" +
			"of a new member, or when a member restarts after a long time down.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var id uint64
			if _, err := fmt.Sscan(args[0], &id); err != nil {
				return fmt.Errorf("bad node id %q", args[0])
			}
			cl, err := newClient(c.Context(), addrs, logger())
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(c.Context(), waitFor)
			defer cancel()
			return waitCatchUp(ctx, cl, id, waitEvery, c.OutOrStdout())
		}}
	wait.Flags().DurationVar(&waitFor, "timeout", 30*time.Minute, "give up after this long")
	wait.Flags().DurationVar(&waitEvery, "every", 2*time.Second, "time between progress lines")
	node.AddCommand(add, remove, wait)

	offset := &cobra.Command{Use: "offset", Short: "Show or reset a consumer group's committed offset of a queue"}
	var og, ot string
	var oq int32
	var getJSON bool
	get := &cobra.Command{Use: "get", Short: "Print the group's committed offset of the queue (a linearizable read)", Args: cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, cl *client.Client, _ []string) error {
			off, ok, err := cl.NewPullConsumer(og).FetchOffset(ctx, ot, oq)
			if err != nil {
				return err
			}
			if getJSON {
				return printJSON(os.Stdout, map[string]any{"group": og, "topic": ot, "queueId": oq, "committed": ok, "offset": off})
			}
			if !ok {
				fmt.Printf("group %s has no committed offset for %s/%d\n", og, ot, oq)
				return nil
			}
			fmt.Printf("group %s %s/%d: committed offset %d\n", og, ot, oq, off)
			return nil
		})}
	reset := &cobra.Command{Use: "reset OFFSET", Short: "Set the group's committed offset of the queue, backwards too (stop the group's consumers first)", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, cl *client.Client, args []string) error {
			var off int64
			if _, err := fmt.Sscan(args[0], &off); err != nil || off < 0 {
				return fmt.Errorf("bad offset %q: want a queue offset >= 0", args[0])
			}
			if err := cl.NewPullConsumer(og).ResetOffset(ctx, ot, oq, off); err != nil {
				return err
			}
			fmt.Printf("group %s %s/%d: committed offset reset to %d\n", og, ot, oq, off)
			return nil
		})}
	for _, c := range []*cobra.Command{get, reset} {
		c.Flags().StringVar(&og, "group", "", "consumer group")
		c.Flags().StringVar(&ot, "topic", "", "topic")
		c.Flags().Int32Var(&oq, "queue", 0, "queue id")
		_ = c.MarkFlagRequired("group")
		_ = c.MarkFlagRequired("topic")
	}
	get.Flags().BoolVar(&getJSON, "json", false, "print JSON")
	offset.AddCommand(get, reset)

	msg, query := newMessageCmd(withClient)

	dlq, dlqCmds := newDLQCmd(withClient)
	cmds := []*cobra.Command{topic, clusterCmd, transfer, node, offset, msg, dlq}
	for _, c := range append([]*cobra.Command{create, list, status, transfer, add, remove, wait, get, reset, query}, dlqCmds...) {
		addrFlag(c, &addrs)
	}
	return cmds
}

// nodeStatus asks the node at addr for its status.
func nodeStatus(ctx context.Context, cl *client.Client, addr string) (cluster.NodeStatus, error) {
	return admin.NodeStatus(ctx, cl, addr)
}

// nodeStatuses asks every address for its node's status and returns the
// answers it got (an error only when none answered).
func nodeStatuses(ctx context.Context, cl *client.Client, addrs []string) ([]cluster.NodeStatus, error) {
	var out []cluster.NodeStatus
	var lastErr error
	for _, a := range addrs {
		st, err := nodeStatus(ctx, cl, a)
		if err != nil {
			lastErr = err
			continue
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, lastErr
	}
	return out, nil
}

func printClusterStatus(ctx context.Context, cl *client.Client, addrs []string) error {
	type row struct {
		addr string
		st   cluster.NodeStatus
		err  error
	}
	var rows []row
	for _, a := range addrs {
		st, err := nodeStatus(ctx, cl, a)
		rows = append(rows, row{addr: a, st: st, err: err})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].addr < rows[j].addr })
	fmt.Printf("%-22s %-5s %-10s %-6s %-7s %-10s %-10s %-10s %-10s %s\n", "node", "id", "role", "term", "leader", "commit", "applied", "log MB", "disk used", "format")
	for _, r := range rows {
		if r.err != nil {
			fmt.Printf("%-22s unreachable: %v\n", r.addr, r.err)
			continue
		}
		rs := r.st.Status
		// format: this node's build's level / the group's, as it applied it
		// (0/0 from a build before format levels).
		fmt.Printf("%-22s %-5d %-10s %-6d %-7d %-10d %-10d %-10.1f %-10s %d/%d\n", r.addr, rs.ID, strings.TrimPrefix(rs.Role, "State"),
			rs.Term, rs.Leader, rs.Commit, rs.Applied, float64(r.st.LogBytes)/1e6, fmt.Sprintf("%.1f%%", 100*r.st.DiskUsed),
			r.st.FormatLevel.Build, r.st.FormatLevel.Group)
	}
	return nil
}

func newBenchCmd(logger func() *slog.Logger) *cobra.Command {
	var addrs, cpuProfile, htmlOut string
	var asJSON bool
	cmd := &cobra.Command{Use: "bench", Short: "Measure a running group: produce throughput and ack latency, consume throughput"}
	var pc bench.ProduceConfig
	var traceEvery int
	var traceHTTP string
	produce := &cobra.Command{
		Use:   "produce",
		Short: "Send for --duration and report msgs/s, MB/s and latency percentiles",
		Long: "--window 1 sends one message at a time (latency); --window N pipelines N sends per producer;\n" +
			"--batch N sends N messages per request; --auto-batch lets the client pack waiting sends into batches. Acks mean what the group's --flush says (default:\n" +
			"fsynced on a quorum). --topics N spreads the sends over N topics (TOPIC-0 ... TOPIC-<N-1>) of --queues queues each, created first\n" +
			"through the admin path: each of the N x queues queues gets the same share of the sends.\n" +
			"--grpc ADDR sends over RocketMQ 5's gRPC (SendMessage) to the leader instead, the node choosing the queues.",
		RunE: func(c *cobra.Command, _ []string) error {
			return runBench(c.Context(), addrs, asJSON, cpuProfile, htmlOut, "send", logger(), func(ctx context.Context, cl *client.Client, progress io.Writer) (bench.Result, error) {
				pc.Progress = progress
				if traceEvery <= 0 {
					return bench.Produce(ctx, cl, pc)
				}
				return produceTraced(ctx, cl, pc, addrs, traceHTTP, traceEvery)
			})
		},
	}
	produce.Flags().StringVar(&pc.Topic, "topic", "bench", "topic (created if missing); with --topics N > 1 the stem of the topics' names")
	produce.Flags().IntVar(&pc.Topics, "topics", 1, "topics to send to, named TOPIC-0 ... TOPIC-<N-1> when more than one")
	produce.Flags().IntVar(&pc.Queues, "queues", 4, "queues of each topic")
	produce.Flags().IntVar(&pc.Size, "size", 1024, "message body bytes")
	produce.Flags().IntVar(&pc.Window, "window", 1000, "sends in flight per producer (1: one at a time)")
	produce.Flags().IntVar(&pc.Batch, "batch", 1, "messages per send")
	produce.Flags().IntVar(&pc.Producers, "producers", 1, "concurrent producers")
	produce.Flags().BoolVar(&pc.AutoBatch, "auto-batch", false, "with --window > 1: pack sends waiting behind others into batch requests (the client's AutoBatch)")
	produce.Flags().DurationVar(&pc.Duration, "duration", 10*time.Second, "how long to send")
	produce.Flags().IntVar(&traceEvery, "trace", 0, "trace one send in N on the leader (--trace alone: 1 in 16) and print where its time went, stage by stage (0: off)")
	produce.Flags().Lookup("trace").NoOptDefVal = "16"
	produce.Flags().StringVar(&traceHTTP, "trace-http", "", "with --trace: the brokers' HTTP addresses, comma-separated (default: each --addr port + 20, as raftmq cluster lays them out)")
	produce.Flags().Int64Var(&pc.Messages, "messages", 0, "stop after sending this many messages, or at --duration if sooner (0: no limit)")
	produce.Flags().StringVar(&pc.GRPC, "grpc", "", "send over RocketMQ 5's gRPC instead of remoting: a node's gRPC address (plaintext), whose QueryRoute names the leader; --window calls in flight per producer, --batch messages per call")
	produce.Flags().StringVar(&pc.GRPCClient, "grpc-client", bench.GRPCLean, "with --grpc: the gRPC client, lean (protocol/grpc/h2: one connection, no goroutine hand-offs per call) or grpc-go")
	produce.Flags().IntVar(&pc.GRPCConns, "grpc-conns", 1, "with --grpc: connections the producers share (1: one for all, as remoting's producers share the client's; --producers: one each)")
	var cc bench.ConsumeConfig
	consume := &cobra.Command{
		Use:   "consume",
		Short: "Read every queue of --topic (or of --topics N topics) from its start to its end and report msgs/s",
		Long: "Pulls each queue one batch at a time (--readers N: N parts of it at once); with --push, N push consumers\n" +
			"(--consumers N) of a new consumer group, each on a client of its own, share the queues through the group's\n" +
			"rebalancing. Either way the run ends when every message was consumed at least once; more deliveries are\n" +
			"reported as duplicates.",
		RunE: func(c *cobra.Command, _ []string) error {
			log := logger()
			latencyOf := "pull"
			if cc.Push {
				ctx := c.Context()
				cc.NewClient = func() (*client.Client, error) { return newClient(ctx, addrs, log) }
				latencyOf = "push consumer pull" // none recorded: the report shows throughput only
			}
			return runBench(c.Context(), addrs, asJSON, cpuProfile, htmlOut, latencyOf, log, func(ctx context.Context, cl *client.Client, progress io.Writer) (bench.Result, error) {
				cc.Progress = progress
				return bench.Consume(ctx, cl, cc)
			})
		},
	}
	consume.Flags().StringVar(&cc.Topic, "topic", "bench", "topic; with --topics N > 1 the stem of the topics' names, as bench produce names them")
	consume.Flags().IntVar(&cc.Topics, "topics", 1, "topics to read, named TOPIC-0 ... TOPIC-<N-1> when more than one")
	consume.Flags().IntVar(&cc.Queues, "queues", 0, "queues each topic must have (0: whatever it has)")
	consume.Flags().IntVar(&cc.Batch, "batch", 32, "messages per pull (the push consumers' PullBatchSize with --push)")
	consume.Flags().StringVar(&cc.From, "from", "", "pull from this node address (default: the leader)")
	consume.Flags().IntVar(&cc.Readers, "readers", 1, "concurrent readers per queue, each reading its own part of the queue")
	consume.Flags().BoolVar(&cc.Push, "push", false, "consume with push consumers (client.PushConsumer) of a new consumer group instead of pulls")
	consume.Flags().IntVar(&cc.Consumers, "consumers", 1, "with --push: push consumers in the group, each with a client of its own")
	consume.Flags().IntVar(&cc.ConsumeBatch, "consume-batch", 0, "with --push: most messages per callback (ConsumeBatchSize; 0: --batch, a whole pull; 1 is the client's default)")
	consume.Flags().IntVar(&cc.ConsumeGoroutines, "consume-goroutines", 0, "with --push: callbacks running at once per consumer (ConsumeGoroutines; 0: the client's default, 20)")
	consume.Flags().IntVar(&cc.QueueCache, "queue-cache", 0, "with --push: pulled, unconsumed messages per queue before pulling pauses (QueueCacheSize; 0: the client's default, 1000)")
	for _, c := range []*cobra.Command{produce, consume} {
		addrFlag(c, &addrs)
		c.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON line")
		c.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write the client's CPU profile (pprof) to this file")
	}
	for _, c := range []*cobra.Command{produce, consume} {
		c.Flags().StringVar(&htmlOut, "html", "", "also write an HTML report (throughput and latency over time) to this file")
	}
	var kills, producers, basePort int
	var dataDir, flush string
	failover := &cobra.Command{
		Use:   "failover",
		Short: "Start a local group, kill -9 its leader --kills times under load, report recovery times and check nothing acknowledged is lost",
		RunE: func(c *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			if dataDir == "" {
				if dataDir, err = os.MkdirTemp("", "raftmq-failover-"); err != nil {
					return err
				}
				defer os.RemoveAll(dataDir)
			}
			g := localgroup.New(localgroup.Config{Binary: self, Dir: dataDir, BasePort: basePort, Args: []string{"--flush", flush}})
			if err := g.Start(); err != nil {
				return err
			}
			defer g.StopAll()
			var progress io.Writer = os.Stderr
			r, err := bench.Failover(c.Context(), g, kills, producers, progress)
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.Marshal(r)
				fmt.Println(string(b))
			} else {
				fmt.Println(r.String())
			}
			if htmlOut != "" {
				if err := writeReport(htmlOut, "raftmq bench failover", r.String(), "send", r.Series, r.Windows); err != nil {
					return err
				}
			}
			if r.Lost > 0 || r.Duplicated > 0 || !r.LogsAgree {
				return &exitError{code: 1, err: fmt.Errorf("failover check failed: %s", r.String())}
			}
			return nil
		},
	}
	failover.Flags().IntVar(&kills, "kills", 20, "leader kills")
	failover.Flags().IntVar(&producers, "producers", 4, "producers sending one message at a time")
	failover.Flags().IntVar(&basePort, "base-port", 11911, "first client port of the group it starts")
	failover.Flags().StringVar(&dataDir, "data", "", "data directory (default: a temporary one, removed afterwards)")
	failover.Flags().StringVar(&flush, "flush", "sync", "the group's flush mode")
	failover.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON line")
	failover.Flags().StringVar(&htmlOut, "html", "", "also write an HTML report (sends and latency over time, each kill shaded) to this file")
	var tc bench.TxnConfig
	txnCmd := &cobra.Command{
		Use:   "txn",
		Short: "Commit transactions (half message, local transaction, END_TRANSACTION) for --duration and report transactions/s and latency",
		Long: "--producers transaction producers each run one transaction at a time; --rollback F rolls back that fraction. At the end the\n" +
			"topic must have gained exactly the committed transactions' messages (else exit 1).",
		RunE: func(c *cobra.Command, _ []string) error {
			return runBench(c.Context(), addrs, asJSON, cpuProfile, htmlOut, "transaction", logger(), func(ctx context.Context, cl *client.Client, progress io.Writer) (bench.Result, error) {
				tc.Progress = progress
				return bench.Txn(ctx, cl, tc)
			})
		},
	}
	txnCmd.Flags().StringVar(&tc.Topic, "topic", "bench-txn", "topic (created if missing)")
	txnCmd.Flags().IntVar(&tc.Queues, "queues", 4, "queues of the topic")
	txnCmd.Flags().IntVar(&tc.Size, "size", 1024, "message body bytes")
	txnCmd.Flags().IntVar(&tc.Producers, "producers", 8, "transactions in flight (one per producer goroutine)")
	txnCmd.Flags().DurationVar(&tc.Duration, "duration", 10*time.Second, "how long to run")
	txnCmd.Flags().Float64Var(&tc.Rollback, "rollback", 0, "fraction of transactions rolled back (0 to 1)")
	addrFlag(txnCmd, &addrs)
	txnCmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON line")
	txnCmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write the client's CPU profile (pprof) to this file")
	txnCmd.Flags().StringVar(&htmlOut, "html", "", "also write an HTML report (transactions and latency over time) to this file")
	cmd.AddCommand(produce, consume, failover, newBenchDelayCmd(logger), txnCmd, newBenchPopCmd(logger), newBenchLimitsCmd())
	return cmd
}

func newBenchPopCmd(logger func() *slog.Logger) *cobra.Command {
	var addrs, cpuProfile string
	var asJSON bool
	var pc bench.PopConfig
	cmd := &cobra.Command{
		Use:   "pop",
		Short: "Receive and ack a topic by pop with --consumers SimpleConsumers, next to the pull rate over the same messages",
		Long: "Sends --messages to --topic (created if missing), reads its queues from start to end with one puller per queue,\n" +
			"then --consumers SimpleConsumers of a new group receive --batch messages at a time and ack each batch in one request\n" +
			"(with --ack-each, each message in one, --ack-window acks in flight per consumer) until every message was acked.\n" +
			"Prints both rates, their ratio and ack latency percentiles.",
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, log := c.Context(), logger()
			cl, err := newClient(ctx, addrs, log)
			if err != nil {
				return err
			}
			defer cl.Close()
			tuneGC(log) // as produce and consume: the load generator allocates per message
			stop, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stop()
			pc.NewClient = func() (*client.Client, error) { return newClient(ctx, addrs, log) }
			if !asJSON {
				pc.Progress = os.Stderr
			}
			r, err := bench.Pop(ctx, cl, pc)
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.Marshal(r)
				if err != nil {
					return err
				}
				fmt.Println(string(b))
				return nil
			}
			fmt.Println(r.String())
			return nil
		},
	}
	cmd.Flags().StringVar(&pc.Topic, "topic", "bench-pop", "topic (created if missing)")
	cmd.Flags().IntVar(&pc.Queues, "queues", 4, "queues of the topic")
	cmd.Flags().Int64Var(&pc.Messages, "messages", 20000, "messages sent to the topic first (0: read what it holds)")
	cmd.Flags().IntVar(&pc.Size, "size", 1024, "message body bytes")
	cmd.Flags().IntVar(&pc.Consumers, "consumers", 4, "SimpleConsumers, each with a client of its own")
	cmd.Flags().IntVar(&pc.Batch, "batch", 32, "messages per receive and per pull (1 to 32)")
	cmd.Flags().BoolVar(&pc.AckEach, "ack-each", false, "ack each message with a request of its own (ACK_MESSAGE) instead of each received batch in one (BATCH_ACK_MESSAGE)")
	cmd.Flags().BoolVar(&pc.AckAsync, "ack-async", false, "send each batch ack in the background while the consumer receives its next batch (--acks-in-flight per consumer)")
	cmd.Flags().IntVar(&pc.AcksInFlight, "acks-in-flight", 1, "with --ack-async: batch acks in flight per consumer; a RocketMQ 5 PushConsumer keeps receiving while several are (its shape: 8 or more)")
	cmd.Flags().IntVar(&pc.AckWindow, "ack-window", 0, "with --ack-each: acks in flight per consumer (0: a whole batch; 1: one at a time)")
	cmd.Flags().DurationVar(&pc.Invisible, "invisible", 30*time.Second, "the receives' invisible time")
	cmd.Flags().StringVar(&pc.GRPC, "grpc", "", "then pop the same messages over RocketMQ 5's gRPC (ReceiveMessage, a batch per AckMessage) with a new group: a node's gRPC address (plaintext), whose QueryRoute names the leader")
	cmd.Flags().StringVar(&pc.GRPCClient, "grpc-client", bench.GRPCLean, "with --grpc: the gRPC client, lean (protocol/grpc/h2) or grpc-go")
	addrFlag(cmd, &addrs)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON line")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write the client's CPU profile (pprof) to this file")
	return cmd
}

// startCPUProfile writes the process's CPU profile to path (empty: none)
// until the returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	pf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}

// runBench connects, runs f with progress on stderr (unless --json) and
// prints its result.
func runBench(ctx context.Context, addrs string, asJSON bool, cpuProfile, htmlOut, latencyOf string, log *slog.Logger, f func(context.Context, *client.Client, io.Writer) (bench.Result, error)) error {
	cl, err := newClient(ctx, addrs, log)
	if err != nil {
		return err
	}
	defer cl.Close()
	tuneGC(log) // the load generator allocates per send as a broker does
	stop, err := startCPUProfile(cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	var progress io.Writer = os.Stderr
	if asJSON {
		progress = nil
	}
	r, err := f(ctx, cl, progress)
	if err != nil {
		return err
	}
	if err := printResult(r, asJSON); err != nil {
		return err
	}
	if r.Trace != nil && !asJSON {
		fmt.Print(r.Trace.String())
	}
	if htmlOut != "" {
		return writeReportTrace(htmlOut, "raftmq bench: "+r.Mode, r.String(), latencyOf, r.Series, nil, r.Trace)
	}
	return nil
}

// writeReport writes a run's HTML report to path and says where it is.
func writeReport(path, title, summary, latencyOf string, series []bench.Interval, kills []bench.KillWindow) error {
	return writeReportTrace(path, title, summary, latencyOf, series, kills, nil)
}

// writeReportTrace is writeReport with a send trace's breakdown (or nil).
func writeReportTrace(path, title, summary, latencyOf string, series []bench.Interval, kills []bench.KillWindow, trace *bench.Breakdown) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	if err := bench.WriteHTMLTrace(f, title, summary, latencyOf, series, kills, trace); err != nil {
		f.Close()
		return fmt.Errorf("html report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("html report %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "report: %s\n", path)
	return nil
}

func printResult(r bench.Result, asJSON bool) error {
	if asJSON {
		fmt.Println(r.JSON())
	} else {
		fmt.Println(r.String())
	}
	return nil
}

// listTopics asks a node for its topic configs (GET_ALL_TOPIC_CONFIG) and
// prints each with its queues' offsets, as a table or as JSON.
func listTopics(ctx context.Context, cl *client.Client, asJSON bool) error {
	tcs, err := admin.Topics(ctx, cl)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	if asJSON {
		out := []cluster.AdminTopicStatus{}
		for _, tc := range tcs {
			st, err := admin.TopicStatus(ctx, cl, tc.TopicName)
			if err != nil {
				return fmt.Errorf("list topics: %s: %w", tc.TopicName, err)
			}
			out = append(out, st)
		}
		return printJSON(os.Stdout, out)
	}
	fmt.Printf("%-24s %s\n", "#Topic", "#Queues (read/write), #Perm, #Queue offsets [min,max)")
	for _, tc := range tcs {
		n := tc.TopicName
		var parts []string
		for q := int32(0); q < tc.ReadQueueNums; q++ {
			lo, err1 := cl.MinOffset(ctx, n, q)
			hi, err2 := cl.MaxOffset(ctx, n, q)
			if err1 != nil || err2 != nil {
				parts = append(parts, fmt.Sprintf("q%d ?", q))
				continue
			}
			parts = append(parts, fmt.Sprintf("q%d [%d,%d)", q, lo, hi))
		}
		fmt.Printf("%-24s queues r%d/w%d perm %d  %s\n", n, tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm, strings.Join(parts, " "))
	}
	return nil
}

// waitCatchUp prints member id's lag behind the leader every every until
// the member is active and lacks nothing.
func waitCatchUp(ctx context.Context, cl *client.Client, id uint64, every time.Duration, w io.Writer) error {
	start := time.Now()
	var firstBytes int64 = -1
	for {
		v, err := admin.ClusterList(ctx, cl)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("node %d: %w", id, ctx.Err())
			}
			fmt.Fprintf(w, "n%d: asking the leader: %v\n", id, err)
		} else {
			i := slices.IndexFunc(v.Members, func(m cluster.AdminMember) bool { return m.ID == id })
			if i < 0 {
				return fmt.Errorf("node %d is not a member of the group (add it first: raftmq admin node add)", id)
			}
			m := v.Members[i]
			if m.Active && m.LagEntries == 0 {
				fmt.Fprintf(w, "n%d caught up: log matches the leader's at index %d (%s)\n", id, m.Match, time.Since(start).Round(time.Second))
				return nil
			}
			if firstBytes < 0 {
				firstBytes = m.LagBytes
			}
			rate := ""
			if el := time.Since(start).Seconds(); el >= 1 && firstBytes > m.LagBytes {
				rate = fmt.Sprintf(", closing at %.1f MB/s", float64(firstBytes-m.LagBytes)/el/1e6)
			}
			state := "active"
			if !m.Active {
				state = "not heard from"
			}
			fmt.Fprintf(w, "n%d: %s, behind the leader by %d entries, %.1f MB%s\n", id, state, m.LagEntries, float64(m.LagBytes)/1e6, rate)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d did not catch up: %w", id, ctx.Err())
		case <-time.After(every):
		}
	}
}

// produceTraced runs a produce bench with the brokers tracing one send in
// every, and adds the leader's breakdown to the result. Tracing is turned
// off again afterwards, whatever the run's outcome.
func produceTraced(ctx context.Context, cl *client.Client, pc bench.ProduceConfig, addrs, traceHTTP string, every int) (bench.Result, error) {
	https, err := traceHTTPAddrs(addrs, traceHTTP)
	if err != nil {
		return bench.Result{}, err
	}
	if err := bench.SetTracing(ctx, https, every); err != nil {
		return bench.Result{}, err
	}
	r, err := bench.Produce(ctx, cl, pc)
	if err != nil {
		_ = bench.SetTracing(context.WithoutCancel(ctx), https, 0)
		return r, err
	}
	bd, terr := bench.FetchTraces(ctx, https)
	if serr := bench.SetTracing(context.WithoutCancel(ctx), https, 0); terr == nil {
		terr = serr
	}
	if bd == nil {
		return r, terr
	}
	r.Trace = bd
	return r, nil
}

// traceHTTPAddrs returns the brokers' HTTP addresses: traceHTTP if set,
// else each client address's port + 20 (raftmq cluster's layout).
func traceHTTPAddrs(addrs, traceHTTP string) ([]string, error) {
	if traceHTTP != "" {
		return strings.Split(traceHTTP, ","), nil
	}
	var out []string
	for _, a := range strings.Split(addrs, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(a))
		if err != nil {
			return nil, fmt.Errorf("--trace: %q: %w; name the HTTP ports with --trace-http", a, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("--trace: %q: port: %w", a, err)
		}
		out = append(out, net.JoinHostPort(host, strconv.Itoa(p+20)))
	}
	return out, nil
}
