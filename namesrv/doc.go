// Package namesrv is raftmq's name server, compatible with RocketMQ's: the
// place clients ask which brokers serve a topic, and brokers tell what
// they serve. It also has the broker's side, the Registrar.
//
// # Model
//
// A cluster is a set of broker names. A broker name (in raftmq, one raft
// group of three nodes) has addresses by broker id: id 0 is the master,
// the only address producers write to; in raftmq it is the raft leader,
// and the other nodes register under their node ids. A topic's route lists,
// for every broker name that serves the topic, its queues (read and write
// queue counts, permission) and the broker name's addresses. Queues come
// from the master's registration only; what a follower reports is ignored.
//
// Name servers do not talk to each other. Every broker registers with
// every name server, and clients ask any of them.
//
// # Registration
//
// A broker sends REGISTER_BROKER every 30 s and at once when something
// changes (a new leader, a topic created or deleted), with its topic table
// and a data version. A registration lives 120 s (Config.Expiry, or the
// broker's heartbeatTimeoutMillis) without renewal; a scan every few
// seconds drops the expired ones. It ends at once when the connection it
// came on closes, or when the broker sends UNREGISTER_BROKER. A broker
// name left without addresses leaves every route; while any address is
// left, its queues stay, so consumers keep reading from followers while a
// new leader is elected (producers skip a broker name without id 0).
//
// The rules follow RocketMQ's name server:
//
//   - An address registering under a new id of its broker name (a
//     follower that became leader, or the reverse) leaves its old id
//     first; an address that held the claimed id is displaced.
//   - Stale leader fencing: raftmq brokers send their raft term as
//     dataVersion.stateVersion. A registration claiming an id (in practice
//     id 0) that a live registration at another address holds with a
//     higher state version is refused and changes nothing, so a deposed
//     leader that still runs cannot take the master's place back from its
//     successor. The fence holds only while the successor's registration
//     lives: the name server keeps no memory of terms, so a group whose
//     term restarts (a new data directory) can register again.
//   - A master's queues are taken when its data version changed, when it
//     was not the master before, or for topics its broker name has no
//     queues of; so an admin's WIPE_WRITE_PERM_OF_BROKER lasts until the
//     broker's configuration changes, as in RocketMQ.
//   - raftmq brokers mark their registrations as carrying the whole topic
//     table (an ext field of raftmq's own), and then a topic the master
//     leaves out loses that broker name's queues: a topic deleted on the
//     broker leaves the routes. Apache brokers send some registrations
//     with only the topics just created, so theirs never remove topics.
//
// # Concurrency
//
// One mutex (Server.mu) guards the route table, the key-value store and
// the set of watched connections; every request handler takes it briefly,
// and nothing blocks while holding it. Goroutines: the remoting server's
// (one per connection and per request), the scan loop in Serve, and one
// watcher per connection that has registered a broker, which waits for
// the connection to close and then drops its registrations. The clock is
// Config.Now, so expiry is tested without waiting.
//
// The Registrar has one goroutine that owns its connections and state; it
// registers with every name server at start, every interval, and at once
// after Trigger, sending to the name servers in parallel.
package namesrv
