package client

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// poolConn is a pooled connection. Every request the client writes goes
// through its Invoke, InvokeAsync or Oneway, which sign it first when the
// client has credentials: this is the one place requests are signed.
// Responses the client sends to broker requests are not signed (nor are
// they by RocketMQ's clients).
type poolConn struct {
	rc   *remoting.Conn
	cred *acl.Credentials // nil: requests go as they are
}

// signed returns the request to write for req: req itself without
// credentials; with them, a copy whose ext fields are req's (a typed
// Header turned into fields) plus AccessKey, SecurityToken and Signature
// computed with acl over those fields and the body. req is not modified,
// so a request a caller retries is signed afresh each time.
func (c *poolConn) signed(req *remoting.Command) (*remoting.Command, error) {
	if c.cred == nil {
		return req, nil
	}
	ext := req.ExtFields
	if ext == nil && req.Header != nil {
		var err error
		if ext, err = headerFields(req); err != nil {
			return nil, err
		}
	}
	w := *req // Invoke sets the opaque and flag on the copy
	w.ExtFields = c.cred.SignFields(ext, req.Body)
	w.Header = nil
	return &w, nil
}

// headerFields returns the ext fields req's typed Header encodes, as a
// server decodes them: the header is encoded into a JSON frame and read
// back, so the fields signed are exactly the fields sent.
func headerFields(req *remoting.Command) (map[string]string, error) {
	h := remoting.Command{Code: req.Code, Header: req.Header, Serialize: remoting.SerializeJSON}
	frame, err := remoting.AppendFrame(nil, &h)
	if err != nil {
		return nil, fmt.Errorf("client: sign request code %d: %w", req.Code, err)
	}
	dec, err := remoting.DecodeFrame(frame[4:]) // after the length prefix
	if err != nil {
		return nil, fmt.Errorf("client: sign request code %d: %w", req.Code, err)
	}
	if dec.ExtFields == nil {
		return map[string]string{}, nil
	}
	return dec.ExtFields, nil
}

// Invoke signs and sends req and waits for its response (remoting.Conn.Invoke).
func (c *poolConn) Invoke(ctx context.Context, req *remoting.Command) (*remoting.Command, error) {
	w, err := c.signed(req)
	if err != nil {
		return nil, err
	}
	return c.rc.Invoke(ctx, w)
}

// InvokeAsync signs and sends req; cb gets the response (remoting.Conn.InvokeAsync).
func (c *poolConn) InvokeAsync(req *remoting.Command, timeout time.Duration, cb func(*remoting.Command, error)) error {
	w, err := c.signed(req)
	if err != nil {
		return err
	}
	return c.rc.InvokeAsync(w, timeout, cb)
}

// Oneway signs and sends req without waiting (remoting.Conn.Oneway).
func (c *poolConn) Oneway(req *remoting.Command) error {
	w, err := c.signed(req)
	if err != nil {
		return err
	}
	return c.rc.Oneway(w)
}

// Err, LocalAddr, Close and Abort are remoting.Conn's.
func (c *poolConn) Err() error          { return c.rc.Err() }
func (c *poolConn) LocalAddr() net.Addr { return c.rc.LocalAddr() }
func (c *poolConn) Close() error        { return c.rc.Close() }
func (c *poolConn) Abort() error        { return c.rc.Abort() }
