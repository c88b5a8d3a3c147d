// Package grpc holds RocketMQ 5's gRPC wire definitions (apache.rocketmq.v2)
// and their generated Go code in rmqpb. The broker's MessagingService lives
// in cluster/grpcsvc.
package grpc

// Regenerate with protoc (Debian: protobuf-compiler) and the Go plugins
// protoc-gen-go and protoc-gen-go-grpc (go install from the module proxy).
//go:generate protoc -I proto --go_out=. --go_opt=module=github.com/raftmq/raftmq/protocol/grpc --go-grpc_out=. --go-grpc_opt=module=github.com/raftmq/raftmq/protocol/grpc apache/rocketmq/v2/definition.proto apache/rocketmq/v2/service.proto
