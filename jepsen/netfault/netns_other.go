//go:build !linux

package netfault

import (
	"errors"
	"fmt"
	"os"
)

// noNamespaceReason explains proxy mode on systems without namespaces.
const noNamespaceReason = "network namespaces need Linux"

// Reexec runs the current command again inside a private network namespace;
// on this system there are none. It returns an error for NetNS and
// handled=false otherwise, so that [Enter] reports proxy mode.
func Reexec(requested string, args []string) (handled bool, exitCode int, err error) {
	if err := checkRequested(requested); err != nil {
		return false, 0, err
	}
	if requested == NetNS && os.Getenv(EnvVar) == "" {
		return false, 0, fmt.Errorf("netfault: network namespace requested but unavailable: %s", noNamespaceReason)
	}
	return false, 0, nil
}

// setupNamespace cannot prepare a namespace on this system.
func setupNamespace() error {
	return errors.New(noNamespaceReason)
}

// inUserNamespace is always false on this system.
func inUserNamespace() bool { return false }
