package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// The operator's commands after mqadmin's (`raftmq admin topic status`,
// `raftmq admin consumer progress`, ...). Each talks to any node of a
// running group (--addr), asks the broker's admin API (cluster/admin.go)
// and prints its answer as a table, or as JSON with --json. mqadmin's
// names (topicStatus, consumerProgress, ...) are accepted too, as hidden
// commands of `raftmq admin` with mqadmin's short flags (-t, -g, -k, -i).

// adminRun is what an admin command runs: ctx has a timeout, out is the
// command's stdout.
type adminRun func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error

// adminEnv builds admin commands sharing --addr and the logger.
type adminEnv struct {
	logger func() *slog.Logger
	addrs  string
}

// command returns a command running f with a client of the group, with
// --addr and, if asJSON is not nil, --json.
func (e *adminEnv) command(use, short string, args cobra.PositionalArgs, asJSON *bool, f adminRun) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: args, RunE: func(c *cobra.Command, args []string) error {
		cl, err := newClient(c.Context(), e.addrs, e.logger())
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
		defer cancel()
		return f(ctx, cl, c.OutOrStdout(), args)
	}}
	addrFlag(c, &e.addrs)
	if asJSON != nil {
		c.Flags().BoolVar(asJSON, "json", false, "print the answer as JSON")
	}
	return c
}

// alias returns a hidden copy of a command under mqadmin's name, made by
// mk (a fresh command, so flags are not shared between the two). Its
// boolean flags with a short name take a value, as mqadmin's do
// (`-m true`), except mqadmin's few switches (noArgSwitches).
func alias(name string, mk func() *cobra.Command) *cobra.Command {
	c := mk()
	c.Use = name + strings.TrimPrefix(c.Use, strings.Fields(c.Use)[0])
	c.Hidden = true
	c.Short = "mqadmin's name for: " + c.Short
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" && f.Shorthand != "" && !slices.Contains(noArgSwitches, f.Name) {
			f.NoOptDefVal = ""
			f.Usage += " (true or false)"
		}
	})
	return c
}

// noArgSwitches are the boolean flags that mqadmin's commands take without
// a value.
var noArgSwitches = []string{"cluster-model"}

// explain turns a broker's not-found answers into errors naming what was
// not found.
func explain(err error, topic, group string) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Code {
	case remoting.TopicNotExist:
		return fmt.Errorf("topic %q does not exist (%s)", topic, ce.Remark)
	case remoting.SubscriptionGroupNotExist:
		return fmt.Errorf("consumer group %q does not exist (%s)", group, ce.Remark)
	case remoting.ConsumerNotOnline:
		return fmt.Errorf("no consumer of group %q is online (%s)", group, ce.Remark)
	case remoting.SystemError:
		if strings.HasPrefix(ce.Remark, "the producer group[") {
			return fmt.Errorf("no producer of group %q is online (%s)", group, ce.Remark)
		}
	}
	return err
}

func printJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, string(b))
	return err
}

func fmtTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// adminOpsCmds adds the mqadmin-like commands to admin's subcommands
// (topic, cluster and offset exist already; consumer, group, broker and
// the hidden mqadmin names are new).
func adminOpsCmds(admin *cobra.Command, logger func() *slog.Logger) {
	e := &adminEnv{logger: logger}
	sub := func(name string) *cobra.Command {
		for _, c := range admin.Commands() {
			if c.Name() == name {
				return c
			}
		}
		c := &cobra.Command{Use: name}
		admin.AddCommand(c)
		return c
	}
	topic, clusterCmd, offset := sub("topic"), sub("cluster"), sub("offset")
	topic.Short = "Create, update, delete and inspect topics"
	topic.AddCommand(e.topicRoute(), e.topicStatus(), e.topicUpdate(), e.topicDelete())
	// The group view replaces the name-server-only cluster list.
	for _, c := range clusterCmd.Commands() {
		if c.Name() == "list" {
			clusterCmd.RemoveCommand(c)
		}
	}
	clusterCmd.AddCommand(e.clusterList())
	offset.AddCommand(e.resetByTime())
	consumer := &cobra.Command{Use: "consumer", Short: "A consumer group's progress (lag) and connected clients"}
	consumer.AddCommand(e.consumerProgress(), e.consumerConnection())
	producer := &cobra.Command{Use: "producer", Short: "A producer group's connected clients"}
	producer.AddCommand(e.producerConnection())
	group := &cobra.Command{Use: "group", Short: "Create, update and delete subscription groups"}
	group.AddCommand(e.groupUpdate(), e.groupDelete())
	broker := &cobra.Command{Use: "broker", Short: "One node's runtime figures"}
	broker.AddCommand(e.brokerStatus())
	admin.AddCommand(consumer, producer, group, broker)
	sub("message").AddCommand(e.messageGet())

	for _, a := range []struct {
		name string
		mk   func() *cobra.Command
	}{
		{"clusterList", e.clusterList},
		{"topicRoute", e.topicRoute},
		{"topicStatus", e.topicStatus},
		{"updateTopic", e.topicUpdate},
		{"deleteTopic", e.topicDelete},
		{"consumerProgress", e.consumerProgress},
		{"consumerConnection", e.consumerConnection},
		{"producerConnection", e.producerConnection},
		{"updateSubGroup", e.groupUpdate},
		{"deleteSubGroup", e.groupDelete},
		{"resetOffsetByTime", e.resetByTime},
		{"brokerStatus", e.brokerStatus},
		{"queryMsgByOffset", e.messageGet},
		{"queryMsgByKey", e.queryAlias("key")},
		{"queryMsgByUniqueKey", e.queryAlias("uniq")},
		{"queryMsgById", e.queryAlias("id")},
	} {
		admin.AddCommand(alias(a.name, a.mk))
	}
	adminMoreCmds(admin, e)
}

// topicCommand is command for an admin command about one topic, named by
// its argument or by -t/--topic.
func (e *adminEnv) topicCommand(use, short string, asJSON *bool, f func(ctx context.Context, cl *client.Client, out io.Writer, topic string) error) *cobra.Command {
	var flag string
	c := e.command(use, short, cobra.MaximumNArgs(1), asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
		topic, err := pickTopic(args, flag)
		if err != nil {
			return err
		}
		return f(ctx, cl, out, topic)
	})
	c.Flags().StringVarP(&flag, "topic", "t", "", "topic (or give it as the argument)")
	return c
}

func pickTopic(args []string, flag string) (string, error) {
	if len(args) > 0 {
		return args[0], nil
	}
	if flag == "" {
		return "", errors.New("give the topic as the argument or with --topic")
	}
	return flag, nil
}

func (e *adminEnv) topicRoute() *cobra.Command {
	c := e.topicCommand("route [TOPIC]", "The topic's route (TopicRouteData: queues, perm, the group's nodes by broker id, 0 the leader)", nil,
		func(ctx context.Context, cl *client.Client, out io.Writer, topic string) error {
			var v any
			if err := admin.View(ctx, cl, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, &v); err != nil {
				return explain(err, topic, "")
			}
			return printJSON(out, v)
		})
	return c
}

func (e *adminEnv) topicStatus() *cobra.Command {
	var asJSON bool
	c := e.topicCommand("status [TOPIC]", "Each queue's min and max offset and last update time (GET_TOPIC_STATS_INFO)", &asJSON,
		func(ctx context.Context, cl *client.Client, out io.Writer, topic string) error {
			v, err := admin.TopicStatus(ctx, cl, topic)
			if err != nil {
				return explain(err, topic, "")
			}
			if asJSON {
				return printJSON(out, v)
			}
			fmt.Fprintf(out, "topic %s: %d read / %d write queues, perm %d, order %v\n", v.Topic, v.ReadQueues, v.WriteQueues, v.Perm, v.Order)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#QID\t#Min Offset\t#Max Offset\t#Last Updated")
			var total int64
			for _, q := range v.Queues {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%s\n", q.QueueID, q.MinOffset, q.MaxOffset, fmtTime(q.LastUpdate))
				total += q.MaxOffset - q.MinOffset
			}
			tw.Flush()
			fmt.Fprintf(out, "messages held: %d\n", total)
			return nil
		})
	return c
}

func (e *adminEnv) topicUpdate() *cobra.Command {
	var queues, readQ, writeQ, perm int32
	var order bool
	c := e.topicCommand("update [TOPIC]", "Create or update a topic: queues, perm (2 write, 4 read, 6 both), order (replicated)", nil,
		func(ctx context.Context, cl *client.Client, out io.Writer, topic string) error {
			tc := client.TopicConfig{Topic: topic, ReadQueues: queues, WriteQueues: queues, Perm: perm, Order: order}
			if readQ > 0 {
				tc.ReadQueues = readQ
			}
			if writeQ > 0 {
				tc.WriteQueues = writeQ
			}
			if err := cl.UpdateTopic(ctx, tc); err != nil {
				return err
			}
			fmt.Fprintf(out, "topic %s: %d read / %d write queues, perm %d, order %v\n", topic, tc.ReadQueues, tc.WriteQueues, tc.Perm, order)
			return nil
		})
	c.Flags().Int32Var(&queues, "queues", 8, "read and write queues")
	c.Flags().Int32VarP(&readQ, "read-queues", "r", 0, "read queues (default: --queues)")
	c.Flags().Int32VarP(&writeQ, "write-queues", "w", 0, "write queues (default: --queues)")
	c.Flags().Int32VarP(&perm, "perm", "p", 6, "permission: 2 write, 4 read, 6 read and write")
	c.Flags().BoolVarP(&order, "order", "o", false, "an ordered topic")
	return c
}

func (e *adminEnv) topicDelete() *cobra.Command {
	c := e.topicCommand("delete [TOPIC]", "Delete a topic (replicated; its messages stay until retention removes them)", nil,
		func(ctx context.Context, cl *client.Client, out io.Writer, topic string) error {
			// The broker answers success for a missing topic, as
			// RocketMQ's does; an operator is told instead.
			if _, err := admin.TopicStatus(ctx, cl, topic); err != nil {
				return explain(err, topic, "")
			}
			if err := cl.DeleteTopic(ctx, topic); err != nil {
				return err
			}
			fmt.Fprintf(out, "topic %s deleted\n", topic)
			return nil
		})
	return c
}

func (e *adminEnv) clusterList() *cobra.Command {
	var asJSON bool
	var nsAddr string
	c := e.command("list", "The group's members: role, term, commit and applied index, and each follower's lag in entries and bytes (asked of the leader through any node); with --namesrv every group the name server knows",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if nsAddr == "" {
				v, err := admin.ClusterList(ctx, cl)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(out, v)
				}
				printGroup(out, v)
				return nil
			}
			return e.listNamesrvGroups(ctx, out, nsAddr, asJSON)
		})
	c.Flags().StringVar(&nsAddr, "namesrv", "", "a name server: list every group it knows, each asked through its own nodes")
	return c
}

func printGroup(out io.Writer, v cluster.AdminCluster) {
	fmt.Fprintf(out, "cluster %s  broker %s  leader %d  term %d  commit %d  last index %d\n", v.Cluster, v.Broker, v.Leader, v.Term, v.Commit, v.LastIndex)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#ID\t#Addr\t#Role\t#Term\t#Commit\t#Applied\t#Match\t#Lag Entries\t#Lag Bytes\t#Active")
	for _, m := range v.Members {
		role := strings.TrimPrefix(m.Role, "State")
		if !m.Reachable {
			role += " (unreachable)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%v\n", m.ID, m.Client, role, m.Term, m.Commit, m.Applied, m.Match, m.LagEntries, m.LagBytes, m.Active)
	}
	tw.Flush()
}

// listNamesrvGroups asks a name server for every group and each group,
// through its own addresses, for its view.
func (e *adminEnv) listNamesrvGroups(ctx context.Context, out io.Writer, nsAddr string, asJSON bool) error {
	addrs := namesrv.AddrsFromEnv(nsAddr)
	if len(addrs) == 0 {
		return errors.New("no name server address")
	}
	ci, err := namesrvClusterInfo(ctx, addrs[0])
	if err != nil {
		return err
	}
	// A group is registered under its broker name and, with failover
	// routes, under "name@id" per follower (cluster.FailoverBrokerName):
	// one question per group, to any of its addresses.
	byGroup := map[string][]string{}
	for name, bd := range ci.BrokerAddrTable {
		base, _, _ := strings.Cut(name, "@")
		for _, a := range bd.BrokerAddrs {
			if !slices.Contains(byGroup[base], a) {
				byGroup[base] = append(byGroup[base], a)
			}
		}
	}
	var groups []cluster.AdminCluster
	for _, name := range slices.Sorted(mapKeys(byGroup)) {
		nodes := byGroup[name]
		slices.Sort(nodes)
		gc, err := newClient(ctx, strings.Join(nodes, ","), e.logger())
		if err != nil {
			return err
		}
		v, err := admin.ClusterList(ctx, gc)
		gc.Close()
		if err != nil {
			fmt.Fprintf(out, "broker %s (%s): %v\n", name, strings.Join(nodes, ","), err)
			continue
		}
		groups = append(groups, v)
	}
	if asJSON {
		return printJSON(out, groups)
	}
	for _, g := range groups {
		printGroup(out, g)
	}
	return nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (e *adminEnv) consumerProgress() *cobra.Command {
	var group, topic string
	var asJSON bool
	c := e.command("progress", "Per queue: broker offset, the group's committed offset, lag and last consume time; the group's total lag (without -g: every group's total lag and online consumers)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if group == "" {
				return allGroupsProgress(ctx, cl, out, asJSON)
			}
			v, err := admin.ConsumerProgress(ctx, cl, group, topic)
			if err != nil {
				return explain(err, topic, group)
			}
			if asJSON {
				return printJSON(out, v)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			pops := v.TotalInFlight > 0 // a pop consumer's messages in flight: one more column
			head := "#Topic\t#QID\t#Broker Offset\t#Consumer Offset\t#Diff\t#LastTime"
			if pops {
				head += "\t#InFlight"
			}
			fmt.Fprintln(tw, head)
			for _, q := range v.Queues {
				co := strconv.FormatInt(q.ConsumerOffset, 10)
				if !q.Committed {
					co = "-"
				}
				row := fmt.Sprintf("%s\t%d\t%d\t%s\t%d\t%s", q.Topic, q.QueueID, q.BrokerOffset, co, q.Lag, fmtTime(q.LastConsume))
				if pops {
					row += fmt.Sprintf("\t%d", q.InFlight)
				}
				fmt.Fprintln(tw, row)
			}
			tw.Flush()
			fmt.Fprintf(out, "Consume Diff Total: %d\n", v.TotalLag)
			if pops {
				fmt.Fprintf(out, "Pop In Flight Total: %d\n", v.TotalInFlight)
			}
			return nil
		})
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group (default: a line for every group)")
	c.Flags().StringVarP(&topic, "topic", "t", "", "only this topic (default: every topic of the group)")
	return c
}

// groupSummary is a line of `admin consumer progress` without -g, as
// mqadmin's consumerProgress without -g prints.
type groupSummary struct {
	Group     string `json:"group"`
	Consumers int    `json:"consumers"`
	Model     string `json:"messageModel,omitempty"`
	Type      string `json:"consumeType,omitempty"`
	TotalLag  int64  `json:"totalLag"`
}

// allGroupsProgress prints the total lag and online consumers of every
// group with a subscription group config or committed offsets (groups
// with neither offsets nor consumers online are left out).
func allGroupsProgress(ctx context.Context, cl *client.Client, out io.Writer, asJSON bool) error {
	groups, _, err := groupsWithState(ctx, cl)
	if err != nil {
		return err
	}
	rows := []groupSummary{}
	for _, g := range groups {
		pr, err := admin.ConsumerProgress(ctx, cl, g, "")
		if err != nil {
			return explain(err, "", g)
		}
		row := groupSummary{Group: g, TotalLag: pr.TotalLag}
		if cc, err := admin.ConsumerConnection(ctx, cl, g); err == nil {
			row.Consumers, row.Model, row.Type = len(cc.Clients), cc.MessageModel, cc.ConsumeType
		} else if !admin.NotFound(err) {
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Code != remoting.ConsumerNotOnline {
				return err
			}
		}
		if len(pr.Topics) == 0 && row.Consumers == 0 {
			continue
		}
		rows = append(rows, row)
	}
	if asJSON {
		return printJSON(out, rows)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#Group	#Count	#Type	#Model	#Diff Total")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\n", r.Group, r.Consumers, r.Type, r.Model, r.TotalLag)
	}
	return tw.Flush()
}

func (e *adminEnv) consumerConnection() *cobra.Command {
	var group string
	var asJSON bool
	c := e.command("connection", "The group's connected clients (id, address, language, version) and subscriptions",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			v, err := admin.ConsumerConnection(ctx, cl, group)
			if err != nil {
				return explain(err, "", group)
			}
			if asJSON {
				return printJSON(out, v)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#ClientId\t#ClientAddr\t#Language\t#Version")
			for _, c := range v.Clients {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", c.ClientID, c.Addr, c.Language, c.Version)
			}
			tw.Flush()
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "\n#Topic\t#SubExpression\t#Type")
			for _, s := range v.Subscriptions {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Topic, s.Expression, s.ExpressionType)
			}
			tw.Flush()
			fmt.Fprintf(out, "\nConsumeType: %s\nMessageModel: %s\nConsumeFromWhere: %s\n", v.ConsumeType, v.MessageModel, v.ConsumeFromWhere)
			return nil
		})
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	_ = c.MarkFlagRequired("group")
	return c
}

func (e *adminEnv) producerConnection() *cobra.Command {
	var group, topic string
	var asJSON bool
	c := e.command("connection", "The producer group's connected clients (id, address, language, version), as their heartbeats told the leader",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			h := remoting.ProducerConnectionRequestHeader{ProducerGroup: group}
			var v cluster.AdminProducerConnection
			if err := admin.View(ctx, cl, remoting.GetProducerConnectionList, h.Encode(), &v); err != nil {
				return explain(err, "", group)
			}
			if asJSON {
				return printJSON(out, v)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#ClientId\t#ClientAddr\t#Language\t#Version")
			for _, c := range v.Clients {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", c.ClientID, c.Addr, c.Language, c.Version)
			}
			return tw.Flush()
		})
	c.Flags().StringVarP(&group, "group", "g", "", "producer group")
	c.Flags().StringVarP(&topic, "topic", "t", "", "accepted for mqadmin's sake; producers are listed by group")
	_ = c.MarkFlagRequired("group")
	return c
}

func (e *adminEnv) groupUpdate() *cobra.Command {
	var group string
	var retryQueues, retryMax int32
	var consumeEnable, broadcast, orderly, fromMin bool
	c := e.command("update", "Create or update a subscription group (replicated): RocketMQ's defaults, changed by the flags given",
		cobra.NoArgs, nil, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			gc := offsets.NewSubscriptionGroupConfig(group)
			gc.RetryQueueNums, gc.RetryMaxTimes = retryQueues, retryMax
			gc.ConsumeEnable, gc.ConsumeBroadcastEnable, gc.ConsumeMessageOrderly, gc.ConsumeFromMinEnable = consumeEnable, broadcast, orderly, fromMin
			if err := admin.UpdateGroup(ctx, cl, gc); err != nil {
				return err
			}
			body, err := json.Marshal(gc)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "subscription group %s: %s\n", group, body)
			return nil
		})
	d := offsets.NewSubscriptionGroupConfig("x")
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	c.Flags().Int32VarP(&retryQueues, "retry-queues", "q", d.RetryQueueNums, "queues of the group's %RETRY% topic")
	c.Flags().Int32VarP(&retryMax, "retry-max-times", "r", d.RetryMaxTimes, "deliveries before a message goes to the dead-letter topic")
	c.Flags().BoolVarP(&consumeEnable, "consume-enable", "s", d.ConsumeEnable, "the group may consume")
	c.Flags().BoolVarP(&broadcast, "broadcast-enable", "d", d.ConsumeBroadcastEnable, "the group may consume in broadcasting mode")
	c.Flags().BoolVarP(&orderly, "orderly", "o", d.ConsumeMessageOrderly, "the group consumes orderly")
	c.Flags().BoolVarP(&fromMin, "consume-from-min", "m", d.ConsumeFromMinEnable, "consumeFromMinEnable")
	_ = c.MarkFlagRequired("group")
	return c
}

func (e *adminEnv) groupDelete() *cobra.Command {
	var group string
	c := e.command("delete", "Delete a subscription group (replicated); its committed offsets stay",
		cobra.NoArgs, nil, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if err := cl.DeleteGroup(ctx, group); err != nil {
				return explain(err, "", group)
			}
			fmt.Fprintf(out, "subscription group %s deleted\n", group)
			return nil
		})
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	_ = c.MarkFlagRequired("group")
	return c
}

// parseResetTime reads --time as mqadmin's -s: "now", -1 (the end of
// each queue), Unix milliseconds, yyyy-MM-dd#HH:mm:ss:SSS (local time), or
// RFC 3339.
func parseResetTime(s string, now time.Time) (int64, error) {
	switch {
	case s == "now":
		return now.UnixMilli(), nil
	case s == "-1":
		return -1, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	if t, err := time.ParseInLocation("2006-01-02#15:04:05:000", s, time.Local); err == nil {
		return t.UnixMilli(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixMilli(), nil
	}
	return 0, fmt.Errorf("bad time %q: want now, -1 (the end), Unix milliseconds, yyyy-MM-dd#HH:mm:ss:SSS or RFC 3339", s)
}

func (e *adminEnv) resetByTime() *cobra.Command {
	var group, topic, when string
	var force, asJSON bool
	c := e.command("reset-by-time", "Move the group's offset in every queue of the topic to the first message stored at or after --time (one raft entry); online consumers are told",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			ts, err := parseResetTime(when, time.Now())
			if err != nil {
				return err
			}
			v, err := admin.ResetOffset(ctx, cl, group, topic, ts, force)
			if err != nil {
				return explain(err, topic, group)
			}
			if asJSON {
				return printJSON(out, v)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#QID\t#Old Offset\t#New Offset")
			for _, q := range v.Queues {
				fmt.Fprintf(tw, "%d\t%d\t%d\n", q.QueueID, q.Old, q.New)
			}
			tw.Flush()
			fmt.Fprintf(out, "group %s reset in %s to %s; %d online consumers told\n", group, topic, fmtTime(ts), v.Notified)
			return nil
		})
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic")
	c.Flags().StringVarP(&when, "time", "s", "", "now, -1 (the end of each queue), Unix ms, yyyy-MM-dd#HH:mm:ss:SSS or RFC 3339")
	c.Flags().BoolVarP(&force, "force", "f", true, "move offsets forward too (false: only back)")
	for _, f := range []string{"group", "topic", "time"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func (e *adminEnv) brokerStatus() *cobra.Command {
	var node string
	var asJSON bool
	c := e.command("status", "One node's runtime figures (GET_BROKER_RUNTIME_INFO): raft role, term and indexes, commit-log bounds, disk",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			addr := node
			if addr == "" {
				addr = strings.Split(e.addrs, ",")[0]
			}
			resp, err := cl.Invoke(ctx, addr, remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
			if err != nil {
				return err
			}
			if resp.Code != remoting.Success {
				return fmt.Errorf("%s answered %d: %s", addr, resp.Code, resp.Remark)
			}
			var kv remoting.KVTable
			if err := json.Unmarshal(resp.Body, &kv); err != nil {
				return err
			}
			if asJSON {
				return printJSON(out, kv.Table)
			}
			for _, k := range slices.Sorted(mapKeys(kv.Table)) {
				fmt.Fprintf(out, "%-22s: %s\n", k, kv.Table[k])
			}
			return nil
		})
	c.Flags().StringVar(&node, "node", "", "the node's client address (default: the first of --addr)")
	return c
}

// toolsGroup is the consumer group mqadmin pulls single messages with.
const toolsGroup = "TOOLS_CONSUMER"

func (e *adminEnv) messageGet() *cobra.Command {
	var topic string
	var queue int32
	var offset int64
	var asJSON bool
	c := e.command("get", "Print the message at a queue offset with its properties (a pull of one message; the group's offsets do not move)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			pr, err := cl.NewPullConsumer(toolsGroup).Pull(ctx, topic, queue, offset, 1, 0)
			if err != nil {
				return explain(err, topic, "")
			}
			if len(pr.Messages) == 0 || pr.Messages[0].QueueOffset != offset {
				return fmt.Errorf("no message at %s queue %d offset %d (the queue holds [%d, %d))", topic, queue, offset, pr.MinOffset, pr.MaxOffset)
			}
			return printMessages(out, pr.Messages[:1], asJSON)
		})
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic")
	c.Flags().Int32VarP(&queue, "queue", "i", 0, "queue id")
	c.Flags().Int64VarP(&offset, "offset", "o", 0, "queue offset")
	_ = c.MarkFlagRequired("topic")
	return c
}

// queryAlias returns a constructor of mqadmin's queryMsgByKey (by "key"),
// queryMsgByUniqueKey ("uniq") or queryMsgById ("id"), with its flags.
func (e *adminEnv) queryAlias(by string) func() *cobra.Command {
	return func() *cobra.Command {
		var f messageQueryFlags
		c := e.command("query", "Find messages and print them with their properties", cobra.NoArgs, &f.json,
			func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
				ms, err := queryMessages(ctx, cl, f)
				if err != nil && by == "id" && f.topic != "" {
					// As mqadmin's queryMsgById: an id that is not an
					// offsetMsgId may be the msgId (UNIQ_KEY) a producer
					// was given.
					byUniq := f
					byUniq.id, byUniq.uniq = "", f.id
					if ms2, err2 := queryMessages(ctx, cl, byUniq); err2 == nil && len(ms2) > 0 {
						ms, err = ms2, nil
					}
				}
				if err != nil {
					return explain(err, f.topic, "")
				}
				if len(ms) == 0 {
					return errors.New("no message found")
				}
				return printMessages(out, ms, f.json)
			})
		switch by {
		case "key":
			c.Flags().StringVarP(&f.topic, "topic", "t", "", "topic")
			c.Flags().StringVarP(&f.key, "key", "k", "", "a key of the message's KEYS")
			_ = c.MarkFlagRequired("key")
		case "uniq":
			c.Flags().StringVarP(&f.topic, "topic", "t", "", "topic")
			c.Flags().StringVarP(&f.uniq, "msgId", "i", "", "the message's UNIQ_KEY (the msgId a producer is given)")
			_ = c.MarkFlagRequired("msgId")
		case "id":
			c.Flags().StringVarP(&f.topic, "topic", "t", "", "topic (optional; with it, an id that is no offsetMsgId is looked up as a msgId)")
			c.Flags().StringVarP(&f.id, "msgId", "i", "", "the message's offsetMsgId (or, with -t, its msgId)")
			_ = c.MarkFlagRequired("msgId")
		}
		c.Flags().IntVarP(&f.max, "max", "m", 32, "most messages to print")
		return c
	}
}

// newImportConfigCmd returns `admin import-config DIR`: RocketMQ's
// topics.json, subscriptionGroup.json and consumerOffset.json, read and
// validated here, replicated into a running group as one raft entry.
func newImportConfigCmd(logger func() *slog.Logger) *cobra.Command {
	e := &adminEnv{logger: logger}
	var asJSON bool
	return e.command("import-config DIR", "Replicate RocketMQ's topics.json, subscriptionGroup.json and consumerOffset.json into a running group (one raft entry, all or nothing)",
		cobra.ExactArgs(1), &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			cs, err := offsets.ReadConfigDir(vfs.Default(), args[0], logger())
			if err != nil {
				return err
			}
			if !asJSON {
				fmt.Fprintf(out, "read %s from %s: %d topics, %d subscription groups, %d consumer offsets; replicating\n",
					strings.Join(cs.Files, ", "), args[0], len(cs.Topics), len(cs.Groups), len(cs.Offsets))
			}
			var body remoting.ImportConfigBody
			for _, tc := range cs.Topics {
				b, err := json.Marshal(tc)
				if err != nil {
					return err
				}
				body.Topics = append(body.Topics, b)
			}
			for _, gc := range cs.Groups {
				b, err := json.Marshal(gc)
				if err != nil {
					return err
				}
				body.Groups = append(body.Groups, b)
			}
			for _, o := range cs.Offsets {
				body.Offsets = append(body.Offsets, remoting.ImportConfigOffset{Group: o.Group, Topic: o.Topic, QueueID: o.QueueID, Offset: o.Offset})
			}
			payload, err := json.Marshal(body)
			if err != nil {
				return err
			}
			var v cluster.AdminImport
			if err := admin.Change(ctx, cl, remoting.ImportConfig, nil, payload, true, &v); err != nil {
				return err
			}
			if asJSON {
				return printJSON(out, v)
			}
			fmt.Fprintf(out, "imported through raft (applied at index %d): %d topics, %d subscription groups, %d consumer offsets (%d lowered to their queue's end)\n",
				v.Index, v.Topics, v.Groups, v.Offsets, v.Clamped)
			return nil
		})
}
