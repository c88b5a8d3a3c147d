package main

import (
	"context"
	"log/slog"
)

// clusterDemo is replaced once the client lands.
func clusterDemo(ctx context.Context, log *slog.Logger, addrs []string, n int) error { return nil }
