package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
)

// Replication errors reach clients with RocketMQ's codes: definite
// failures as SERVICE_NOT_AVAILABLE, indeterminate ones as SYSTEM_ERROR
// marked indeterminate, an unknown outcome said as it is.
func TestErrorResponseCodes(t *testing.T) {
	b := &Broker{cfg: Config{SendTimeout: 3 * time.Second}}
	req := remoting.NewRequest(remoting.SendMessage, nil, nil)
	for _, c := range []struct {
		err    error
		code   int32
		prefix string
		not    string
	}{
		{fmt.Errorf("x: %w", ErrLost), remoting.ServiceNotAvailable, "x: ", ""},
		{fmt.Errorf("%w: full", ErrDropped), remoting.ServiceNotAvailable, "raftlog: proposal dropped", ""},
		{context.DeadlineExceeded, remoting.SystemError, "indeterminate: not committed within 3s", ""},
		{fmt.Errorf("node stopped before applying entry 7: %w", raftlog.ErrOutcomeUnknown), remoting.SystemError, "indeterminate: node stopped", "not committed within"},
	} {
		resp := b.errorResponse(req, c.err)
		require.Equal(t, c.code, resp.Code, "%v", c.err)
		require.True(t, strings.HasPrefix(resp.Remark, c.prefix), "%q", resp.Remark)
		if c.not != "" {
			require.NotContains(t, resp.Remark, c.not)
		}
	}
}
