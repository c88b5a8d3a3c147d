package cluster

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// TestDeadLetterCode: DEAD_LETTER_MESSAGE (raftmq's own code, outside
// RocketMQ's codes and the admin range) is in the handler table, on the
// leader and forwarded by a follower: a request with a garbled receipt is
// refused for the receipt, not for the code. The table refuses a code it
// does not know with REQUEST_CODE_NOT_SUPPORTED, which is what a leader of
// an older build answers to DEAD_LETTER_MESSAGE (where it ignored an
// ACK_MESSAGE's dead-letter field and acked), and the gRPC service turns
// that answer into UNIMPLEMENTED.
func TestDeadLetterCode(t *testing.T) {
	require.False(t, remoting.DeadLetterMessage >= remoting.AdminCodeMin && remoting.DeadLetterMessage <= remoting.AdminCodeMax)
	tb := startBrokers(t)
	l, f := tb.leader(), tb.follower()
	lc, fc := dial(t, l.ClientAddr()), dial(t, f.ClientAddr())
	ext := func() map[string]string {
		return map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "0", "extraInfo": "not a receipt", "offset": "0"}
	}
	for _, c := range []*remoting.Conn{lc, fc} {
		resp := invoke(t, c, remoting.NewRequest(remoting.DeadLetterMessage, ext(), nil))
		require.NotEqual(t, remoting.RequestCodeNotSupported, resp.Code, resp.Remark)
		require.NotEqual(t, remoting.Success, resp.Code, resp.Remark)
	}
	// An ACK_MESSAGE's dead-letter field is still read (older followers
	// sent it): a value other than true is refused.
	e := ext()
	e[remoting.FieldDeadLetter] = "yes"
	resp := invoke(t, lc, remoting.NewRequest(remoting.AckMessage, e, nil))
	require.Equal(t, remoting.InvalidParameter, resp.Code, resp.Remark)

	// A code the table does not hold, as DEAD_LETTER_MESSAGE is to an
	// older build: refused, never answered SUCCESS.
	unknown := remoting.DeadLetterMessage + 1
	resp = invoke(t, lc, remoting.NewRequest(unknown, ext(), nil))
	require.Equal(t, remoting.RequestCodeNotSupported, resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, fmt.Sprintf("request code %d not supported", unknown))
	err := popUnsupported("ForwardMessageToDeadLetterQueue", resp)
	require.Error(t, err)
	require.Contains(t, err.Error(), "Unimplemented")
}
