// Package client is the Go client library of raftmq: it talks to one raft
// group of raftmq brokers over RocketMQ's remoting protocol
// (protocol/remoting). The CLI, the benchmarks and the chaos harness use
// it, and applications consume through its PushConsumer.
//
// # Pieces
//
//	Client        connection pool (one remoting.Conn per node address,
//	              redialled when dead, signing requests when the client
//	              has credentials), route cache, leader tracking,
//	              admin commands (topics, status, membership), and the
//	              dispatch of broker-initiated requests:
//	              NOTIFY_CONSUMER_IDS_CHANGED to push consumers,
//	              CHECK_TRANSACTION_STATE to transaction producers
//	Producer      Send, SendBatch, SendAsync (pipelined, windowed, optionally
//	              auto-batched), Flush; SendSelect (a QueueSelector picks
//	              the queue: HashSelector, RoundRobinSelector) and
//	              SendOneway (no answer, at most once)
//	TransactionProducer  SendMessageInTransaction (half message, local
//	              transaction, END_TRANSACTION), heartbeats of its
//	              producer group, answers to the broker's check-backs
//	              (txproducer.go)
//	PullConsumer  Pull/PullFrom/PullWith, CommitOffset, FetchOffset
//	PushConsumer  a consumer-group member: heartbeats, rebalancing with an
//	              AllocateStrategy, a long-polling pull per owned queue,
//	              concurrent or orderly consumption, retries through the
//	              broker, offset persistence (pushconsumer.go,
//	              rebalance.go, queueworker.go, sendback.go,
//	              offsetstore.go)
//	SimpleConsumer  pop consumption (RocketMQ 5): Receive hides a batch
//	              for an invisible time, Ack, ChangeInvisibleDuration;
//	              no local state (simpleconsumer.go)
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
// reader and a writer each, see protocol/remoting) and one per node during
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
//	             own, at most ConsumeGoroutines at once, which then sends
//	             its failed messages back to the broker; a local retry
//	             waits on a timer goroutine
//	per drop     a dropped queue's finish: waits for its worker, persists
//	             its offset, unlocks it (orderly), then tells run, which
//	             does not restart the queue before that
//
// A queue's cache (pulled, unconsumed messages) is guarded by its worker's
// mutex: the pull goroutine adds, callbacks remove. The offset store has
// its own mutex and is only ever taken after a worker's. Sending messages
// back happens outside the mutex.
//
// A TransactionProducer adds a heartbeat goroutine (HEART_BEAT naming its
// producer group to every known node every HeartbeatInterval); each
// CHECK_TRANSACTION_STATE is answered on the goroutine the connection
// starts for the request, which calls CheckLocalTransaction.
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
// whatever order callbacks finish in, or that the broker has not taken
// back.
//
// Orderly consumption runs one batch at a time per queue, in queue order;
// a batch that asks to retry is delivered again after SuspendDelay before
// anything behind it, up to MaxReconsumeTimes times per message (see
// below). In clustering a consumer locks a queue on the leader
// (LOCK_BATCH_MQ) before pulling it, renews its locks every LockInterval,
// and drops a queue whose renewal is refused or whose lock is older than
// LockMaxAge; a dropped queue is persisted and then unlocked
// (UNLOCK_BATCH_MQ), so that its next owner resumes exactly where it
// stopped. Shutdown stops pulling, waits for running callbacks, persists
// every offset, unregisters the client (UNREGISTER_CLIENT) and, if
// orderly, unlocks its queues.
//
// # Retries through the broker
//
// A concurrent clustering consumer whose callback returns
// ConsumeRetryLater sends each message of the batch back, as RocketMQ's
// clients do:
//
//  1. CONSUMER_SEND_MSG_BACK (36) to the node the message was pulled
//     from (following a leader that node names): the message's commit log
//     offset, the group, delay level 0 (the broker picks 3 +
//     reconsumeTimes: 10 s, 30 s, 1 min, ...), the message's id and
//     (restored) topic as originMsgId and originTopic, and
//     MaxReconsumeTimes. The broker stores a copy in %RETRY%<group> with
//     reconsumeTimes + 1, or in %DLQ%<group> once MaxReconsumeTimes is
//     reached.
//  2. If that fails, a plain send of a copy to %RETRY%<group> (producer
//     group CLIENT_INNER_PRODUCER): the properties plus ORIGIN_MESSAGE_ID,
//     RETRY_TOPIC (the original topic, unless already set) and DELAY = 3 +
//     ReconsumeTimes (at most 18), without TRAN_MSG, header reconsumeTimes
//     + 1 and maxReconsumeTimes. Like RocketMQ's copy it keeps its
//     UNIQ_KEY (the consumer gets it back under the same msgId); raftmq's
//     brokers deduplicate by topic, UNIQ_KEY and reconsume count, so each
//     retry is stored.
//  3. If that fails too, the message stays unconsumed, holding its
//     queue's offset back, and is delivered again locally after
//     RetryDelay, with ReconsumeTimes counting the deliveries (logged at
//     error level past MaxReconsumeTimes), as often as it takes.
//
// A message the broker took counts as consumed: the queue's offset may
// pass it at once. The consumer subscribes to %RETRY%<group> itself and
// hands retried messages to the callback with their original topic and
// the broker's ReconsumeTimes. A queue dropped while its callback ran
// sends nothing back: its next owner gets the batch again. Delivery is at
// least once: a send-back whose answer was lost, then retried as a plain
// send, may store two copies.
//
// An orderly clustering consumer retries locally first, as RocketMQ's
// checkReconsumeTimes does: when a batch fails, each of its messages whose
// ReconsumeTimes has reached MaxReconsumeTimes is sent back with delay
// level -1, straight to %DLQ%<group> (with the same fallback to a %RETRY%
// send, whose reconsumeTimes then exceeds the maximum, which makes a
// RocketMQ broker choose the dead-letter queue), and counts as consumed;
// the other messages, and one the broker did not take, get ReconsumeTimes
// + 1 and are delivered again after SuspendDelay.
//
// Broadcasting consumers do not retry, as in RocketMQ: a failed batch is
// logged and counts as consumed (concurrent), or is retried locally
// without limit (orderly).
//
// # Transactions
//
// A TransactionProducer sends a message in two phases, as RocketMQ's
// TransactionMQProducer. SendMessageInTransaction sends a half message
// (properties TRAN_MSG=true and PGROUP=<producer group>, sysFlag
// TRANSACTION_PREPARED 0x4, never auto-batched), which the broker stores
// but does not deliver; it then calls the TransactionListener's
// ExecuteLocalTransaction and reports the LocalTransactionState with
// END_TRANSACTION (37): producer group, the half message's queue offset
// (tranStateTableOffset) and commit log offset (decoded from the send
// answer's offsetMsgId), commitOrRollback (8 commit, 12 rollback, 0
// unknown), fromTransactionCheck=false, and its UNIQ_KEY as msgId and
// transactionId. Commit and rollback go as requests to the leader: a
// SUCCESS answer, or none within RequestTimeout, counts as done (the
// connection is kept); a refusal is returned as an error. Unknown goes
// one-way: nothing changes and the broker asks later.
//
// The producer heartbeats its group to every known node every
// HeartbeatInterval (30 s), so that the broker knows the connections on
// which to ask about half messages left pending. A broker's
// CHECK_TRANSACTION_STATE (39) arriving on any of the Client's connections
// is decoded (header and the half message, one record in the stored
// format, with its real topic), ignored unless the message's PGROUP is
// the group of a TransactionProducer started on that Client (one per group
// and Client), handed to CheckLocalTransaction, and answered with
// END_TRANSACTION (fromTransactionCheck=true, the check's offsets and
// transactionId) to the node that asked, following a leader it names.
// Shutdown stops heartbeating and answering, and unregisters the group
// (UNREGISTER_CLIENT).
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
//
// # Credentials
//
// A group whose brokers enforce an ACL (RocketMQ's plain ACL, package acl)
// needs signed requests: set Options.AccessKey and Options.SecretKey (and
// SecurityToken if the account uses one). Every request the client then
// writes, on any path (sends of every kind, pulls, offset commits and
// queries, heartbeats, locks, send-backs, END_TRANSACTION, route and
// message queries, admin commands, Client.Invoke), carries the ext fields
// AccessKey, SecurityToken (if set) and Signature, computed by acl.Sign
// over the request's final ext fields and body, as RocketMQ's Java client
// computes it, so Apache brokers accept it too. Signing happens in one
// place, the pool's connection (poolConn in sign.go), which every request
// passes through; it signs a copy and leaves the caller's request as it
// was, so a retried request is signed again. A send's typed header is
// turned into ext fields first (the map the ROCKETMQ header encoding
// otherwise avoids). Responses the client sends to broker requests are
// not signed, as RocketMQ's clients do not sign them. A broker that
// enforces the ACL refuses an unsigned or badly signed request with
// RocketMQ's reason in the remark ("Check signature failed for
// accessKey=..."): Apache 4.x answers SYSTEM_ERROR, 5.3's ACL 2.0
// NO_PERMISSION, which the client retries a few times like any
// NO_PERMISSION before it returns the *Error.
package client
