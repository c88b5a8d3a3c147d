module github.com/raftmq/raftmq/scripts/peers/fsync

go 1.26.0
