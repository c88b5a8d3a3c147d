package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// The admin commands beyond the first mqadmin set (admin_ops.go): broker
// settings and write permission, maintenance, ACL accounts, offset
// cloning and skipping, statistics, and mqadmin's message tools. Each has
// a raftmq name under `raftmq admin` and a hidden mqadmin name with
// mqadmin's flags (adminMoreCmds).

// adminMoreCmds adds the commands to admin's subcommands and their
// mqadmin names.
func adminMoreCmds(adm *cobra.Command, e *adminEnv) {
	sub := func(parent *cobra.Command, name, short string) *cobra.Command {
		for _, c := range parent.Commands() {
			if c.Name() == name {
				return c
			}
		}
		c := &cobra.Command{Use: name, Short: short}
		parent.AddCommand(c)
		return c
	}
	topic, consumer, broker, offset := sub(adm, "topic", ""), sub(adm, "consumer", ""), sub(adm, "broker", ""), sub(adm, "offset", "")
	broker.Short = "A node's runtime figures and settings; the group's write permission; retention on demand"
	topic.AddCommand(e.topicClusters(), e.topicPerm(), e.topicNames())
	consumer.AddCommand(e.consumerStats(), e.consumerStatus(), e.consumerConfig())
	cfg := &cobra.Command{Use: "config", Short: "Show or change broker settings (group-wide through raft, or one node's)"}
	cfg.AddCommand(e.brokerConfigGet(), e.brokerConfigUpdate())
	perm := &cobra.Command{Use: "write-perm", Short: "Take away or give back the group's write permission (brokerPermission 4 or 6, through raft)"}
	perm.AddCommand(e.writePerm("wipe"), e.writePerm("add"))
	broker.AddCommand(cfg, perm, e.maintenance(cluster.CodeCleanExpiredConsumeQueue), e.maintenance(cluster.CodeDeleteExpiredCommitLog))
	offset.AddCommand(e.offsetClone(), e.offsetSkip())
	aclCmd := &cobra.Command{Use: "acl", Short: "The group's ACL accounts and global white list (replicated)"}
	aclCmd.AddCommand(e.aclUpdate(), e.aclDelete(), e.aclWhiteAddrs())
	adm.AddCommand(aclCmd, e.statsAll())

	for _, a := range []struct {
		name string
		mk   func() *cobra.Command
	}{
		{"topicList", e.topicNames},
		{"topicClusterList", e.topicClusters},
		{"updateTopicPerm", e.topicPerm},
		{"brokerConsumeStats", e.consumerStats},
		{"consumerStatus", e.consumerStatus},
		{"getConsumerConfig", e.consumerConfig},
		{"getBrokerConfig", e.brokerConfigGet},
		{"updateBrokerConfig", e.brokerConfigUpdate},
		{"wipeWritePerm", func() *cobra.Command { return e.writePerm("wipe") }},
		{"addWritePerm", func() *cobra.Command { return e.writePerm("add") }},
		{"cleanExpiredCQ", func() *cobra.Command { return e.maintenance(cluster.CodeCleanExpiredConsumeQueue) }},
		{"deleteExpiredCommitLog", func() *cobra.Command { return e.maintenance(cluster.CodeDeleteExpiredCommitLog) }},
		{"cloneGroupOffset", e.offsetClone},
		{"skipAccumulatedMessage", e.offsetSkip},
		{"updateAclConfig", e.aclUpdate},
		{"deleteAclConfig", e.aclDelete},
		{"updateGlobalWhiteAddr", e.aclWhiteAddrs},
		{"statsAll", e.statsAll},
		{"sendMessage", e.sendMessage},
		{"consumeMessage", e.consumeMessage},
		{"printMsg", e.printMsg},
	} {
		adm.AddCommand(alias(a.name, a.mk))
	}
}

// table writes a tab-separated table with a header.
func table(out io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// topicNames is mqadmin's topicList: the names, or with -c each topic's
// cluster and consumer groups.
func (e *adminEnv) topicNames() *cobra.Command {
	var asJSON, withGroups bool
	c := e.command("names", "Every topic's name; with -c its cluster and the consumer groups with offsets in it (mqadmin's topicList)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			tcs, err := admin.Topics(ctx, cl)
			if err != nil {
				return err
			}
			if !withGroups {
				names := []string{}
				for _, tc := range tcs {
					names = append(names, tc.TopicName)
				}
				if asJSON {
					return printJSON(out, names)
				}
				for _, n := range names {
					fmt.Fprintln(out, n)
				}
				return nil
			}
			v, err := admin.ClusterList(ctx, cl)
			if err != nil {
				return err
			}
			offs, err := admin.GroupOffsets(ctx, cl)
			if err != nil {
				return err
			}
			type row struct {
				Cluster string `json:"cluster"`
				Topic   string `json:"topic"`
				Group   string `json:"consumerGroup"`
			}
			rows := []row{}
			for _, tc := range tcs {
				n := 0
				for _, g := range slices.Sorted(maps.Keys(offs)) {
					if _, ok := offs[g][tc.TopicName]; ok {
						rows = append(rows, row{v.Cluster, tc.TopicName, g})
						n++
					}
				}
				if n == 0 {
					rows = append(rows, row{v.Cluster, tc.TopicName, ""})
				}
			}
			if asJSON {
				return printJSON(out, rows)
			}
			var rs [][]string
			for _, r := range rows {
				rs = append(rs, []string{r.Cluster, r.Topic, r.Group})
			}
			return table(out, "#Cluster Name\t#Topic\t#Consumer Group", rs)
		})
	c.Flags().BoolVarP(&withGroups, "cluster-model", "c", false, "print each topic's cluster and consumer groups")
	return c
}

func (e *adminEnv) topicClusters() *cobra.Command {
	var asJSON bool
	c := e.topicCommand("clusters [TOPIC]", "The cluster holding the topic (mqadmin's topicClusterList; a group belongs to one cluster)", &asJSON,
		func(ctx context.Context, cl *client.Client, out io.Writer, topic string) error {
			if _, err := admin.TopicStatus(ctx, cl, topic); err != nil {
				return explain(err, topic, "")
			}
			v, err := admin.ClusterList(ctx, cl)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(out, []string{v.Cluster})
			}
			fmt.Fprintln(out, v.Cluster)
			return nil
		})
	return c
}

func (e *adminEnv) topicPerm() *cobra.Command {
	var perm int32
	c := e.topicCommand("perm [TOPIC]", "Change a topic's permission: 2 write, 4 read, 6 both (replicated; mqadmin's updateTopicPerm)", nil,
		func(ctx context.Context, cl *client.Client, out io.Writer, topic string) error {
			if perm != remoting.PermRead && perm != remoting.PermWrite && perm != remoting.PermRead|remoting.PermWrite {
				return usageError(fmt.Errorf("--perm %d: want 2 (write), 4 (read) or 6 (read and write)", perm))
			}
			tcs, err := admin.Topics(ctx, cl)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(tcs, func(tc offsets.TopicConfig) bool { return tc.TopicName == topic })
			if i < 0 {
				return fmt.Errorf("topic %q does not exist", topic)
			}
			old := tcs[i]
			tc := client.TopicConfig{Topic: topic, ReadQueues: old.ReadQueueNums, WriteQueues: old.WriteQueueNums, Perm: perm, Order: old.Order}
			if err := cl.UpdateTopic(ctx, tc); err != nil {
				return err
			}
			fmt.Fprintf(out, "topic %s: perm %d -> %d\n", topic, old.Perm, perm)
			return nil
		})
	c.Flags().Int32VarP(&perm, "perm", "p", 0, "the new permission: 2, 4 or 6")
	_ = c.MarkFlagRequired("perm")
	return c
}

// groupsWithState is every group that has a subscription group config or
// committed offsets, sorted.
func groupsWithState(ctx context.Context, cl *client.Client) ([]string, map[string]map[string]map[int32]int64, error) {
	gs, err := admin.Groups(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	offs, err := admin.GroupOffsets(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	names := slices.Collect(maps.Keys(offs))
	for _, g := range gs {
		if !slices.Contains(names, g.GroupName) {
			names = append(names, g.GroupName)
		}
	}
	slices.Sort(names)
	return names, offs, nil
}

func (e *adminEnv) consumerStats() *cobra.Command {
	var asJSON bool
	c := e.command("stats", "Every group's progress in every queue it has offsets in (mqadmin's brokerConsumeStats)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			_, offs, err := groupsWithState(ctx, cl)
			if err != nil {
				return err
			}
			all := []cluster.AdminConsumerProgress{}
			for _, g := range slices.Sorted(maps.Keys(offs)) {
				pr, err := admin.ConsumerProgress(ctx, cl, g, "")
				if err != nil {
					return explain(err, "", g)
				}
				all = append(all, pr)
			}
			if asJSON {
				return printJSON(out, all)
			}
			var rows [][]string
			var total int64
			for _, pr := range all {
				for _, q := range pr.Queues {
					co := strconv.FormatInt(q.ConsumerOffset, 10)
					if !q.Committed {
						co = "-"
					}
					rows = append(rows, []string{q.Topic, pr.Group, strconv.Itoa(int(q.QueueID)), strconv.FormatInt(q.BrokerOffset, 10), co, strconv.FormatInt(q.Lag, 10), fmtTime(q.LastConsume)})
				}
				total += pr.TotalLag
			}
			if err := table(out, "#Topic\t#Group\t#QID\t#Broker Offset\t#Consumer Offset\t#Diff\t#LastTime", rows); err != nil {
				return err
			}
			fmt.Fprintf(out, "Diff Total: %d\n", total)
			return nil
		})
	return c
}

func (e *adminEnv) consumerStatus() *cobra.Command {
	var group string
	var asJSON bool
	c := e.command("status", "The group's online clients with their subscriptions, as the broker knows them from heartbeats (mqadmin's consumerStatus; the clients' internals are not asked)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			v, err := admin.ConsumerConnection(ctx, cl, group)
			if err != nil {
				return explain(err, "", group)
			}
			if asJSON {
				return printJSON(out, v)
			}
			var rows [][]string
			for i, c := range v.Clients {
				rows = append(rows, []string{strconv.Itoa(i + 1), c.ClientID, c.Addr, strconv.Itoa(int(c.Version))})
			}
			if err := table(out, "#Index\t#ClientId\t#ClientAddr\t#Version", rows); err != nil {
				return err
			}
			rows = nil
			for _, s := range v.Subscriptions {
				rows = append(rows, []string{s.Topic, s.Expression, s.ExpressionType})
			}
			fmt.Fprintln(out)
			if err := table(out, "#Topic\t#SubExpression\t#Type", rows); err != nil {
				return err
			}
			fmt.Fprintf(out, "\nConsumeType: %s\nMessageModel: %s\n", v.ConsumeType, v.MessageModel)
			return nil
		})
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	_ = c.MarkFlagRequired("group")
	return c
}

func (e *adminEnv) consumerConfig() *cobra.Command {
	var group string
	var asJSON bool
	c := e.command("config", "The subscription group's config (mqadmin's getConsumerConfig)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			gs, err := admin.Groups(ctx, cl)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(gs, func(g offsets.SubscriptionGroupConfig) bool { return g.GroupName == group })
			if i < 0 {
				return fmt.Errorf("consumer group %q has no subscription group config", group)
			}
			if asJSON {
				return printJSON(out, gs[i])
			}
			g := gs[i]
			for _, kv := range [][2]string{
				{"groupName", g.GroupName}, {"consumeEnable", strconv.FormatBool(g.ConsumeEnable)},
				{"consumeFromMinEnable", strconv.FormatBool(g.ConsumeFromMinEnable)}, {"consumeBroadcastEnable", strconv.FormatBool(g.ConsumeBroadcastEnable)},
				{"consumeMessageOrderly", strconv.FormatBool(g.ConsumeMessageOrderly)}, {"retryQueueNums", strconv.Itoa(int(g.RetryQueueNums))},
				{"retryMaxTimes", strconv.Itoa(int(g.RetryMaxTimes))},
			} {
				fmt.Fprintf(out, "%-24s = %s\n", kv[0], kv[1])
			}
			return nil
		})
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	_ = c.MarkFlagRequired("group")
	return c
}

// targetNodes is the nodes a per-node command asks: -b's, else every
// member of the group.
func (e *adminEnv) targetNodes(ctx context.Context, c *cobra.Command, cl *client.Client) ([]string, error) {
	if f := c.Flags().Lookup(flagBrokerAddr); f != nil && f.Changed {
		return []string{f.Value.String()}, nil
	}
	return admin.Nodes(ctx, cl)
}

func (e *adminEnv) brokerConfigGet() *cobra.Command {
	var asJSON bool
	var c *cobra.Command
	c = e.command("get", "Each node's settings (-b: one node) with their scope: group (runtime, through raft), node (runtime, that node), restart (mqadmin's getBrokerConfig)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			nodes, err := e.targetNodes(ctx, c, cl)
			if err != nil {
				return err
			}
			all := map[string][]cluster.AdminSetting{}
			for _, n := range nodes {
				if all[n], err = admin.Settings(ctx, cl, n); err != nil {
					return err
				}
			}
			if asJSON {
				return printJSON(out, all)
			}
			for _, n := range nodes {
				fmt.Fprintf(out, "============%s============\n", n)
				for _, s := range all[n] {
					fmt.Fprintf(out, "%-32s = %-24s %s\n", s.Key, s.Value, s.Scope)
				}
			}
			return nil
		})
	return c
}

func (e *adminEnv) brokerConfigUpdate() *cobra.Command {
	var key, value string
	var c *cobra.Command
	c = e.command("update", "Change a runtime setting: group-wide ones (brokerPermission, autoCreateTopicEnable) through raft; a node's own (logLevel) on -b's node or every node (mqadmin's updateBrokerConfig)",
		cobra.NoArgs, nil, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			nodes, err := e.targetNodes(ctx, c, cl)
			if err != nil {
				return err
			}
			set, err := admin.Settings(ctx, cl, nodes[0])
			if err != nil {
				return err
			}
			i := slices.IndexFunc(set, func(s cluster.AdminSetting) bool { return s.Key == key })
			if i < 0 {
				var names []string
				for _, s := range set {
					names = append(names, s.Key)
				}
				msg := fmt.Sprintf("unknown broker setting %q", key)
				if s := closest(key, names); len(s) > 0 {
					msg += "; did you mean " + strings.Join(s, " or ") + "?"
				}
				return usageError(errors.New(msg))
			}
			scope, done, err := admin.UpdateSetting(ctx, cl, nodes, key, value)
			if err != nil {
				return err
			}
			if scope == cluster.ScopeGroup {
				fmt.Fprintf(out, "update broker config success, group-wide (through raft): %s=%s\n", key, value)
			}
			for _, n := range done {
				fmt.Fprintf(out, "update broker config success, %s: %s=%s\n", n, key, value)
			}
			return nil
		})
	c.Flags().StringVarP(&key, "key", "k", "", "setting name (getBrokerConfig lists them)")
	// mqadmin's -v is the value: a local --verbose (without -v) keeps the
	// root's -v off this command.
	c.Flags().StringVarP(&value, "value", "v", "", "new value")
	c.Flags().Bool("verbose", false, "")
	_ = c.Flags().MarkHidden("verbose")
	_ = c.MarkFlagRequired("key")
	_ = c.MarkFlagRequired("value")
	return c
}

func (e *adminEnv) writePerm(op string) *cobra.Command {
	var name string
	code, use, short, field := cluster.CodeWipeWritePermOfBroker, "wipe", "Refuse sends to the group (brokerPermission 4, through raft; mqadmin's wipeWritePerm)", "wipeTopicCount"
	if op == "add" {
		code, use, short, field = cluster.CodeAddWritePermOfBroker, "add", "Accept sends again (brokerPermission 6, through raft; mqadmin's addWritePerm)", "addTopicCount"
	}
	c := e.command(use, short, cobra.NoArgs, nil, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
		if name == "" {
			v, err := admin.ClusterList(ctx, cl)
			if err != nil {
				return err
			}
			name = v.Broker
		}
		resp, err := cl.AdminRequest(ctx, code, map[string]string{"brokerName": name}, nil, true)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s write perm of broker[%s] in the group's log OK, %s topics\n", use, name, resp.ExtFields[field])
		return nil
	})
	c.Flags().StringVarP(&name, "broker-name", "b", "", "the group's broker name (default: the group --addr reaches)")
	return c
}

func (e *adminEnv) maintenance(code int32) *cobra.Command {
	use, short := "clean-expired-cq", "Delete consume-queue and index files below the start of each node's commitlog (mqadmin's cleanExpiredCQ)"
	if code == cluster.CodeDeleteExpiredCommitLog {
		use, short = "delete-expired-commitlog", "Delete each node's expired commitlog segments now, whatever the hour (mqadmin's deleteExpiredCommitLog)"
	}
	var asJSON bool
	var c *cobra.Command
	c = e.command(use, short, cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
		nodes, err := e.targetNodes(ctx, c, cl)
		if err != nil {
			return err
		}
		var all []cluster.AdminMaintenance
		for _, n := range nodes {
			body, err := cl.NodeRequest(ctx, n, code, map[string]string{remoting.FieldAdminView: remoting.AdminViewJSON}, nil)
			if err != nil {
				return err
			}
			var v cluster.AdminMaintenance
			if err := remoting.DecodeJSON(body, &v); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			all = append(all, v)
		}
		if asJSON {
			return printJSON(out, all)
		}
		for i, v := range all {
			fmt.Fprintf(out, "%s (node %d): success, %d %s deleted\n", nodes[i], v.Node, v.Deleted, v.What)
		}
		return nil
	})
	return c
}

func (e *adminEnv) offsetClone() *cobra.Command {
	var src, dst, topic string
	c := e.command("clone", "Copy a group's committed offsets in a topic to another group (each queue through raft; mqadmin's cloneGroupOffset)",
		cobra.NoArgs, nil, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			pr, err := admin.ConsumerProgress(ctx, cl, src, topic)
			if err != nil {
				return explain(err, topic, src)
			}
			pc := cl.NewPullConsumer(dst)
			n := 0
			for _, q := range pr.Queues {
				if !q.Committed {
					continue
				}
				if err := pc.ResetOffset(ctx, q.Topic, q.QueueID, q.ConsumerOffset); err != nil {
					return fmt.Errorf("%w (%d queues copied before)", err, n)
				}
				n++
			}
			if n == 0 {
				return fmt.Errorf("group %s has no committed offset in %s", src, topic)
			}
			fmt.Fprintf(out, "clone group offset success: %s -> %s, topic %s, %d queues\n", src, dst, topic, n)
			return nil
		})
	c.Flags().StringVarP(&src, "src-group", "s", "", "group to copy from")
	c.Flags().StringVarP(&dst, "dest-group", "d", "", "group to copy to")
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic")
	for _, f := range []string{"src-group", "dest-group", "topic"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func (e *adminEnv) offsetSkip() *cobra.Command {
	var group, topic string
	var asJSON bool
	c := e.command("skip", "Move the group's offsets in the topic to each queue's end, skipping the backlog (one raft entry; mqadmin's skipAccumulatedMessage)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			v, err := admin.ResetOffset(ctx, cl, group, topic, -1, true)
			if err != nil {
				return explain(err, topic, group)
			}
			if asJSON {
				return printJSON(out, v)
			}
			var rows [][]string
			for _, q := range v.Queues {
				rows = append(rows, []string{strconv.Itoa(int(q.QueueID)), strconv.FormatInt(q.Old, 10), strconv.FormatInt(q.New, 10)})
			}
			return table(out, "#QID\t#Old Offset\t#New Offset", rows)
		})
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group")
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic")
	_ = c.MarkFlagRequired("group")
	_ = c.MarkFlagRequired("topic")
	return c
}

func (e *adminEnv) aclUpdate() *cobra.Command {
	var ak, sk, white, topicPerms, groupPerms, defTopic, defGroup string
	var isAdmin bool
	c := e.command("update", "Create or update an ACL account (replicated; mqadmin's updateAclConfig)",
		cobra.NoArgs, nil, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			a := admin.Account{AccessKey: ak, SecretKey: sk, WhiteRemoteAddress: white, Admin: isAdmin, DefaultTopicPerm: defTopic,
				DefaultGroupPerm: defGroup, TopicPerms: topicPerms, GroupPerms: groupPerms}
			if err := admin.UpdateAccount(ctx, cl, a); err != nil {
				return err
			}
			fmt.Fprintf(out, "create or update plain access config to %s success.\n", strings.Join(strings.Split(e.addrs, ","), ", "))
			return nil
		})
	f := c.Flags()
	f.StringVarP(&ak, "accessKey", "a", "", "the account's access key (at least 7 characters)")
	f.StringVarP(&sk, "secretKey", "s", "", "its secret key (at least 7 characters; required for a new account)")
	f.StringVarP(&white, "whiteRemoteAddress", "w", "", "an address pattern that needs no signature")
	f.BoolVarP(&isAdmin, "admin", "m", false, "an admin account")
	f.StringVarP(&defTopic, "defaultTopicPerm", "i", "", "DENY, PUB, SUB or PUB|SUB for topics not listed")
	f.StringVarP(&defGroup, "defaultGroupPerm", "u", "", "DENY, PUB, SUB or PUB|SUB for groups not listed")
	f.StringVarP(&topicPerms, "topicPerms", "t", "", "topic=PERM, comma-separated")
	f.StringVarP(&groupPerms, "groupPerms", "g", "", "group=PERM, comma-separated")
	_ = c.MarkFlagRequired("accessKey")
	return c
}

func (e *adminEnv) aclDelete() *cobra.Command {
	var ak string
	c := e.command("delete", "Delete an ACL account (replicated; mqadmin's deleteAclConfig)",
		cobra.NoArgs, nil, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if err := admin.DeleteAccount(ctx, cl, ak); err != nil {
				return err
			}
			fmt.Fprintf(out, "delete plain access config %s success.\n", ak)
			return nil
		})
	c.Flags().StringVarP(&ak, "accessKey", "a", "", "the account's access key")
	_ = c.MarkFlagRequired("accessKey")
	return c
}

func (e *adminEnv) aclWhiteAddrs() *cobra.Command {
	var addrs, path string
	c := e.command("white-addrs", "Replace the global white list of addresses that need no signature (replicated; mqadmin's updateGlobalWhiteAddr)",
		cobra.NoArgs, nil, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			ext := map[string]string{"globalWhiteAddrs": addrs, "aclFileFullPath": path}
			if _, err := cl.AdminRequest(ctx, acl.UpdateGlobalWhiteAddrsConfig, ext, nil, true); err != nil {
				return err
			}
			fmt.Fprintf(out, "update global white remote addresses to %s success.\n", addrs)
			return nil
		})
	c.Flags().StringVarP(&addrs, "globalWhiteRemoteAddresses", "g", "", "address patterns, comma-separated")
	c.Flags().StringVarP(&path, "aclFileFullPath", "p", "plain_acl.yml", "accepted for mqadmin's sake: the group's ACL is one, in its log")
	_ = c.MarkFlagRequired("globalWhiteRemoteAddresses")
	return c
}

// statRow is a line of statsAll.
type statRow struct {
	Topic        string `json:"topic"`
	Group        string `json:"consumerGroup,omitempty"`
	Accumulation int64  `json:"accumulation"`
	InMsg24Hour  int64  `json:"inMsg24Hour"`
}

func (e *adminEnv) statsAll() *cobra.Command {
	var topic string
	var asJSON bool
	c := e.command("stats", "Per topic and consumer group: backlog and messages stored in the last 24 hours (mqadmin's statsAll; TPS columns are not kept)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			tcs, err := admin.Topics(ctx, cl)
			if err != nil {
				return err
			}
			offs, err := admin.GroupOffsets(ctx, cl)
			if err != nil {
				return err
			}
			day := time.Now().Add(-24 * time.Hour)
			rows := []statRow{}
			for _, tc := range tcs {
				if topic != "" && tc.TopicName != topic {
					continue
				}
				st, err := admin.TopicStatus(ctx, cl, tc.TopicName)
				if err != nil {
					return explain(err, tc.TopicName, "")
				}
				var in int64
				for _, q := range st.Queues {
					o, err := cl.SearchOffset(ctx, tc.TopicName, q.QueueID, day)
					if err != nil {
						return err
					}
					in += q.MaxOffset - min(max(o, q.MinOffset), q.MaxOffset)
				}
				n := 0
				for _, g := range slices.Sorted(maps.Keys(offs)) {
					qs, ok := offs[g][tc.TopicName]
					if !ok {
						continue
					}
					var acc int64
					for _, q := range st.Queues {
						if o, ok := qs[q.QueueID]; ok && q.MaxOffset > o {
							acc += q.MaxOffset - o
						}
					}
					rows = append(rows, statRow{Topic: tc.TopicName, Group: g, Accumulation: acc, InMsg24Hour: in})
					n++
				}
				if n == 0 {
					rows = append(rows, statRow{Topic: tc.TopicName, InMsg24Hour: in})
				}
			}
			if topic != "" && len(rows) == 0 {
				return fmt.Errorf("topic %q does not exist", topic)
			}
			if asJSON {
				return printJSON(out, rows)
			}
			var rs [][]string
			for _, r := range rows {
				rs = append(rs, []string{r.Topic, r.Group, strconv.FormatInt(r.Accumulation, 10), strconv.FormatInt(r.InMsg24Hour, 10)})
			}
			return table(out, "#Topic\t#Consumer Group\t#Accumulation\t#InMsg24Hour", rs)
		})
	c.Flags().StringVarP(&topic, "topic", "t", "", "only this topic")
	return c
}

func (e *adminEnv) sendMessage() *cobra.Command {
	var topic, body, keys, tags string
	var queue int32
	var asJSON bool
	c := e.command("send", "Send one message and print where it landed (mqadmin's sendMessage)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			m := &client.Message{Topic: topic, QueueID: queue, Body: []byte(body), Tags: tags}
			if keys != "" {
				m.Keys = strings.Split(keys, ",")
			}
			r, err := cl.NewProducer(client.ProducerOptions{Group: "raftmq-admin"}).Send(ctx, m)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(out, r)
			}
			v, err := admin.ClusterList(ctx, cl)
			if err != nil {
				return err
			}
			return table(out, "#Broker Name\t#QID\t#Send Result\t#MsgId", [][]string{{v.Broker, strconv.Itoa(int(r.QueueID)), "SEND_OK", r.MsgID}})
		})
	f := c.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.StringVarP(&body, "body", "p", "", "message body")
	f.StringVarP(&keys, "keys", "k", "", "KEYS, comma-separated")
	f.StringVarP(&tags, "tags", "c", "", "TAGS")
	f.Int32VarP(&queue, "qid", "i", -1, "queue id (-1: any)")
	_ = c.MarkFlagRequired("topic")
	_ = c.MarkFlagRequired("body")
	return c
}

func (e *adminEnv) consumeMessage() *cobra.Command {
	var topic, group string
	var queue int32
	var offset int64
	var count int
	var asJSON bool
	c := e.command("consume", "Print messages of a topic from a queue offset, committing nothing (mqadmin's consumeMessage)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			st, err := admin.TopicStatus(ctx, cl, topic)
			if err != nil {
				return explain(err, topic, "")
			}
			pc := cl.NewPullConsumer(group)
			var ms []*client.MessageExt
			for _, q := range st.Queues {
				if queue >= 0 && q.QueueID != queue {
					continue
				}
				off := q.MinOffset
				if offset >= 0 {
					off = max(offset, q.MinOffset)
				}
				for off < q.MaxOffset && len(ms) < count {
					pr, err := pc.Pull(ctx, topic, q.QueueID, off, min(32, count-len(ms)), 0)
					if err != nil {
						return err
					}
					if len(pr.Messages) == 0 {
						break
					}
					ms = append(ms, pr.Messages...)
					off = pr.NextBeginOffset
				}
			}
			if len(ms) == 0 {
				fmt.Fprintln(out, "no matched msg")
				return nil
			}
			return printMessages(out, ms[:min(len(ms), count)], asJSON)
		})
	f := c.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.StringVarP(&group, "group", "g", toolsGroup, "the group the pulls are made as (its offsets do not move)")
	f.Int32VarP(&queue, "qid", "i", -1, "only this queue (-1: every queue)")
	f.Int64VarP(&offset, "offset", "o", -1, "queue offset to start at (-1: each queue's first)")
	f.IntVarP(&count, "count", "c", 128, "most messages to print")
	_ = c.MarkFlagRequired("topic")
	return c
}

func (e *adminEnv) printMsg() *cobra.Command {
	var topic, begin, end string
	var max int
	var asJSON bool
	c := e.command("print", "Print a topic's messages stored between -b and -e, oldest first (mqadmin's printMsg)",
		cobra.NoArgs, &asJSON, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			now := time.Now()
			var b, en time.Time
			if begin != "" {
				ms, err := parseResetTime(begin, now)
				if err != nil {
					return usageError(err)
				}
				b = time.UnixMilli(ms)
			}
			if end != "" {
				ms, err := parseResetTime(end, now)
				if err != nil {
					return usageError(err)
				}
				en = time.UnixMilli(ms)
			}
			ms, err := admin.Messages(ctx, cl, admin.Query{Topic: topic, Begin: b, End: en, Max: max})
			if err != nil {
				return explain(err, topic, "")
			}
			if len(ms) == 0 {
				fmt.Fprintln(out, "no message")
				return nil
			}
			return printMessages(out, ms, asJSON)
		})
	f := c.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic")
	f.StringVarP(&begin, "beginTimestamp", "b", "", "from this time (now, Unix ms, yyyy-MM-dd#HH:mm:ss:SSS or RFC 3339; default: the start)")
	f.StringVarP(&end, "endTimestamp", "e", "", "until this time (default: now)")
	f.IntVar(&max, "max", 1000, "most messages to print")
	_ = c.MarkFlagRequired("topic")
	return c
}
