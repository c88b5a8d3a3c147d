// Package h2 is a lean gRPC transport over HTTP/2, built on
// golang.org/x/net/http2's Framer and hpack, with fewer goroutine
// hand-offs and allocations per call than grpc-go's: per connection one
// goroutine reads frames, and writes are batched (whoever queues with no
// writer running writes; a burst shares one flush), as the remoting
// port's links do.
//
// The server (Server, server.go, conn.go, stream.go, writer.go) serves
// generated services through grpc.ServiceDesc, so a service registered on
// grpc-go registers here unchanged; calls run on a small pool of
// goroutines that park between calls, and Options.Inline lets the caller
// take a unary call on the reader (the broker's leader does so for
// SendMessage). It serves unary and streaming calls, metadata,
// deadlines, status details, flow control both ways, keepalive
// enforcement, idle connections closed and graceful stop; not
// compression (grpc-encoding other than identity is UNIMPLEMENTED),
// server-side keepalive pings, interceptors, channelz or stats handlers.
//
// The client (ClientConn, client*.go) implements
// grpc.ClientConnInterface, so a generated client
// (rmqpb.NewMessagingServiceClient) runs on it unchanged: one TCP
// connection, one reader goroutine, and callers that write their own
// frames under one lock, a flusher goroutine sending what a burst of them
// wrote in one write.
package h2
