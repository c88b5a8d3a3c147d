package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/commitlog"
)

// brokerCmd returns a fresh `raftmq broker` command inside its root (so
// inherited flags exist), its flags parsed from args.
func brokerCmd(t *testing.T, args ...string) *cobra.Command {
	t.Helper()
	return subcommand(t, "broker", args...)
}

// subcommand returns a fresh `raftmq NAME` command inside its root, its
// flags parsed from args.
func subcommand(t *testing.T, name string, args ...string) *cobra.Command {
	t.Helper()
	root := newRoot()
	cmd, _, err := root.Find([]string{name})
	require.NoError(t, err)
	require.NoError(t, cmd.ParseFlags(args))
	return cmd
}

// The commands with a config file.
var configCommands = []string{"broker", "namesrv", "cluster"}

// brokerFromFile builds a broker's configuration from a config file and
// command-line arguments, as `raftmq broker --config FILE ARGS` would.
func brokerFromFile(t *testing.T, yamlText string, args ...string) (cluster.Config, error) {
	t.Helper()
	var f brokerFlags
	root := newRoot()
	cmd := &cobra.Command{Use: "broker", RunE: func(*cobra.Command, []string) error { return nil }}
	root.AddCommand(cmd)
	f.register(cmd)
	require.NoError(t, cmd.ParseFlags(args))
	if err := applyConfig(cmd, []byte(yamlText), brokerAliases()); err != nil {
		return cluster.Config{}, err
	}
	return f.config(slog.New(slog.DiscardHandler))
}

const twoPeers = "peers: [1=127.0.0.1:10911/127.0.0.1:10921, 2=127.0.0.1:10912/127.0.0.1:10922]\n"

func TestConfigFileSetsFlagsAndCommandLineWins(t *testing.T) {
	file := "id: 1\n" + twoPeers + "flush: async\nsegment-size: 8388608\nfile-reserved-time: 48h\ndelete-when: \"02;14\"\n" +
		"disk-clean-ratio: 0.6\ndisk-force-clean-ratio: 0.7\ndisk-full-ratio: 0.95\nauto-create-topics: false\n"
	cfg, err := brokerFromFile(t, file)
	require.NoError(t, err)
	require.Equal(t, uint64(1), cfg.ID)
	require.Len(t, cfg.Peers, 2)
	require.Equal(t, commitlog.FlushAsync, cfg.Flush)
	require.Equal(t, int64(8<<20), cfg.SegmentSize)
	require.False(t, cfg.AutoCreateTopics)
	r := cfg.Store.Retention
	require.Equal(t, 48*time.Hour, r.FileReservedTime)
	require.Equal(t, []int{2, 14}, r.DeleteWhen)
	require.Equal(t, []float64{0.6, 0.7, 0.95}, []float64{r.CleanRatio, r.ForceRatio, r.FullRatio})

	// The command line wins, key by key, lists included.
	cfg, err = brokerFromFile(t, file, "--flush", "sync", "--id", "2", "--peer", "2=127.0.0.1:10912/127.0.0.1:10922", "--disk-full-ratio", "0.9")
	require.NoError(t, err)
	require.Equal(t, commitlog.FlushSync, cfg.Flush)
	require.Equal(t, uint64(2), cfg.ID)
	require.Equal(t, 0.9, cfg.Store.Retention.FullRatio)
	require.Equal(t, int64(8<<20), cfg.SegmentSize, "keys the command line does not give still come from the file")
	require.Len(t, cfg.Peers, 2, "--peers from the file, --peer from the command line: both")

	// Without a file, RocketMQ's defaults.
	cfg, err = brokerFromFile(t, "", "--id", "1", "--peer", "1=127.0.0.1:10911/127.0.0.1:10921")
	require.NoError(t, err)
	r = cfg.Store.Retention
	require.Equal(t, 72*time.Hour, r.FileReservedTime)
	require.Equal(t, []int{4}, r.DeleteWhen)
	require.Equal(t, []float64{0.75, 0.85, 0.90}, []float64{r.CleanRatio, r.ForceRatio, r.FullRatio})
}

func TestConfigFileErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"id: 1\nsegment-sise: 1024\n", `line 2: unknown key "segment-sise" (did you mean "segment-size"?)`},
		{"filereservedtime: 48\n", `unknown key "filereservedtime" (did you mean "fileReservedTime"?)`},
		{"id: 1\nid: 2\n", `line 2: key "id" given twice`},
		{"disk-clean-ratio: 0.5\ndiskMaxUsedSpaceRatio: 60\n", `key "diskMaxUsedSpaceRatio" sets disk-clean-ratio, which "disk-clean-ratio" already set`},
		{"id: [1, 2]\n", "id: takes one value, not a list"},
		{"id: {a: 1}\n", "id: want a value or a list"},
		{"id:\n", "id: no value"},
		{"id: one\n", `id: "one": strconv.ParseUint`},
		{"- id\n", "want a mapping"},
		{"diskMaxUsedSpaceRatio: 0.75\n", "percentage above 1 and below 100"},
		{"flushDiskType: SYNC\n", "want SYNC_FLUSH or ASYNC_FLUSH"},
	} {
		_, err := brokerFromFile(t, c.file)
		require.ErrorContains(t, err, c.want, c.file)
	}
	// Values that parse but do not make sense are refused by the broker's
	// validation, as on the command line.
	base := "id: 1\n" + twoPeers
	for _, c := range []struct{ file, want string }{
		{"disk-clean-ratio: 0.9\n", "clean ratio ≤ force-clean ratio ≤ full ratio"},
		{"disk-full-ratio: 1.2\n", "between 0 and 1"},
		{"delete-when: \"25\"\n", "want hours 00-23"},
		{"delete-when: \"04;x\"\n", "want hours 00-23"},
		{"file-reserved-time: -1h\n", "must be positive"},
	} {
		_, err := brokerFromFile(t, base+c.file)
		require.ErrorContains(t, err, c.want, c.file)
	}
}

func TestConfigRocketMQNames(t *testing.T) {
	cfg, err := brokerFromFile(t, "id: 1\n"+twoPeers+"fileReservedTime: 48\ndeleteWhen: \"03;15\"\ndiskMaxUsedSpaceRatio: 70\n"+
		"diskSpaceCleanForciblyRatio: 80\ndiskSpaceWarningLevelRatio: 95\nflushDiskType: ASYNC_FLUSH\nbrokerName: b1\n"+
		"brokerClusterName: c1\ntransactionTimeOut: 3000\ntimerMaxDelaySec: 60\nmappedFileSizeCommitLog: 4194304\n")
	require.NoError(t, err)
	r := cfg.Store.Retention
	require.Equal(t, 48*time.Hour, r.FileReservedTime)
	require.Equal(t, []int{3, 15}, r.DeleteWhen)
	require.Equal(t, []float64{0.7, 0.8, 0.95}, []float64{r.CleanRatio, r.ForceRatio, r.FullRatio})
	require.Equal(t, commitlog.FlushAsync, cfg.Flush)
	require.Equal(t, "b1", cfg.BrokerName)
	require.Equal(t, "c1", cfg.ClusterName)
	require.Equal(t, 3*time.Second, cfg.TxnTimeout)
	require.Equal(t, time.Minute, cfg.MaxTimerDelay)
	require.Equal(t, int64(4<<20), cfg.SegmentSize)
	flags := configFlags(brokerCmd(t))
	for name, a := range brokerAliases() {
		require.Contains(t, flags, a.flag, "alias %s names a flag", name)
	}
}

// testValue returns a value unlike f's default, in the file's syntax and
// as command-line arguments.
func testValue(t *testing.T, f *pflag.Flag) (yamlValue string, args []string) {
	a, b := "1=127.0.0.1:1001/127.0.0.1:1002", "2=127.0.0.1:1003/127.0.0.1:1004"
	switch f.Value.Type() {
	case "bool":
		v := fmt.Sprint(f.DefValue != "true")
		return v, []string{"--" + f.Name + "=" + v}
	case "int", "int64", "uint64":
		return "7", []string{"--" + f.Name, "7"}
	case "float64":
		return "0.5", []string{"--" + f.Name, "0.5"}
	case "duration":
		return "3s", []string{"--" + f.Name, "3s"}
	case "string":
		return "x-" + f.Name, []string{"--" + f.Name, "x-" + f.Name}
	case "stringArray", "stringSlice":
		return "[" + a + ", " + b + "]", []string{"--" + f.Name, a, "--" + f.Name, b}
	}
	t.Fatalf("flag --%s: type %s has no test value", f.Name, f.Value.Type())
	return "", nil
}

// Every flag of `raftmq broker`, hidden ones included, and of the other
// commands with a config file, is settable from the file, with the same
// outcome as on the command line.
func TestConfigSetsEveryFlag(t *testing.T) {
	require.Greater(t, len(configFlags(brokerCmd(t))), 40)
	for _, cmdName := range configCommands {
		for name, f := range configFlags(subcommand(t, cmdName)) {
			yv, args := testValue(t, f)
			fromFile := subcommand(t, cmdName)
			require.NoError(t, applyConfig(fromFile, []byte(name+": "+yv+"\n"), nil), name)
			fromCLI := subcommand(t, cmdName, args...)
			got, want := configFlags(fromFile)[name].Value.String(), configFlags(fromCLI)[name].Value.String()
			require.Equal(t, want, got, "%s --%s", cmdName, name)
			require.NotEqual(t, f.DefValue, got, "%s --%s: the test value is its default", cmdName, name)
		}
	}
}

// Every command's example lists its flags at their defaults.
func TestConfigExamplesListEveryFlag(t *testing.T) {
	for _, name := range configCommands {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetArgs([]string{name, "--print-config"})
		require.NoError(t, root.Execute())
		listed := map[string]bool{}
		for _, m := range exampleKey.FindAllStringSubmatch(out.String(), -1) {
			listed[m[1]] = true
		}
		for flag, f := range configFlags(subcommand(t, name)) {
			require.Equal(t, !f.Hidden, listed[flag], "%s --%s in the example", name, flag)
		}
		loaded := subcommand(t, name)
		require.NoError(t, applyConfig(loaded, []byte(exampleKey.ReplaceAllString(out.String(), "$1: $2")), nil), name)
		for flag, f := range configFlags(loaded) {
			require.Equal(t, f.DefValue, f.Value.String(), "%s --%s after loading the uncommented example", name, flag)
		}
	}
}

var exampleKey = regexp.MustCompile(`(?m)^# ([a-z][a-z0-9-]*): (.*)$`)

// The example lists every flag but the hidden ones at its default: with
// every setting uncommented it loads and changes nothing. The copy in docs/
// is the command's output.
func TestConfigExampleIsCompleteAndCurrent(t *testing.T) {
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"broker", "--print-config"})
	require.NoError(t, root.Execute())
	example := out.String()

	cmd := brokerCmd(t)
	listed := map[string]bool{}
	for _, m := range exampleKey.FindAllStringSubmatch(example, -1) {
		require.False(t, listed[m[1]], "%s listed twice", m[1])
		listed[m[1]] = true
	}
	for name, f := range configFlags(cmd) {
		require.Equal(t, !f.Hidden, listed[name], "--%s (hidden: %v) in the example", name, f.Hidden)
	}
	require.True(t, listed["file-reserved-time"] && listed["disk-full-ratio"] && listed["peers"] && listed["verbose"])
	for _, a := range []string{"fileReservedTime: 72", "deleteWhen: \"04\"", "diskMaxUsedSpaceRatio: 75", "diskSpaceWarningLevelRatio: 90"} {
		require.Contains(t, example, a)
	}

	uncommented := exampleKey.ReplaceAllString(example, "$1: $2")
	loaded := brokerCmd(t)
	require.NoError(t, applyConfig(loaded, []byte(uncommented), brokerAliases()))
	for name, f := range configFlags(loaded) {
		require.Equal(t, f.DefValue, f.Value.String(), "--%s after loading the uncommented example", name)
	}

	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "broker.example.yaml"))
	require.NoError(t, err)
	require.Equal(t, example, string(docs), "docs/broker.example.yaml is stale: go run ./cmd/raftmq broker --print-config > docs/broker.example.yaml")
}

// A real broker process started from a config file runs with its
// retention settings: /status shows what the store holds.
func TestBrokerStartsFromConfigFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	addrs := make([]string, 3)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs[i] = l.Addr().String()
		require.NoError(t, l.Close())
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "broker.yaml")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf("# one-node group\nid: 1\ndata: %s\npeers: [\"1=%s/%s\"]\nhttp: %s\n"+
		"segment-size: 4194304\nfileReservedTime: 24\ndelete-when: \"03;15\"\ndisk-clean-ratio: 0.5\n"+
		"diskSpaceCleanForciblyRatio: 60\ndisk-full-ratio: 0.97\n", filepath.Join(dir, "n1"), addrs[0], addrs[1], addrs[2])), 0o644))

	cmd := exec.Command(os.Args[0], "broker", "--config", file, "--disk-full-ratio", "0.96")
	cmd.Env = append(os.Environ(), "RAFTMQ_TEST_MAIN=1")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	require.NoError(t, cmd.Start())
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	var st cluster.NodeStatus
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addrs[2] + "/status")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err == nil && st.Status.Leader == 1 {
				break
			}
		}
		require.True(t, time.Now().Before(deadline), "no status from the broker: %v\n%s", err, logs.String())
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, cluster.RetentionStatus{FileReservedTime: "24h0m0s", DeleteWhen: []int{3, 15}, CleanRatio: 0.5, ForceRatio: 0.6, FullRatio: 0.96}, st.Retention)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), logs.String())
	require.True(t, strings.Contains(logs.String(), "stopped cleanly"), logs.String())
}

// The README's example config file loads.
func TestConfigREADMEExampleLoads(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Configuration\n")
	require.True(t, ok)
	_, block, ok := strings.Cut(section, "```yaml\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	cfg, err := brokerFromFile(t, block, "--id", "2")
	require.NoError(t, err)
	require.Len(t, cfg.Peers, 3)
	require.Equal(t, 48*time.Hour, cfg.Store.Retention.FileReservedTime)
	require.Equal(t, []int{4, 16}, cfg.Store.Retention.DeleteWhen)
}

// YAML anchors work as values.
func TestConfigAnchors(t *testing.T) {
	cfg, err := brokerFromFile(t, "id: &one 1\npreferred-leader: *one\npeers: &members [1=127.0.0.1:10911/127.0.0.1:10921]\n")
	require.NoError(t, err)
	require.Equal(t, uint64(1), cfg.PreferredLeader)
	require.Len(t, cfg.Peers, 1)
}

// The cluster offers the broker's own flags, declared once: the same
// names, defaults and help, and passes to every node exactly those given
// (as --name=value, lists one element each), after --config FILE with
// --broker-config. A flag it sets per node is not offered.
func TestClusterBrokerArgs(t *testing.T) {
	parse := func(args ...string) (*clusterFlags, error) {
		var f clusterFlags
		cmd := &cobra.Command{Use: "cluster"}
		f.register(cmd)
		if err := cmd.Flags().Parse(args); err != nil {
			return nil, err
		}
		return &f, nil
	}
	f, err := parse()
	require.NoError(t, err)
	none, err := f.brokerArgs()
	require.NoError(t, err)
	require.Empty(t, none, "flags not given are the broker's defaults: nothing to pass")

	broker := &cobra.Command{Use: "broker"}
	var bf brokerFlags
	bf.register(broker)
	clusterCmd := &cobra.Command{Use: "cluster"}
	var offeredBy clusterFlags
	offeredBy.register(clusterCmd)
	offered := 0
	broker.Flags().VisitAll(func(b *pflag.Flag) {
		c := clusterCmd.Flags().Lookup(b.Name)
		if slices.Contains(clusterSetsBrokerFlags(), b.Name) {
			if b.Name != "data" { // the cluster's own --data is the parent of the nodes'
				require.Nil(t, c, "--%s is set by the cluster per node", b.Name)
			}
			return
		}
		offered++
		require.NotNil(t, c, "--%s of the broker is not a flag of the cluster", b.Name)
		require.Equal(t, b.DefValue, c.DefValue, "--%s", b.Name)
		require.Equal(t, b.Usage, c.Usage, "--%s", b.Name)
	})
	require.Greater(t, offered, 30)
	for _, name := range clusterSetsBrokerFlags() {
		require.NotNil(t, broker.Flags().Lookup(name), "clusterSetsBrokerFlags names --%s, which the broker does not have", name)
	}

	f, err = parse("--flush", "async", "--tick=20ms", "--segment-size", "4096", "--disk-full-ratio", "0.95", "--console=false", "--nodes", "5")
	require.NoError(t, err)
	args, err := f.brokerArgs()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"--flush=async", "--tick=20ms", "--segment-size=4096", "--disk-full-ratio=0.95", "--console=false"}, args)
	// What a node gets is what its broker accepts.
	require.NoError(t, checkBrokerArgs(append([]string{"--id", "1", "--peer", "1=127.0.0.1:1/127.0.0.1:2"}, args...)))
	var node brokerFlags
	nodeCmd := &cobra.Command{Use: "broker"}
	node.register(nodeCmd)
	require.NoError(t, nodeCmd.Flags().Parse(args))
	require.Equal(t, "async", node.flush)
	require.Equal(t, 20*time.Millisecond, node.tick)
	require.Equal(t, int64(4096), node.segmentSize)
	require.Equal(t, 0.95, node.ret.full)
	require.False(t, node.console.on)

	_, err = parse("--peer", "1=a/b")
	require.ErrorContains(t, err, "unknown flag: --peer")

	file := filepath.Join(t.TempDir(), "broker.yaml")
	require.NoError(t, os.WriteFile(file, []byte("flush: async\n"), 0o644))
	f, err = parse("--broker-config", file, "--tick", "50ms")
	require.NoError(t, err)
	args, err = f.brokerArgs()
	require.NoError(t, err)
	require.Equal(t, []string{"--config", file, "--tick=50ms"}, args)

	// A broker key in the cluster's own config file is passed on like
	// the flag; the command line wins over the file.
	cmdFile := filepath.Join(t.TempDir(), "cluster.yaml")
	require.NoError(t, os.WriteFile(cmdFile, []byte("nodes: 5\nflush: async\nmax-client-conns: 50\n"), 0o644))
	var cf clusterFlags
	ccmd := &cobra.Command{Use: "cluster"}
	cf.register(ccmd)
	require.NoError(t, ccmd.Flags().Parse([]string{"--max-client-conns", "70"}))
	require.NoError(t, applyConfigFile(ccmd, cmdFile, nil))
	args, err = cf.brokerArgs()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"--flush=async", "--max-client-conns=70"}, args)
	require.Equal(t, 5, cf.nodes)

	f, err = parse("--broker-config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.NoError(t, err)
	_, err = f.brokerArgs()
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A local group started with --broker-config runs every node with the
// file's settings, and with the broker flags given to the cluster over
// them: each node's /status shows both.
func TestClusterStartsNodesFromBrokerConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "broker.yaml")
	require.NoError(t, os.WriteFile(file, []byte("disk-full-ratio: 0.93\nfileReservedTime: 12\n"), 0o644))
	base := freeBasePort(t)
	cmd := exec.Command(os.Args[0], "cluster", "--demo", "0", "--restart=false", "--data", filepath.Join(dir, "data"),
		"--base-port", fmt.Sprint(base), "--broker-config", file, "--file-reserved-time", "30h")
	cmd.Env = append(os.Environ(), "RAFTMQ_TEST_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	}()
	for i := 0; i < 3; i++ {
		var st cluster.NodeStatus
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/status", base+20+i))
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
				if err == nil && st.Status.Leader != 0 {
					break
				}
			}
			require.True(t, time.Now().Before(deadline), "node %d: no status: %v\n%s", i+1, err, out.String())
			time.Sleep(50 * time.Millisecond)
		}
		require.Equal(t, 0.93, st.Retention.FullRatio, "node %d", i+1)
		require.Equal(t, "30h0m0s", st.Retention.FileReservedTime, "node %d: the cluster's flag overrides the file", i+1)
	}
}

// A RocketMQ broker.conf (Java properties) sets the flags raftmq knows by
// their RocketMQ names or flag names, lists the keys it does not know
// without failing, lets the command line win, and refuses a bad value.
func TestConfigBrokerConfProperties(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "broker.conf")
	require.NoError(t, os.WriteFile(conf, []byte(`# RocketMQ broker.conf
brokerClusterName = ClusterA
brokerName=broker-a
brokerId = 0
deleteWhen=04;16
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = ASYNC_FLUSH
storePathRootDir=`+dir+`/store
diskMaxUsedSpaceRatio=80
! a comment
id: 1
peer=1=127.0.0.1:10911/127.0.0.1:10921
`), 0o644))
	require.True(t, isProperties(conf, nil))
	require.True(t, isProperties("x.yaml", []byte("a=b\n")))
	require.False(t, isProperties("x.yaml", []byte("a: b=c\n")))

	var f brokerFlags
	root := newRoot()
	var stderr bytes.Buffer
	cmd := &cobra.Command{Use: "broker", RunE: func(*cobra.Command, []string) error { return nil }}
	cmd.SetErr(&stderr)
	root.AddCommand(cmd)
	f.register(cmd)
	require.NoError(t, cmd.ParseFlags([]string{"--broker-name", "from-cli"}))
	require.NoError(t, applyConfigFile(cmd, conf, brokerAliases()))
	require.Contains(t, stderr.String(), "ignoring 2 keys raftmq does not use: brokerId, brokerRole")
	cfg, err := f.config(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, "ClusterA", cfg.ClusterName)
	require.Equal(t, "from-cli", cfg.BrokerName, "the command line wins")
	require.Equal(t, commitlog.FlushAsync, cfg.Flush)
	require.Equal(t, filepath.Join(dir, "store"), cfg.Dir)
	require.Equal(t, 48*time.Hour, cfg.Store.Retention.FileReservedTime)
	require.Equal(t, []int{4, 16}, cfg.Store.Retention.DeleteWhen)
	require.Equal(t, 0.80, cfg.Store.Retention.CleanRatio)
	require.Equal(t, "127.0.0.1:10931", cfg.HTTPAddr, "--http auto: the client port + 20")

	bad := filepath.Join(dir, "bad.conf")
	require.NoError(t, os.WriteFile(bad, []byte("flushDiskType=SOMETIMES\n"), 0o644))
	err = applyConfigFile(brokerCmd(t), bad, brokerAliases())
	require.ErrorContains(t, err, "line 1: flushDiskType: want SYNC_FLUSH or ASYNC_FLUSH")
	require.NoError(t, os.WriteFile(bad, []byte("just words\n"), 0o644))
	require.ErrorContains(t, applyConfigFile(brokerCmd(t), bad, brokerAliases()), "want key=value")
}

// --http is on by default, on the client port + 20; "" turns it off.
func TestBrokerHTTPDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "127.0.0.1:10931"},
		{[]string{"--http", ""}, ""},
		{[]string{"--http", "0.0.0.0:9000"}, "0.0.0.0:9000"},
	} {
		var f brokerFlags
		cmd := &cobra.Command{Use: "broker"}
		f.register(cmd)
		require.NoError(t, cmd.ParseFlags(append([]string{"--id", "1", "--peer", "1=127.0.0.1:10911/127.0.0.1:10921"}, tc.args...)))
		cfg, err := f.config(slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		require.Equal(t, tc.want, cfg.HTTPAddr, "%v", tc.args)
	}
	_, err := autoHTTPAddr("127.0.0.1:65530")
	require.ErrorContains(t, err, "is not a port")
}
