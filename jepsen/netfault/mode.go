package netfault

import (
	"fmt"
	"strings"
)

// Requested network modes, as a user names them on the command line.
const (
	// Auto uses a network namespace when one can be created and falls back
	// to proxy mode otherwise.
	Auto = "auto"
	// NetNS requires a network namespace and fails without one.
	NetNS = "netns"
	// Proxy uses only the per-link TCP proxies, in the host namespace.
	Proxy = "proxy"
)

// EnvVar marks a process whose network mode is already decided. [Reexec]
// sets it in the child it starts: "1" means the child runs inside a fresh
// network namespace; a value starting with "proxy" means the namespace could
// not be used and the child runs in proxy mode, the rest of the value saying
// why. Processes the harness starts (brokers) inherit it.
const EnvVar = "RAFTMQ_NETNS"

// envInside is the value of EnvVar inside a namespace.
const envInside = "1"

// envProxyPrefix starts the value of EnvVar after a fallback to proxy mode.
const envProxyPrefix = "proxy: "

// Kind is the network mechanism a run actually uses.
type Kind string

// Kinds of Mode.
const (
	// KindNetNS: a private network namespace; partitions are nft rules plus
	// proxy blackholes.
	KindNetNS Kind = "netns"
	// KindProxy: the host namespace; partitions are proxy blackholes only.
	KindProxy Kind = "proxy"
)

// Mode is the network mode a run actually uses, as returned by [Enter].
type Mode struct {
	// Kind is the mechanism.
	Kind Kind
	// Rootless is set for KindNetNS when the namespace is a user+net
	// namespace created by an unprivileged user.
	Rootless bool
	// Reason says, for KindProxy, why no namespace is used.
	Reason string
}

// ProxyMode returns the proxy mode with the given reason, for callers that
// decide on proxy mode without [Enter] (tests, tools).
func ProxyMode(reason string) Mode {
	return Mode{Kind: KindProxy, Reason: reason}
}

// String describes the mode for logs and reports, for example
// "netns (rootless user+net namespace)" or "proxy (requested)".
func (m Mode) String() string {
	switch m.Kind {
	case KindNetNS:
		if m.Rootless {
			return "netns (rootless user+net namespace)"
		}
		return "netns (root, private net namespace)"
	case KindProxy:
		if m.Reason == "" {
			return "proxy"
		}
		return "proxy (" + m.Reason + ")"
	default:
		return fmt.Sprintf("unknown mode %q", string(m.Kind))
	}
}

// checkRequested validates a requested mode name.
func checkRequested(requested string) error {
	switch requested {
	case Auto, NetNS, Proxy:
		return nil
	default:
		return fmt.Errorf("netfault: unknown network mode %q (want %s, %s or %s)", requested, Auto, NetNS, Proxy)
	}
}

// proxyReasonFromEnv returns the fallback reason stored in an EnvVar value
// ("proxy: <why>") and whether the value records a fallback at all.
func proxyReasonFromEnv(v string) (string, bool) {
	rest, ok := strings.CutPrefix(v, "proxy")
	if !ok {
		return "", false
	}
	return strings.TrimSpace(strings.TrimPrefix(rest, ":")), true
}
