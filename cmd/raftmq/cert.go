package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/internal/certs"
	"github.com/raftmq/raftmq/protocol/remoting"
)

func newCertCmd(_ func() *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Make a local CA and node certificates for TLS (ECDSA P-256)",
		Long: "cert makes the files `raftmq broker --tls-*` and the clients' --tls-ca read: a CA\n" +
			"(ca.pem, ca-key.pem) and per node a certificate and key (nN.pem, nN-key.pem), keys\n" +
			"written 0600. `cert demo` makes the set for the local three-node demo; `cert acl-key`\n" +
			"the group's ACL key (--acl-key-file).",
	}
	var caOut string
	caCmd := &cobra.Command{
		Use:   "ca",
		Short: "Make a CA: ca.pem and ca-key.pem in --out",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			ca, err := certs.NewCA("raftmq CA")
			if err != nil {
				return err
			}
			if err := ca.WriteCA(caOut); err != nil {
				return err
			}
			fmt.Printf("wrote %s and %s\n", filepath.Join(caOut, "ca.pem"), filepath.Join(caOut, "ca-key.pem"))
			return nil
		},
	}
	caCmd.Flags().StringVar(&caOut, "out", ".", "directory to write into")

	var caDir, name, hosts, nodeOut string
	nodeCmd := &cobra.Command{
		Use:   "node",
		Short: "Issue a node certificate from a CA: NAME.pem and NAME-key.pem in --out",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if name == "" || strings.ContainsAny(name, `/\`) {
				return fmt.Errorf("cert node: --name must be a plain file name, not %q", name)
			}
			ca, err := certs.LoadCA(caDir)
			if err != nil {
				return err
			}
			hs := strings.Split(hosts, ",")
			if err := ca.WriteNode(nodeOut, name, hs); err != nil {
				return err
			}
			fmt.Printf("wrote %s and %s for %s\n", filepath.Join(nodeOut, name+".pem"), filepath.Join(nodeOut, name+"-key.pem"), strings.Join(hs, ", "))
			return nil
		},
	}
	nodeCmd.Flags().StringVar(&caDir, "ca", ".", "directory holding ca.pem and ca-key.pem")
	nodeCmd.Flags().StringVar(&name, "name", "", "the node's name: the certificate's common name and the files' names (n1, n2, ...)")
	nodeCmd.Flags().StringVar(&hosts, "host", "127.0.0.1,localhost", "IP addresses and DNS names the certificate is valid for, comma-separated: every host clients and peers dial the node by")
	nodeCmd.Flags().StringVar(&nodeOut, "out", ".", "directory to write into")

	var demoOut string
	var nodes int
	demoCmd := &cobra.Command{
		Use:   "demo",
		Short: "Make a CA and certificates n1..nN for 127.0.0.1 and localhost in --out (keeps what exists)",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if err := certs.Demo(demoOut, nodes); err != nil {
				return err
			}
			fmt.Printf("CA and %d node certificates in %s\n", nodes, demoOut)
			return nil
		},
	}
	demoCmd.Flags().StringVar(&demoOut, "out", "raftmq-tls", "directory to write into")
	demoCmd.Flags().IntVar(&nodes, "nodes", 3, "number of node certificates")
	var keyOut string
	aclKeyCmd := &cobra.Command{
		Use:   "acl-key",
		Short: "Make a group's ACL key (--acl-key-file): 32 random bytes in hex, written 0600, never over an existing file",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if err := os.MkdirAll(filepath.Dir(keyOut), 0o700); err != nil {
				return err
			}
			f, err := os.OpenFile(keyOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if _, err := f.Write(acl.EncodeKey(acl.NewKey())); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Printf("wrote %s: copy it to every node of the group (--acl-key-file, or <data>/acl.key)\n", keyOut)
			return nil
		},
	}
	aclKeyCmd.Flags().StringVar(&keyOut, "out", "acl.key", "file to write")
	cmd.AddCommand(caCmd, nodeCmd, demoCmd, aclKeyCmd)
	return cmd
}

// tlsFlags are the root command's --tls, --tls-ca, --tls-cert and
// --tls-key: the client side of TLS for every command that talks to a
// group. The root command puts them in the command's context.
type tlsFlags struct {
	enabled       bool
	ca, cert, key string
}

type tlsKey struct{}

// registerTLSFlags adds the client TLS flags to the root command.
func registerTLSFlags(root *cobra.Command, f *tlsFlags) {
	pf := root.PersistentFlags()
	pf.BoolVar(&f.enabled, "tls", os.Getenv("RAFTMQ_TLS") == "true", "connect to the group's client ports over TLS (default $RAFTMQ_TLS=true; implied by --tls-ca)")
	pf.StringVar(&f.ca, "tls-ca", os.Getenv("RAFTMQ_TLS_CA"), "PEM file of the CA that signed the nodes' certificates (default $RAFTMQ_TLS_CA; empty: the system's roots)")
	pf.StringVar(&f.cert, "tls-cert", os.Getenv("RAFTMQ_TLS_CERT"), "client certificate, for nodes with --tls-client-auth optional or require (default $RAFTMQ_TLS_CERT)")
	pf.StringVar(&f.key, "tls-key", os.Getenv("RAFTMQ_TLS_KEY"), "the client certificate's key (default $RAFTMQ_TLS_KEY)")
}

// clientTLS returns the client TLS configuration in ctx, nil for
// plaintext.
func clientTLS(ctx context.Context) (*tls.Config, error) {
	f, _ := ctx.Value(tlsKey{}).(tlsFlags)
	if !f.enabled && f.ca == "" && f.cert == "" {
		return nil, nil
	}
	return client.LoadTLS(client.TLSFiles{CAFile: f.ca, CertFile: f.cert, KeyFile: f.key})
}

// serverTLSFlags are the --tls-* flags of a server: a broker or a name server.
type serverTLSFlags struct {
	mode, cert, key, ca, clientAuth string
}

// tlsHelp is the help of each --tls-* server flag.
type tlsHelp struct{ mode, cert, key, ca, clientAuth string }

// brokerTLSHelp and namesrvTLSHelp are the broker's (client, HTTP and raft
// ports) and the name server's (one port).
var (
	brokerTLSHelp = tlsHelp{
		mode:       "client and HTTP ports: disabled, permissive (TLS and plaintext on one port) or enforcing (TLS only) (default: permissive with --tls-cert, else disabled)",
		cert:       "this node's certificate (PEM), for every port; with it the raft port is mutual TLS",
		key:        "the certificate's key (PEM)",
		ca:         "the group's CA (PEM): verifies peers on the raft port, client certificates, and the node's own TLS connections",
		clientAuth: "client certificates on the client and HTTP ports: none, optional or require (signed by --tls-ca)",
	}
	namesrvTLSHelp = tlsHelp{
		mode:       "disabled, permissive (TLS and plaintext on one port) or enforcing (TLS only) (default: permissive with --tls-cert, else disabled)",
		cert:       "the name server's certificate (PEM)",
		key:        "the certificate's key (PEM)",
		ca:         "the CA (PEM) that client certificates must be signed by",
		clientAuth: "client certificates: none, optional or require (signed by --tls-ca)",
	}
)

// register adds the --tls-* flags to cmd with help h.
func (f *serverTLSFlags) register(cmd *cobra.Command, h tlsHelp) {
	fl := cmd.Flags()
	fl.StringVar(&f.mode, "tls-mode", "", h.mode)
	fl.StringVar(&f.cert, "tls-cert", "", h.cert)
	fl.StringVar(&f.key, "tls-key", "", h.key)
	fl.StringVar(&f.ca, "tls-ca", "", h.ca)
	fl.StringVar(&f.clientAuth, "tls-client-auth", "none", h.clientAuth)
}

// config returns the broker's TLS configuration, nil without TLS.
func (f *serverTLSFlags) config() (*cluster.TLSConfig, error) {
	mode := remoting.TLSDisabled
	switch {
	case f.mode != "":
		m, err := remoting.ParseTLSMode(f.mode)
		if err != nil {
			return nil, fmt.Errorf("--tls-mode: %w", err)
		}
		mode = m
	case f.cert != "":
		mode = remoting.TLSPermissive // RocketMQ's default
	}
	auth, err := cluster.ParseClientAuth(f.clientAuth)
	if err != nil {
		return nil, fmt.Errorf("--tls-client-auth: %w", err)
	}
	if f.cert == "" && f.key == "" && f.ca == "" {
		if mode != remoting.TLSDisabled {
			return nil, fmt.Errorf("--tls-mode %s needs --tls-cert, --tls-key and --tls-ca", mode)
		}
		return nil, nil
	}
	if f.cert == "" || f.key == "" || f.ca == "" {
		return nil, fmt.Errorf("--tls-cert, --tls-key and --tls-ca go together")
	}
	return &cluster.TLSConfig{Mode: mode, CertFile: f.cert, KeyFile: f.key, CAFile: f.ca, ClientAuth: auth}, nil
}

// clusterTLS prepares `raftmq cluster --tls`: the demo CA and node
// certificates in <data>/tls (kept across runs), the flags that make every
// node enforce TLS on its client and HTTP ports and mutual TLS on its raft
// port, and the client side for the demo and the status checks.
func clusterTLS(data string, nodes int) (dir string, args []string, nodeArgs func(id uint64) []string, client *tls.Config, err error) {
	dir = filepath.Join(data, "tls")
	if err := certs.Demo(dir, nodes); err != nil {
		return "", nil, nil, nil, fmt.Errorf("cluster --tls: %w", err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	pool, err := certs.CertPool(caFile)
	if err != nil {
		return "", nil, nil, nil, fmt.Errorf("cluster --tls: %w", err)
	}
	args = []string{"--tls-mode", "enforcing", "--tls-ca", caFile}
	nodeArgs = func(id uint64) []string {
		return []string{"--tls-cert", filepath.Join(dir, fmt.Sprintf("n%d.pem", id)), "--tls-key", filepath.Join(dir, fmt.Sprintf("n%d-key.pem", id))}
	}
	return dir, args, nodeArgs, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// namesrvTLSArgs are the flags of the demo's name server with --tls: a
// certificate of the demo CA in dir (issued once) and TLS enforcing.
func namesrvTLSArgs(dir string) ([]string, error) {
	cert, key := filepath.Join(dir, "namesrv.pem"), filepath.Join(dir, "namesrv-key.pem")
	if _, err := os.Stat(cert); errors.Is(err, os.ErrNotExist) {
		ca, err := certs.LoadCA(dir)
		if err != nil {
			return nil, fmt.Errorf("cluster --tls: %w", err)
		}
		if err := ca.WriteNode(dir, "namesrv", []string{"127.0.0.1", "localhost", "::1"}); err != nil {
			return nil, fmt.Errorf("cluster --tls: %w", err)
		}
	}
	return []string{"--tls-mode", "enforcing", "--tls-cert", cert, "--tls-key", key, "--tls-ca", filepath.Join(dir, "ca.pem")}, nil
}
