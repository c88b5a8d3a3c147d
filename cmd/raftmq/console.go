package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/spf13/pflag"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/console"
	"github.com/raftmq/raftmq/jepsen/report"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// consoleFlags are the broker's web console settings.
type consoleFlags struct {
	on   bool
	runs string
	// broker, once started, tells the console whether an ACL is in force
	// (one taken from the group's log included).
	// (setup allocates it).
	broker *atomic.Pointer[cluster.Broker]
}

func (f *consoleFlags) aclEnforced() bool {
	b := f.broker.Load()
	return b != nil && b.ACLEnforced()
}

func (f *consoleFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&f.on, "console", true, "serve the web console at /console/ on the --http port (and redirect / there)")
	fl.StringVar(&f.runs, "console-runs", "", "a `DIR` of raftmq jepsen runs whose reports the console's chaos page serves (empty: the page says how to set it)")
}

// setup adds the console to cfg's HTTP port, if it has one, talking to
// the group through this node's client address first, with the node's
// TLS when its client port serves TLS, and asking for an account's keys
// when the group has an ACL. The caller closes what it returns (nil
// without a console).
func (f *consoleFlags) setup(cfg *cluster.Config, log *slog.Logger) (*console.Console, error) {
	if !f.on || cfg.HTTPAddr == "" {
		return nil, nil
	}
	addrs := []string{cfg.Peers[cfg.ID].Client}
	for _, id := range slices.Sorted(mapKeys(cfg.Peers)) {
		if id != cfg.ID {
			addrs = append(addrs, cfg.Peers[id].Client)
		}
	}
	f.broker = new(atomic.Pointer[cluster.Broker])
	cc := console.Config{Addrs: addrs, ACL: cfg.ACLFile != "", Logger: log, ACLEnforced: f.aclEnforced}
	if f.runs != "" {
		cc.Chaos = report.Handler(f.runs, log.With("component", "console"))
	}
	if t := cfg.TLS; t != nil && t.Mode != remoting.TLSDisabled {
		tc, err := client.LoadTLS(client.TLSFiles{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile})
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		cc.TLS = tc
	}
	c, err := console.New(cc)
	if err != nil {
		return nil, err
	}
	cfg.HTTPHandlers = func(mux *http.ServeMux) { c.Register(mux) }
	return c, nil
}
