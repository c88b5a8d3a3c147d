package h2

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
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
		peer  bool
		dl    bool
		reply func(any, error)
	}
	calls := make(chan taken, 4)
	inline := func(ctx context.Context, method string, raw []byte, reply func(any, error)) bool {
		if method != "/grpc.testing.TestService/UnaryCall" {
			return false
		}
		var req testpb.SimpleRequest
		if err := proto.Unmarshal(raw, &req); err != nil || req.ResponseSize == 7 {
			return false // left to the handler
		}
		md, _ := metadata.FromIncomingContext(ctx)
		_, hasPeer := peer.FromContext(ctx)
		_, hasDeadline := ctx.Deadline()
		calls <- taken{&req, md, hasPeer, hasDeadline, reply}
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
	require.True(t, tk.peer, "the inline context names the peer")
	require.False(t, tk.dl, "the inline context has no deadline")
	go tk.reply(&testpb.SimpleResponse{Username: "inline"}, nil)
	require.Equal(t, "inline", (<-got).GetUsername())

	// Taken, answered with a message that encodes itself (h2.Encoded).
	go func() {
		resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 8})
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	tk = <-calls
	tk.reply(encodedResponse{&testpb.SimpleResponse{Username: "encoded"}}, nil)
	require.Equal(t, "encoded", (<-got).GetUsername())

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

// encodedResponse is an Encoded: its message's protobuf bytes.
type encodedResponse struct{ m proto.Message }

func (e encodedResponse) AppendProto(b []byte) []byte {
	b, err := proto.MarshalOptions{}.MarshalAppend(b, e.m)
	if err != nil {
		panic(err)
	}
	return b
}
