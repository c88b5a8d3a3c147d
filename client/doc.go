// Package client is the Go client library of raftmq: it talks to one raft
// group of raftmq brokers over RocketMQ's remoting protocol
// (internal/remoting). The CLI, the benchmarks and the chaos harness use
// it; it is meant to grow into a full consumer-group client.
//
// # Pieces
//
//	Client        connection pool (one remoting.Conn per node address,
//	              redialled when dead), route cache, leader tracking,
//	              admin commands (topics, status, membership)
//	Producer      Send, SendBatch, SendAsync (pipelined, windowed, optionally
//	              auto-batched), Flush
//	PullConsumer  Pull/PullFrom/PullWith, CommitOffset, FetchOffset
//
// # Leader following
//
// A group answers GET_ROUTEINFO_BY_TOPIC on every node with one broker
// name whose brokerAddrs["0"] is the ready leader (absent during an
// election) and the other nodes under their node ids. The Client asks every
// known node at once and takes the first answer naming a leader. Writes go
// to the believed leader; followers forward them, or answer
// SERVICE_NOT_AVAILABLE with a remark naming the leader, which the client
// follows at once. A transport failure towards the leader, or
// SERVICE_NOT_AVAILABLE without a name, makes the next attempt refresh the
// route first. Pulls go to the leader too, or to any node if it is
// unknown; followers serve committed data.
//
// # Outcomes of writes
//
// Every write ends in one of three ways, which the chaos harness records:
//
//   - success;
//   - a definite failure: the write did not take effect (a dial failed,
//     the broker answered SERVICE_NOT_AVAILABLE, MESSAGE_ILLEGAL, ...);
//   - an indeterminate failure, errors.Is(err, ErrIndeterminate): the
//     request reached a connection and its answer was lost (timeout,
//     connection closed), or the broker answered SYSTEM_ERROR. It may have
//     taken effect.
//
// A send whose attempts include an indeterminate one and no success is
// reported as indeterminate even if the last attempt failed definitely: the
// earlier attempt may still commit. Retrying a send is safe because every
// message carries a UNIQ_KEY that stays the same across attempts and the
// broker deduplicates by it, answering a repeat with the original's queue
// offset (SendResult.Duplicate).
//
// # Goroutines
//
// The Client starts none of its own beyond those of its connections (a
// reader and a writer each, see internal/remoting) and one per node during
// a route fetch. An async send's first attempt runs in the SendAsync
// caller; its response is handled on the connection's reader goroutine,
// which also calls the user's callback; retries run on timer goroutines
// (time.AfterFunc), because they may block on a route fetch or a dial.
// With ProducerOptions.AutoBatch, a pack that waited for a request slot is
// sent from a goroutine of its own for the same reason.
//
// # Auto-batching
//
// ProducerOptions.AutoBatch packs SendAsync messages into batch requests
// without a linger timer: at most AutoBatchRequests packed requests are in
// flight, a message finding a free slot goes out at once (alone, as a plain
// send), and messages arriving while every slot is taken wait in one pack
// per topic, queue and context, sent oldest first as slots free. At low
// load nothing waits; under load a request carries as many messages as
// arrived during one round trip, bounded by AutoBatchBytes. A pack is one
// SEND_BATCH_MESSAGE: stored whole at consecutive offsets of one queue, or
// not at all, and retried whole with the same UNIQ_KEYs.
package client
