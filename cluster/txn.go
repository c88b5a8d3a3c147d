package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/txn"
)

// Transactions (package txn): END_TRANSACTION from producers, and the
// leader's check-backs of transactions left open.

// txnTick is how often the leader looks for transactions to check.
const txnTick = time.Second

// handleEndTransaction ends a pending transaction as its producer asks:
// commit stores the real message, rollback discards the half message; an
// unknown outcome changes nothing (the leader checks back later). Whatever
// ends the transaction is one entry applied once.
func (b *Broker) handleEndTransaction(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeEndTransactionRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	var action txn.Action
	switch h.CommitOrRollback {
	case remoting.TransactionCommitType:
		action = txn.Commit
	case remoting.TransactionRollbackType:
		action = txn.Rollback
	case remoting.TransactionNotType:
		b.log.Debug("cluster: transaction outcome unknown; checked back later", "group", h.ProducerGroup, "half", h.TranStateTableOffset)
		return remoting.NewResponse(req, remoting.Success, "")
	default:
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("commitOrRollback %d is neither 0, 8 nor 12", h.CommitOrRollback))
	}
	return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command {
		rec, ok := b.rep.Store().PendingTransaction(h.TranStateTableOffset)
		switch {
		case !ok:
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("no pending transaction at half offset %d (ended before, or never prepared)", h.TranStateTableOffset))
		case rec.Phy != h.CommitLogOffset:
			return b.refuse(conn, req, remoting.SystemError, fmt.Sprintf("half offset %d holds the message at commit log offset %d, not %d", h.TranStateTableOffset, rec.Phy, h.CommitLogOffset))
		case rec.Group != h.ProducerGroup:
			return b.refuse(conn, req, remoting.SystemError, fmt.Sprintf("the transaction belongs to producer group %q, not %q", rec.Group, h.ProducerGroup))
		}
		if err := b.endTxn(ctx, h.TranStateTableOffset, rec, action); err != nil {
			return b.errorResponse(req, err)
		}
		return remoting.NewResponse(req, remoting.Success, "")
	})
}

// endTxn proposes the end of a pending transaction and waits for it.
func (b *Broker) endTxn(ctx context.Context, half int64, rec txn.Record, action txn.Action) error {
	if err := b.ensureTopic(ctx, txn.OpTopic); err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	var msgs []*message.Message
	deliver := action == txn.Commit
	if failpoint.On(b.fp, failpoint.RollbackDelivers) {
		deliver = rollbackDelivers(action)
	}
	if deliver {
		m, err := b.rep.Store().RecordAt(rec.Phy)
		if err != nil {
			return fmt.Errorf("read half message: %w", err)
		}
		committed, err := committedCopy(&m, rec.Phy)
		if err != nil {
			return err
		}
		msgs = append(msgs, committed)
	}
	msgs = append(msgs, &message.Message{Topic: txn.OpTopic, Body: []byte(strconv.FormatInt(half, 10)), BornTimestamp: now,
		BornHost: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), Properties: map[string]string{message.PropertyTags: txn.OpTag}})
	recs, err := b.rep.encodeSend(msgs)
	if err != nil {
		return err
	}
	recs = recs[store.BodyHeaderSize:] // after the room for a header of their own
	payload := append(txn.AppendOp(make([]byte, 0, 32+len(recs)), &txn.Op{Action: action, HalfOffset: half, Now: now}), recs...)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.SendTimeout)
	defer cancel()
	res, err := b.rep.ProposeInternal(cctx, store.KindTxn, payload, len(msgs))
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			b.log.Error("cluster: transaction: a message of its end could not be stored", "half", half, "action", action, "topic", r.Topic, "err", r.Err)
		}
	}
	b.met.TxnEnded.WithLabelValues(action.String()).Inc()
	return nil
}

// committedCopy returns the message a commit stores: the half message in
// its real topic and queue, transaction type commit, TRAN_MSG cleared, the
// half message's offset in PreparedTransactionOffset.
func committedCopy(m *message.Message, halfPhy int64) (*message.Message, error) {
	topic := m.Properties[message.PropertyRealTopic]
	qid, err := strconv.Atoi(m.Properties[message.PropertyRealQueueID])
	if topic == "" || err != nil || qid < 0 {
		return nil, fmt.Errorf("%w: half message without a real topic (REAL_TOPIC %q REAL_QID %q)", store.ErrBadEntry, topic, m.Properties[message.PropertyRealQueueID])
	}
	props := maps.Clone(m.Properties)
	delete(props, message.PropertyTransactionPrepared)
	return &message.Message{Topic: topic, QueueID: int32(qid), Flag: m.Flag, SysFlag: m.SysFlag&^txn.SysFlagTypeMask | txn.SysFlagCommit,
		BornTimestamp: m.BornTimestamp, BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes, PreparedTransactionOffset: halfPhy,
		Body: m.Body, Properties: props}, nil
}

// txnCheckLoop, while the node leads, checks back transactions open
// longer than TxnTimeout, every TxnCheckInterval, and discards those
// checked TxnCheckMax times. Each check is counted through raft before it
// is sent, so a new leader goes on from the count.
func (b *Broker) txnCheckLoop() {
	b.whileLeader(txnTick, func(ctx context.Context) bool {
		b.checkTransactions(ctx, time.Now())
		return true
	})
}

func (b *Broker) checkTransactions(ctx context.Context, now time.Time) {
	nowMs := now.UnixMilli()
	for _, p := range b.rep.Store().PendingTransactions() {
		if nowMs-p.StoreMs < max(b.cfg.TxnTimeout.Milliseconds(), p.ImmunityMs) {
			continue // CHECK_IMMUNITY_TIME_IN_SECONDS, if longer, as RocketMQ
		}
		if p.Checks > 0 && nowMs-p.LastCheckMs < b.cfg.TxnCheckInterval.Milliseconds() {
			continue
		}
		if int(p.Checks) >= b.cfg.TxnCheckMax {
			err := b.endTxn(ctx, p.HalfOffset, p.Record, txn.Discard)
			b.log.Warn("cluster: transaction discarded: its producer never answered", "half", p.HalfOffset, "group", p.Group, "checks", p.Checks, "err", err)
			continue
		}
		if err := b.countCheck(ctx, p.HalfOffset, nowMs); err != nil {
			if !errors.Is(err, store.ErrTxnNotPending) {
				b.log.Warn("cluster: transaction check not recorded", "half", p.HalfOffset, "err", err)
			}
			continue
		}
		b.sendCheck(p)
	}
}

// countCheck records one check-back through raft.
func (b *Broker) countCheck(ctx context.Context, half, nowMs int64) error {
	cctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
	defer cancel()
	_, err := b.rep.ProposeInternal(cctx, store.KindTxn, txn.AppendOp(nil, &txn.Op{Action: txn.Check, HalfOffset: half, Now: nowMs}), 0)
	return err
}

// sendCheck asks one live producer of the transaction's group for its
// outcome (CHECK_TRANSACTION_STATE, one-way); it answers with
// END_TRANSACTION.
func (b *Broker) sendCheck(p store.PendingTxn) {
	prods := b.members.Producers(p.Group)
	if len(prods) == 0 {
		b.log.Info("cluster: transaction open, no producer of its group connected to check with", "half", p.HalfOffset, "group", p.Group, "checks", p.Checks+1)
		return
	}
	m, err := b.rep.Store().RecordAt(p.Phy)
	if err != nil {
		b.log.Error("cluster: transaction: read half message", "half", p.HalfOffset, "err", err)
		return
	}
	qid, err := strconv.Atoi(m.Properties[message.PropertyRealQueueID])
	if err != nil {
		qid = 0
	}
	uniq := m.Properties[message.PropertyUniqKey]
	body := m
	body.Topic, body.QueueID, body.QueueOffset, body.PhysicalOffset = m.Properties[message.PropertyRealTopic], int32(qid), p.HalfOffset, p.Phy
	rec, err := message.Append(nil, &body)
	if err != nil {
		b.log.Error("cluster: transaction: encode check", "half", p.HalfOffset, "err", err)
		return
	}
	h := remoting.CheckTransactionStateRequestHeader{Topic: body.Topic, TranStateTableOffset: p.HalfOffset, CommitLogOffset: p.Phy,
		MsgID: uniq, TransactionID: uniq, OffsetMsgID: message.OffsetMsgID(m.StoreHost, p.Phy)}
	prod := prods[int(p.Checks)%len(prods)]
	if err := prod.Channel.Oneway(remoting.NewRequest(remoting.CheckTransactionState, h.Encode(), rec)); err != nil {
		b.log.Warn("cluster: transaction check not sent", "half", p.HalfOffset, "client", prod.ClientID, "err", err)
		return
	}
	b.log.Info("cluster: transaction checked back", "half", p.HalfOffset, "group", p.Group, "client", prod.ClientID, "checks", p.Checks+1)
}
