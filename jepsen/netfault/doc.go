// Package netfault is the network layer of the chaos harness: it puts the
// harness in a private network namespace when it can, runs one TCP proxy per
// directed link between broker nodes, and injects partitions, latency and
// connection resets.
//
// # Addresses
//
// Nodes are numbered 1..n. Node i listens on, and dials from, the loopback
// address 127.0.0.(10+i) (see [Net.NodeIP]). The harness gives every broker,
// for each peer and each port kind ("raft", "client"), the address of a proxy
// created by [Net.AddLink]. Proxies listen on 127.0.0.1, so rules on node
// addresses never cut the harness off from a proxy, and they dial the real
// destination from the sending node's address, so IP-level rules on
// (source node, destination node) apply to the proxied bytes too.
//
// # Directed pairs
//
// Every fault is set on a directed pair (from, to) and applies to every byte
// that travels from node "from" to node "to", whichever side opened the TCP
// connection: on a link from→to those are the bytes the client writes, and on
// a link to→from they are the bytes the server writes back. A cut (from, to)
// therefore behaves like the nft rule "ip saddr from ip daddr to drop", which
// also drops the replies "from" sends on connections "to" opened. New
// connections on a link are held while either direction of its pair is cut,
// as a TCP handshake cannot complete when either direction drops packets.
//
// # Modes
//
// In netns mode (a private network namespace, as root or as an unprivileged
// user with a user+net namespace) partitions are nft rules in the table
// "raftmq_jepsen" and are mirrored on the proxies. In proxy mode (no
// namespace) the proxies are the only mechanism. Either way, traffic the nodes
// send around the proxies is cut only in netns mode.
//
// # Entering a namespace
//
// A command that runs the harness calls [Reexec] before it has any side
// effects, and exits with the returned code when it reports the command as
// handled. The command then runs again in a child process, inside a fresh
// namespace, where [Enter] returns the mode to pass to [New]:
//
//	handled, code, err := netfault.Reexec(requested, os.Args)
//	if err != nil {
//		return err
//	}
//	if handled {
//		os.Exit(code)
//	}
//	mode, err := netfault.Enter(requested)
//	if err != nil {
//		return err
//	}
//	nw, err := netfault.New(mode, 3, logger)
//
// # What proxies cannot do
//
// A proxy terminates TCP, so it cannot drop packets: dropping bytes from a
// stream would corrupt the framing of the protocol inside it. Loss is modelled
// as resetting the connection that carries a chunk (see [Net.SetLoss]), and
// latency is added per chunk, in order (see [Net.SetDelay]). The kernel here
// has no netem, so the proxies are the only source of latency.
package netfault
