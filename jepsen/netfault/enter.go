package netfault

import (
	"errors"
	"fmt"
	"os"
)

// Enter returns the network mode of this process for the requested mode
// (Auto, NetNS or Proxy). Call it after [Reexec] returned handled=false.
//
// Inside a namespace prepared by Reexec (EnvVar=1), Enter makes sure the
// loopback interface is up and returns KindNetNS, reporting whether the
// namespace is rootless. After Reexec fell back to proxy mode, it returns
// KindProxy with the reason. Without Reexec, it returns KindProxy for Auto
// and Proxy, and an error for NetNS.
func Enter(requested string) (Mode, error) {
	if err := checkRequested(requested); err != nil {
		return Mode{}, err
	}
	v := os.Getenv(EnvVar)
	if requested == Proxy {
		return ProxyMode("requested"), nil
	}
	if v == envInside {
		if err := setupNamespace(); err != nil {
			return Mode{}, fmt.Errorf("netfault: prepare network namespace: %w", err)
		}
		return Mode{Kind: KindNetNS, Rootless: inUserNamespace()}, nil
	}
	if reason, ok := proxyReasonFromEnv(v); ok {
		if requested == NetNS {
			return Mode{}, fmt.Errorf("netfault: network namespace requested but unavailable: %s", reason)
		}
		return ProxyMode(reason), nil
	}
	if v != "" {
		return Mode{}, fmt.Errorf("netfault: invalid %s value %q", EnvVar, v)
	}
	if requested == NetNS {
		return Mode{}, errors.New("netfault: network namespace requested but this process is not inside one: " + noNamespaceReason)
	}
	return ProxyMode(noNamespaceReason), nil
}
