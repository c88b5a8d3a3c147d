package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// mqadmin's habits, applied to the whole command tree once it is built
// (finishCommands):
//
//   - every command that talks to a group (it has --addr) also takes
//     -n/--namesrv-addr, mqadmin's name server list: a name server, or any
//     node of a group (a node answers GET_BROKER_CLUSTER_INFO for its own
//     group as a name server would). The group's nodes are found there.
//     $NAMESRV_ADDR does the same when neither --addr nor $RAFTMQ_ADDR
//     is given; $RAFTMQ_ADDR is --addr's default.
//   - admin commands also take -b/--broker-addr (mqadmin's broker address:
//     a node of the group to ask) and -c/--cluster (the cluster whose group
//     -n resolves to), where the command has no -b or -c of its own.
//   - an unknown subcommand or flag exits with status 2 and names the
//     closest known one.

// Names of the flags finishCommands adds.
const (
	flagNamesrvAddr = "namesrv-addr"
	flagBrokerAddr  = "broker-addr"
	flagClusterName = "cluster"
)

// annotationGroupOnly marks a command that only groups others: it runs
// only to print its help or refuse an unknown subcommand.
const annotationGroupOnly = "raftmq.groupOnly"

// envAddrs is --addr's default: $RAFTMQ_ADDR, else the local three-node
// group.
func envAddrs() string {
	if a := strings.TrimSpace(os.Getenv("RAFTMQ_ADDR")); a != "" {
		return a
	}
	return defaultAddrs()
}

// finishCommands walks the tree under root adding mqadmin's flags and the
// unknown-command answer to every command that lacks them.
func finishCommands(root *cobra.Command) {
	var walk func(c *cobra.Command, inAdmin bool)
	walk = func(c *cobra.Command, inAdmin bool) {
		inAdmin = inAdmin || c.Name() == "admin"
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			c.Args = cobra.ArbitraryArgs
			c.RunE = unknownCommand
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[annotationGroupOnly] = "true"
		}
		fl := c.Flags()
		if fl.Lookup("addr") != nil {
			if fl.Lookup(flagNamesrvAddr) == nil {
				short := "n"
				if fl.ShorthandLookup("n") != nil {
					short = ""
				}
				fl.StringP(flagNamesrvAddr, short, "", "name servers ADDR;ADDR, or any node of the group: the group's nodes are asked of it (mqadmin's -n; default $NAMESRV_ADDR when neither --addr nor $RAFTMQ_ADDR is given)")
			}
			if inAdmin {
				if fl.Lookup(flagBrokerAddr) == nil && fl.ShorthandLookup("b") == nil {
					fl.StringP(flagBrokerAddr, "b", "", "a node's client address to ask (mqadmin's broker address; instead of --addr)")
				}
				if fl.Lookup(flagClusterName) == nil && fl.ShorthandLookup("c") == nil {
					fl.StringP(flagClusterName, "c", "", "the cluster whose group -n resolves to (mqadmin's cluster name)")
				}
			}
		}
		for _, s := range c.Commands() {
			walk(s, inAdmin)
		}
	}
	walk(root, false)
}

// unknownCommand is the RunE of a command that only groups others: no
// argument prints its help; an argument is an unknown subcommand, a usage
// error naming the closest known ones.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return c.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	var names []string
	for _, s := range c.Commands() {
		names = append(names, s.Name())
		names = append(names, s.Aliases...)
	}
	if s := closest(args[0], names); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError(fmt.Errorf("%s (see %s --help)", msg, c.CommandPath()))
}

// closest returns the names nearest to s: a case-insensitive match, else
// those within an edit distance of a third of s's length (at least 2), or
// that s is a prefix of, best first, at most three.
func closest(s string, names []string) []string {
	ls := strings.ToLower(s)
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, n := range names {
		ln := strings.ToLower(n)
		d := editDistance(ls, ln)
		switch {
		case ln == ls:
			return []string{n}
		case d <= max(2, len(s)/3):
		case strings.HasPrefix(ln, ls) && len(ls) >= 3:
			d = len(ln) - len(ls)
		default:
			continue
		}
		cs = append(cs, cand{n, d})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for _, c := range cs {
		if !slices.Contains(out, c.name) && len(out) < 3 {
			out = append(out, c.name)
		}
	}
	return out
}

// flagError makes a flag that does not parse a usage error, naming the
// closest known flag of an unknown one.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var names []string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if s := closest(name, names); len(s) > 0 {
			msg += "; did you mean --" + strings.Join(s, " or --") + "?"
		}
	} else if strings.HasPrefix(msg, "unknown shorthand flag") {
		var shorts []string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Shorthand != "" && !f.Hidden {
				shorts = append(shorts, "-"+f.Shorthand+" (--"+f.Name+")")
			}
		})
		if len(shorts) > 0 {
			sort.Strings(shorts)
			msg += "; " + c.CommandPath() + " takes " + strings.Join(shorts, ", ")
		}
	}
	return usageError(errors.New(msg))
}

// resolveTarget points a command's --addr at the group its mqadmin flags
// name: -b (a node) as is, or the nodes -n (or $NAMESRV_ADDR) lists for
// the group, of cluster -c if given. A group named by -b NAME or -c
// CLUSTER is checked against the nodes the command will ask.
func resolveTarget(c *cobra.Command) (err error) {
	fl := c.Flags()
	addr := fl.Lookup("addr")
	if addr == nil {
		return nil
	}
	brokerName, clusterName := "", ""
	if cf := fl.Lookup(flagClusterName); cf != nil && cf.Changed && cf.Value.Type() == "string" {
		clusterName = cf.Value.String()
	}
	defer func() {
		if err == nil && (brokerName != "" || clusterName != "") {
			err = checkGroup(c.Context(), strings.Split(addr.Value.String(), ",")[0], brokerName, clusterName)
		}
	}()
	if b := fl.Lookup(flagBrokerAddr); b != nil && b.Changed {
		v := b.Value.String()
		if !strings.Contains(v, ":") {
			// mqadmin's -b is a broker name in some commands
			// (queryMsgByOffset, consumeMessage, sendMessage): the group's
			// name.
			brokerName = v
		} else {
			if addr.Changed {
				return usageError(fmt.Errorf("give --addr or -b/--%s, not both", flagBrokerAddr))
			}
			return fl.Set("addr", v)
		}
	}
	ns := ""
	if n := fl.Lookup(flagNamesrvAddr); n != nil && n.Changed {
		if addr.Changed {
			return usageError(fmt.Errorf("give --addr or -n/--%s, not both", flagNamesrvAddr))
		}
		ns = n.Value.String()
	} else if !addr.Changed && os.Getenv("RAFTMQ_ADDR") == "" {
		ns = os.Getenv("NAMESRV_ADDR")
	}
	if strings.TrimSpace(ns) == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.Context(), 10*time.Second)
	defer cancel()
	nodes, err := groupFromNamesrv(ctx, namesrv.ParseAddrs(ns), clusterName, brokerName)
	var several *severalGroupsError
	if errors.As(err, &several) {
		if f := fl.Lookup("namesrv"); f != nil && f.Value.Type() == "string" && !f.Changed {
			// clusterList: every group the name server knows.
			return fl.Set("namesrv", several.ns)
		}
	}
	if err != nil {
		return err
	}
	return fl.Set("addr", strings.Join(nodes, ","))
}

// groupFromNamesrv asks the first of nss that answers for the clusters and
// groups it knows and returns the nodes of the one group (of cluster and
// named brokerName, each if not "") it names.
func groupFromNamesrv(ctx context.Context, nss []string, clusterName, brokerName string) ([]string, error) {
	if len(nss) == 0 {
		return nil, usageError(errors.New("-n: no name server address"))
	}
	var ci remoting.ClusterInfo
	var errs []error
	for _, ns := range nss {
		var err error
		if ci, err = clusterInfoOf(ctx, ns); err == nil {
			errs = nil
			break
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("no name server answered: %w", errors.Join(errs...))
	}
	names := slices.Sorted(mapKeys(ci.BrokerAddrTable))
	if clusterName != "" {
		in, ok := ci.ClusterAddrTable[clusterName]
		if !ok {
			return nil, fmt.Errorf("cluster %q is unknown to %s (it knows %s)", clusterName, nss[0], strings.Join(slices.Sorted(mapKeys(ci.ClusterAddrTable)), ", "))
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(in, n) })
	}
	if brokerName != "" {
		names = slices.DeleteFunc(names, func(n string) bool { base, _, _ := strings.Cut(n, "@"); return base != brokerName })
	}
	// A follower's write-only failover route (name@id) is the same group.
	groups := slices.Compact(slices.Collect(func(yield func(string) bool) {
		for _, n := range names {
			base, _, _ := strings.Cut(n, "@")
			if !yield(base) {
				return
			}
		}
	}))
	switch len(groups) {
	case 0:
		return nil, fmt.Errorf("%s knows no broker group%s%s", nss[0], map[bool]string{true: " of cluster " + clusterName}[clusterName != ""],
			map[bool]string{true: " named " + brokerName}[brokerName != ""])
	case 1:
	default:
		return nil, &severalGroupsError{ns: nss[0], groups: groups}
	}
	var nodes []string
	for _, n := range names {
		for _, a := range ci.BrokerAddrTable[n].BrokerAddrs {
			if !slices.Contains(nodes, a) {
				nodes = append(nodes, a)
			}
		}
	}
	sort.Strings(nodes)
	return nodes, nil
}

// clusterInfoOf asks a name server or node for GET_BROKER_CLUSTER_INFO,
// signed and over TLS as the command's flags say.
func clusterInfoOf(ctx context.Context, addr string) (remoting.ClusterInfo, error) {
	var ci remoting.ClusterInfo
	cl, err := newClient(ctx, addr, nil)
	if err != nil {
		return ci, err
	}
	defer cl.Close()
	body, err := cl.NodeRequest(ctx, addr, remoting.GetBrokerClusterInfo, nil, nil)
	if err != nil {
		return ci, fmt.Errorf("name server %s: %w", addr, err)
	}
	if err := remoting.DecodeJSON(body, &ci); err != nil {
		return ci, fmt.Errorf("name server %s: %w", addr, err)
	}
	return ci, nil
}

// checkGroup checks that the group the node at addr belongs to is named
// name and is of cluster clusterName (each if not "").
func checkGroup(ctx context.Context, addr, name, clusterName string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ci, err := clusterInfoOf(ctx, addr)
	if err != nil {
		return err
	}
	if clusterName != "" {
		if _, ok := ci.ClusterAddrTable[clusterName]; !ok {
			return fmt.Errorf("cluster %q: the group at %s is of cluster %s", clusterName, addr, strings.Join(slices.Sorted(mapKeys(ci.ClusterAddrTable)), ", "))
		}
	}
	if name == "" {
		return nil
	}
	for n := range ci.BrokerAddrTable {
		if base, _, _ := strings.Cut(n, "@"); base == name {
			return nil
		}
	}
	return fmt.Errorf("broker %q: the group at %s is %s", name, addr, strings.Join(slices.Sorted(mapKeys(ci.BrokerAddrTable)), ", "))
}

// severalGroupsError: a name server knows several groups and the command
// named none.
type severalGroupsError struct {
	ns     string
	groups []string
}

func (e *severalGroupsError) Error() string {
	return fmt.Sprintf("%s knows several groups (%s): name one with -b (its name, or a node's address) or --addr", e.ns, strings.Join(e.groups, ", "))
}
