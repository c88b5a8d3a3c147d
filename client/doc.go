// Package client is the Go client library of raftmq: it talks to one raft
// group of raftmq brokers over RocketMQ's remoting protocol
// (internal/remoting). The CLI, the benchmarks and the chaos harness use
// it, and applications consume through its PushConsumer.
//
// # Pieces
//
//	Client        connection pool (one remoting.Conn per node address,
//	              redialled when dead), route cache, leader tracking,
//	              admin commands (topics, status, membership), and the
//	              dispatch of broker-initiated requests
//	              (NOTIFY_CONSUMER_IDS_CHANGED) to push consumers
//	Producer      Send, SendBatch, SendAsync (pipelined, windowed, optionally
//	              auto-batched), Flush; SendSelect (a QueueSelector picks
//	              the queue: HashSelector, RoundRobinSelector) and
//	              SendOneway (no answer, at most once)
//	PullConsumer  Pull/PullFrom/PullWith, CommitOffset, FetchOffset
//	PushConsumer  a consumer-group member: heartbeats, rebalancing with an
//	              AllocateStrategy, a long-polling pull per owned queue,
//	              concurrent or orderly consumption, offset persistence
//	              (pushconsumer.go, rebalance.go, queueworker.go,
//	              offsetstore.go)
//	AllocateStrategy  pure functions sharing a topic's queues among a
//	              group's clients (allocate.go)
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
// Every PushConsumer adds its own goroutines:
//
//	run          owns the table of owned queues: rebalances at Start, every
//	             RebalanceInterval, on a NOTIFY_CONSUMER_IDS_CHANGED (the
//	             connection's request goroutine only signals it) and soon
//	             after a queue could not be started; renews orderly locks;
//	             starts and drops queue workers
//	heartbeat    HEART_BEAT to every known node every HeartbeatInterval
//	persist      writes changed offsets every PersistInterval
//	per queue    a pull goroutine (finds the start offset, then long-polls)
//	             and, if orderly, a consume goroutine
//	per batch    a concurrent batch's callback runs on a goroutine of its
//	             own, at most ConsumeGoroutines at once; a local retry
//	             waits on a timer goroutine
//	per drop     a dropped queue's finish: waits for its worker, persists
//	             its offset, unlocks it (orderly), then tells run, which
//	             does not restart the queue before that
//
// A queue's cache (pulled, unconsumed messages) is guarded by its worker's
// mutex: the pull goroutine adds, callbacks remove. The offset store has
// its own mutex and is only ever taken after a worker's.
//
// # Consumption models
//
// Clustering (the default) shares each subscribed topic, and the group's
// retry topic %RETRY%<group>, among the group's consumers: every consumer
// asks the leader for the group's sorted client ids
// (GET_CONSUMER_LIST_BY_GROUP), sorts the topic's queues, and takes the
// share its AllocateStrategy gives it. All consumers compute the same
// split from the same list; while lists differ (a heartbeat not yet seen
// everywhere) two consumers may briefly own one queue. Offsets live on the
// broker: QUERY_CONSUMER_OFFSET at a queue's start, UPDATE_CONSUMER_OFFSET
// every PersistInterval, when a queue is dropped and at Shutdown, and in
// every pull's commitOffset field. A queue without a stored offset starts
// as ConsumeFrom says (RocketMQ's rules: the last offset, 0 for retry
// topics; the first offset; or a timestamp search).
//
// Broadcasting gives every consumer every queue; offsets live in a local
// JSON file written atomically (temporary file, fsync, rename, directory
// fsync), read at Start. A failed broadcast batch is logged and skipped,
// as RocketMQ does.
//
// Concurrent consumption hands batches of a queue to callbacks at once,
// up to ConsumeGoroutines running. The offset committed for a queue is the
// smallest offset still pulled and unconsumed (or the next pull offset if
// none is), so it never passes a message whose callback has not succeeded,
// whatever order callbacks finish in. A batch whose callback returns
// ConsumeRetryLater stays unconsumed, holding the offset back, and is
// delivered again after RetryDelay, as often as it takes (with
// ReconsumeTimes counting the deliveries, and an error logged past
// MaxReconsumeTimes). This local retry is the fallback RocketMQ's clients
// use when sending a message back fails; raftmq's brokers do not yet serve
// CONSUMER_SEND_MSG_BACK (36) nor keep a dead-letter queue, and once they
// do, failed messages should go back to the broker instead of blocking
// their queue's offset. Pulling a queue stops while QueueCacheSize messages
// wait, or while the pull offset is MaxSpan past the oldest unconsumed one.
//
// Orderly consumption runs one batch at a time per queue, in queue order;
// a batch that asks to retry is delivered again after SuspendDelay before
// anything behind it, indefinitely (logged past MaxReconsumeTimes, until
// the broker has a dead-letter queue). In clustering a consumer locks a
// queue on the leader (LOCK_BATCH_MQ) before pulling it, renews its locks
// every LockInterval, and drops a queue whose renewal is refused or whose
// lock is older than LockMaxAge; a dropped queue is persisted and then
// unlocked (UNLOCK_BATCH_MQ), so that its next owner resumes exactly where
// it stopped. Shutdown stops pulling, waits for running callbacks,
// persists every offset, unregisters the client (UNREGISTER_CLIENT) and,
// if orderly, unlocks its queues.
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
