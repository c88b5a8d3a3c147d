package importrules

// layout is the house: its floors from the ground up, each a group of
// packages (paths inside the module). A package may import packages on
// its own floor or lower ones, never higher; a product package never
// imports a lab package. The binary stands on top and links both: the
// broker and the tools (`raftmq jepsen`, `raftmq bench`) are one program.
// Every package of the module stands on exactly one floor.
var layout = []floor{
	{"ground: the message model and seams", product, []string{
		"message", "internal/vfs", "internal/failpoint", "internal/certs", "internal/chart"}},
	{"formats and the wire", product, []string{
		"protocol/remoting", "protocol/grpc/rmqpb", "protocol/grpc/h2", "commitlog", "consumequeue", "index", "offsets",
		"store/schedule", "store/txn", "store/pop", "raftlog/transport", "cluster/filter"}},
	{"a node's parts", product, []string{
		"acl", "cluster/locks", "cluster/membership", "namesrv", "raftlog", "store"}},
	{"the broker node and the client", product, []string{"cluster", "client"}},
	{"the admin API's typed reads", product, []string{"client/admin"}},
	{"the web console", product, []string{"console"}},
	{"lab: records, faults and test seams", lab, []string{
		"internal/doccheck", "internal/importrules", "internal/vfs/vfstest", "jepsen/history", "jepsen/netfault"}},
	{"lab: checkers, reports and groups", lab, []string{
		"jepsen/checker", "jepsen/report", "harness/localgroup", "harness/testgroup"}},
	{"lab: the chaos harness, the benchmark, end-to-end tests", lab, []string{
		"jepsen", "harness/bench", "client/e2e"}},
	{"the binary", binary, []string{"cmd/raftmq"}},
}
