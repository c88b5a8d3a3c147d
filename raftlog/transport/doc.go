// Package transport carries raft messages between the nodes of a raft group
// over TCP, or over mutual TLS when Config.TLS is set.
//
// # Streams
//
// Every node dials one outbound stream to each peer and writes all of its
// messages for that peer into it; the peer's accepted end is read-only. A
// pair of nodes therefore shares two streams, one per direction, and a
// stream never carries a reply. The dialer learns that the acceptor closed
// the stream (refused handshake, corrupt frame, restart) because a read on
// its end returns; it then reconnects with exponential backoff and jitter.
//
// Goroutines, all started through Transport.goFunc and waited for by Close:
//
//	accept    Listener.Accept; starts a reader per inbound connection
//	reader    one per inbound stream: handshake, then frames -> Handler
//	writer    one per peer (peer.run): dial, handshake, drain the queue
//	          into a bufio.Writer, flush when the queue is empty, back off
//	watcher   one per outbound stream: blocks in Read; its return (EOF,
//	          reset) marks the stream dead
//
// Send only enqueues into a bounded per-peer channel; it never waits for
// the network. While a peer's stream is down, or its queue is full, Send
// drops the message and calls Config.Unreachable (raft retransmits).
// SendNow is for a caller with nothing else to do: a message whose peer
// has nothing queued or being written (plain TCP, not a snapshot, small
// entries) is written on the caller's goroutine with one non-blocking
// write under the peer's write-side lock, which the writer holds while it
// writes; bytes the socket does not take are finished by the writer
// before anything else, so frames stay whole and in order.
//
// # Handshake
//
// The dialer writes a fixed 32-byte header once, before the first frame;
// integers are big-endian:
//
//	| off | size | field                                          |
//	|   0 |    4 | magic "RMQT" (0x524D5154)                      |
//	|   4 |    2 | protocol version, currently 2                  |
//	|   6 |    2 | reserved, must be zero                         |
//	|   8 |    8 | cluster ID                                     |
//	|  16 |    8 | sender's raft ID                               |
//	|  24 |    8 | receiver's raft ID as the sender believes it   |
//
// The acceptor closes the connection (and logs why) if the magic, version,
// reserved bytes, cluster ID or receiver ID do not match; it never writes
// anything back. The cluster ID names the raft group (cluster.Start
// decides it and records it with the raft state); a refusal for another
// cluster is logged at Error with both IDs (once a minute per host, then
// at Debug) and counted (Transport.ClusterMismatches). A transport whose
// Config.ClusterID is zero, a node joining a group that was not told the
// ID, dials nobody until the first stream it accepts names the cluster;
// it records that ID (Config.LearnClusterID) and refuses any other from
// then on. Version 1 streams (nodes not yet upgraded; frames without the
// cluster ID) are still accepted; a version-1 acceptor refuses version 2,
// so during a rolling upgrade an upgraded node reaches the old ones only
// once they are upgraded too (a quorum of either keeps the group going). Any sender ID of the cluster is accepted, also one not
// (yet) in Peers. A newer stream from the same sender replaces the older
// one, which is closed and its reader awaited, so at most one reader per
// sender calls Handler at a time and a half-dead stream (peer crashed
// without a FIN) lasts only until the peer redials.
//
// # TLS
//
// With Config.TLS every stream is TLS before anything else is sent: the
// dialer is the TLS client, the acceptor the server, and both present a
// certificate and verify the other's against the group's CA
// (tls.RequireAndVerifyClientCert on the acceptor). The acceptor runs its
// handshake within the handshake timeout, before reading the 32-byte
// header; a peer whose certificate the CA did not sign, or that speaks
// plaintext, is closed there and logged (at Warn once a minute per host,
// then at Debug), so it can neither join nor inject messages. The header
// and frames below then travel inside TLS unchanged. Any certificate of
// the CA is accepted for any sender ID: the CA is the trust boundary.
//
// # Frames
//
// After the handshake the stream is a sequence of frames:
//
//	| off | size | field                                          |
//	|   0 |    4 | payload length n                               |
//	|   4 |    4 | CRC-32C (Castagnoli) of the payload            |
//	|   8 |    8 | cluster ID, the same as the handshake's        |
//	|  16 |    n | payload: one raftpb.Message, protobuf encoded  |
//
// All integers are big-endian. n must not exceed Config.MaxFrame. A frame
// that is too large, fails its CRC, or does not unmarshal closes the stream;
// the dialer reconnects and raft recovers whatever was lost. A frame whose
// cluster ID is not the acceptor's closes the stream too, and is logged
// and counted like a handshake of another cluster: every message, not
// only the stream, says which group it belongs to. (Version 1 frames lack
// the cluster ID: their header is the first 8 bytes.)
//
// The handshake and frame layouts are the wire protocol: they must not
// change without bumping the version.
package transport
