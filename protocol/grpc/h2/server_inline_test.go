package h2

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Options.Inline: a call it takes is answered by its reply (from another
// goroutine, after the reader went on), with a response or a status; a
// call it declines runs its handler, which sees the request whole.
func TestInlineTakesOrLeavesUnaryCalls(t *testing.T) {
	type taken struct {
		req   *testpb.SimpleRequest
		md    metadata.MD
		reply func(proto.Message, error)
	}
	calls := make(chan taken, 4)
	inline := func(ctx context.Context, method string, raw []byte, reply func(proto.Message, error)) bool {
		if method != "/grpc.testing.TestService/UnaryCall" {
			return false
		}
		var req testpb.SimpleRequest
		if err := proto.Unmarshal(raw, &req); err != nil || req.ResponseSize == 7 {
			return false // left to the handler
		}
		md, _ := metadata.FromIncomingContext(ctx)
		calls <- taken{&req, md, reply}
		return true
	}
	_, addr := serve(t, Options{Inline: inline}, newTestService())
	c := dial(t, addr)
	ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-key", "v1")

	// Taken, answered from another goroutine with a response.
	got := make(chan *testpb.SimpleResponse, 1)
	go func() {
		resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 5})
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	var tk taken
	select {
	case tk = <-calls:
	case r := <-got:
		t.Fatalf("the handler answered a call Inline takes: %v", r)
	}
	require.EqualValues(t, 5, tk.req.ResponseSize)
	require.Equal(t, []string{"v1"}, tk.md["x-key"])
	go tk.reply(&testpb.SimpleResponse{Username: "inline"}, nil)
	require.Equal(t, "inline", (<-got).GetUsername())

	// Taken, answered with a status.
	errc := make(chan error, 1)
	go func() {
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 6})
		errc <- err
	}()
	tk = <-calls
	tk.reply(nil, status.Error(codes.ResourceExhausted, "full"))
	st := status.Convert(<-errc)
	require.Equal(t, codes.ResourceExhausted, st.Code())
	require.Equal(t, "full", st.Message())

	// Declined: the handler answers (it names the method it ran).
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 7})
	require.NoError(t, err)
	require.Equal(t, "/grpc.testing.TestService/UnaryCall", resp.GetUsername())
	require.Len(t, resp.GetPayload().GetBody(), 7)
	require.Empty(t, calls)
}
