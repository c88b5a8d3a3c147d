package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// A follower asked for a message whose send the leader has acknowledged
// finds it by key, by UNIQ_KEY and by offset, though it learns of the
// commit later than the leader answered (here a minute later:
// CommitNotifyDelay holds back the appends that only carry a commit
// index): before answering "not found" it catches up with the leader's
// commit index. mqadmin's queryMsgByKey right after sendMessage, answered
// by whichever node the tool reached first, relies on it.
func TestFollowerQueryFindsAcknowledgedSend(t *testing.T) {
	tb := startBrokersWith(t, func(c *Config) { c.Raft.CommitNotifyDelay = time.Minute })
	l, f := tb.leader(), tb.follower()
	lc, fc := dial(t, l.ClientAddr()), dial(t, f.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	for i, by := range []string{"key", "uniq", "offset", "key"} {
		key, uniq := fmt.Sprint("order-", i), fmt.Sprint("U", i)
		props := message.EncodeProperties(map[string]string{message.PropertyUniqKey: uniq, message.PropertyKeys: key})
		h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Properties: props}
		resp := invoke(t, lc, remoting.NewRequest(remoting.SendMessage, h.Encode(), []byte(key)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		sh, err := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
		require.NoError(t, err)

		// Straight after the acknowledgement, on the follower.
		switch by {
		case "key", "uniq":
			qh := remoting.QueryMessageRequestHeader{Topic: "T", Key: key, MaxNum: 32, EndTimestamp: time.Now().Add(time.Hour).UnixMilli()}
			if by == "uniq" {
				qh.Key, qh.UniqueKey = uniq, true
			}
			resp = invoke(t, fc, remoting.NewRequest(remoting.QueryMessage, qh.Encode(), nil))
		case "offset":
			_, phy, err := message.ParseOffsetMsgID(sh.MsgID)
			require.NoError(t, err)
			vh := remoting.ViewMessageRequestHeader{Offset: phy}
			resp = invoke(t, fc, remoting.NewRequest(remoting.ViewMessageByID, vh.Encode(), nil))
		}
		require.Equal(t, remoting.Success, resp.Code, "send %d, by %s: %s", i, by, resp.Remark)
		m, _, err := message.Decode(resp.Body)
		require.NoError(t, err)
		require.Equal(t, key, string(m.Body), "send %d, by %s", i, by)
	}
}
