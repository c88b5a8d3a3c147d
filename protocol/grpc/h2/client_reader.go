package h2

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// reader is the connection's one reading goroutine: it hands each frame
// to its stream and queues the answers to SETTINGS and PING and the
// window updates; the connection ends with it.
func (c *ClientConn) reader() {
	defer close(c.readerDone)
	err := c.readLoop()
	c.shut(status.Errorf(codes.Unavailable, "h2: connection closed: %v", err))
}

func (c *ClientConn) readLoop() error {
	first := true
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				if s := c.stream(se.StreamID); s != nil {
					c.reset(s, status.Newf(codes.Internal, "h2: stream error: %v", se), se.Code)
				}
				continue
			}
			return err
		}
		if first {
			if _, ok := f.(*http2.SettingsFrame); !ok {
				return fmt.Errorf("the server's first frame is %v, not SETTINGS", f.Header().Type)
			}
			first = false
		}
		switch f := f.(type) {
		case *http2.HeadersFrame:
			if f.HeadersEnded() {
				if err := c.onBlock(f.StreamID, f.StreamEnded(), f.HeaderBlockFragment()); err != nil {
					return err
				}
			} else {
				c.hblk = append(c.hblk[:0], f.HeaderBlockFragment()...)
				c.hblkID, c.hblkEnd = f.StreamID, f.StreamEnded()
			}
		case *http2.ContinuationFrame: // the Framer checks they follow their HEADERS
			c.hblk = append(c.hblk, f.HeaderBlockFragment()...)
			if len(c.hblk) > clientMaxHeaderList {
				return fmt.Errorf("a header block over %d bytes", clientMaxHeaderList)
			}
			if f.HeadersEnded() {
				if err := c.onBlock(c.hblkID, c.hblkEnd, c.hblk); err != nil {
					return err
				}
			}
		case *http2.DataFrame:
			c.onData(f)
		case *http2.RSTStreamFrame:
			if s := c.stream(f.StreamID); s != nil && c.detach(s) {
				st := clientRSTStatus(f.ErrCode)
				if dl, ok := s.ctx.Deadline(); ok && st.Code() == codes.Canceled && !time.Now().Before(dl) {
					// The server's timer of our deadline went off first.
					st = status.New(codes.DeadlineExceeded, context.DeadlineExceeded.Error())
				}
				s.finish(st, nil)
			}
		case *http2.SettingsFrame:
			if err := c.onSettings(f); err != nil {
				return err
			}
		case *http2.WindowUpdateFrame:
			c.mu.Lock()
			if f.StreamID == 0 {
				c.connSendWin += int64(f.Increment)
			} else if s := c.streams[f.StreamID]; s != nil {
				s.sendWin += int64(f.Increment)
			}
			c.wakeLocked()
			c.mu.Unlock()
		case *http2.PingFrame:
			if !f.IsAck() {
				c.queue(clientCtrl{kind: 'p', ping: f.Data})
			}
		case *http2.GoAwayFrame:
			c.onGoAway(f)
		}
	}
}

// stream is the open stream id; nil when there is none.
func (c *ClientConn) stream(id uint32) *clientStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

// onSettings applies the server's SETTINGS and acknowledges them.
func (c *ClientConn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	if err := f.ForeachSetting(func(st http2.Setting) error { return st.Valid() }); err != nil {
		return err
	}
	c.mu.Lock()
	if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
		c.maxStreams = v
	}
	if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
		delta := int64(v) - c.peerInitWin
		c.peerInitWin = int64(v)
		for _, s := range c.streams {
			s.sendWin += delta
		}
	}
	c.wakeLocked()
	c.mu.Unlock()
	ack := clientCtrl{kind: 's'}
	if v, ok := f.Value(http2.SettingMaxFrameSize); ok {
		ack.mfs = v
	}
	if v, ok := f.Value(http2.SettingHeaderTableSize); ok {
		ack.tbl = max(v, 1) // 0 is "unchanged" here: a table of 1 byte holds no entry
	}
	c.queue(ack)
	select {
	case <-c.settingsSeen:
	default:
		close(c.settingsSeen)
	}
	return nil
}

// emitField is the HPACK decoder's output: the block's fields.
func (c *ClientConn) emitField(f hpack.HeaderField) {
	c.fieldsSz += int(f.Size())
	if c.fieldsSz <= clientMaxHeaderList {
		c.fields = append(c.fields, f)
	}
}

// onBlock decodes a whole header block (the connection's HPACK state
// needs every block, also a gone stream's) and hands it to its stream.
func (c *ClientConn) onBlock(id uint32, end bool, block []byte) error {
	c.fields, c.fieldsSz = c.fields[:0], 0
	if _, err := c.hdec.Write(block); err != nil {
		return fmt.Errorf("hpack: %w", err)
	}
	if err := c.hdec.Close(); err != nil {
		return fmt.Errorf("hpack: %w", err)
	}
	if c.fieldsSz > clientMaxHeaderList {
		return fmt.Errorf("a header list over %d bytes", clientMaxHeaderList)
	}
	c.onHeaders(id, end, c.fields)
	return nil
}

// onHeaders takes a stream's response headers or trailers. fields are
// the reader's, reused for the next block: a stream keeps a copy when
// its caller can ask for them (a stream's, or grpc.Header/Trailer).
func (c *ClientConn) onHeaders(id uint32, end bool, fields []hpack.HeaderField) {
	s := c.stream(id)
	if s == nil {
		return
	}
	var kept []hpack.HeaderField
	if s.desc != nil || s.opts.hdr != nil || s.opts.trl != nil {
		kept = slices.Clone(fields)
	}
	s.mu.Lock()
	if s.st != nil {
		s.mu.Unlock()
		return
	}
	if !s.gotHdr {
		s.gotHdr = true
		if !end {
			s.hdr = kept
		}
		if s.hdrCh != nil {
			close(s.hdrCh)
		}
		s.mu.Unlock()
		if !end {
			if st := clientCheckHeaders(fields); st != nil {
				c.reset(s, st, http2.ErrCodeCancel)
			}
			return
		}
	} else {
		s.mu.Unlock()
		if !end {
			c.reset(s, status.New(codes.Internal, "h2: a second HEADERS without END_STREAM"), http2.ErrCodeProtocol)
			return
		}
	}
	c.endFromServer(s, clientStatusOf(fields), kept)
}

// clientCheckHeaders is the failure of response headers that are not a
// gRPC answer; nil when they are.
func clientCheckHeaders(fields []hpack.HeaderField) *status.Status {
	if hs := clientField(fields, ":status"); hs != "200" {
		st := clientStatusOf(fields)
		if st.Code() == codes.OK {
			st = clientHTTPStatus(hs)
		}
		return st
	}
	if ct := clientField(fields, "content-type"); !strings.HasPrefix(ct, "application/grpc") {
		return status.Newf(codes.Internal, "h2: the response's content-type is %q", ct)
	}
	return nil
}

func clientField(fields []hpack.HeaderField, name string) string {
	for _, f := range fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// endFromServer ends s on the server's END_STREAM; a stream still
// sending is reset (NO_ERROR), as the server needs no more of it.
func (c *ClientConn) endFromServer(s *clientStream, st *status.Status, trl []hpack.HeaderField) {
	if !c.detach(s) {
		return
	}
	s.finish(st, trl)
	if !s.sentEnd.Load() {
		c.queue(clientCtrl{kind: 'r', id: s.id, val: uint32(http2.ErrCodeNo)})
	}
}

// onData takes a stream's DATA, crediting the connection at once and the
// stream as its reader keeps up.
func (c *ClientConn) onData(f *http2.DataFrame) {
	n := f.Header().Length
	c.recvUnacked += n
	var connCredit uint32
	if c.recvUnacked >= c.opts.ConnWindow/4 {
		connCredit, c.recvUnacked = c.recvUnacked, 0
	}
	s := c.stream(f.StreamID)
	var credit uint32
	var tooBig error
	if s != nil {
		s.mu.Lock()
		if s.st == nil {
			s.buf = append(s.buf, f.Data()...)
			s.unacked += n
			credit = s.creditLocked()
			if b := s.buf[s.off:]; len(b) >= 5 {
				if m := uint32(b[1])<<24 | uint32(b[2])<<16 | uint32(b[3])<<8 | uint32(b[4]); int64(m) > int64(s.opts.maxRecv) {
					tooBig = status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", m, s.opts.maxRecv)
				}
			}
		}
		s.mu.Unlock()
		if s.notify != nil && !f.StreamEnded() {
			select {
			case s.notify <- struct{}{}:
			default:
			}
		}
	}
	if connCredit > 0 || credit > 0 {
		if connCredit > 0 {
			c.queue(clientCtrl{kind: 'w', id: 0, val: connCredit})
		}
		if credit > 0 {
			c.queue(clientCtrl{kind: 'w', id: s.id, val: credit})
		}
	}
	if s == nil {
		return
	}
	if tooBig != nil {
		c.reset(s, status.Convert(tooBig), http2.ErrCodeCancel)
		return
	}
	if f.StreamEnded() {
		c.endFromServer(s, status.New(codes.Internal, "h2: the server ended the stream without trailers"), nil)
	}
}

// onGoAway stops new calls and fails the ones the server will not run.
func (c *ClientConn) onGoAway(f *http2.GoAwayFrame) {
	c.mu.Lock()
	c.goAway = true
	if !c.goAwaySeen || f.LastStreamID < c.goAwayID {
		c.goAwayID, c.goAwaySeen = f.LastStreamID, true
	}
	var gone []*clientStream
	for id, s := range c.streams {
		if id > c.goAwayID {
			gone = append(gone, s)
		}
	}
	c.wakeLocked()
	c.mu.Unlock()
	for _, s := range gone {
		if c.detach(s) {
			s.finish(status.Newf(codes.Unavailable, "h2: the server sent GOAWAY (%v) before running the call", f.ErrCode), nil)
		}
	}
}

// clientRSTStatus is the status of a stream the server reset.
func clientRSTStatus(code http2.ErrCode) *status.Status {
	switch code {
	case http2.ErrCodeRefusedStream:
		return status.New(codes.Unavailable, "h2: the server refused the stream")
	case http2.ErrCodeCancel:
		return status.New(codes.Canceled, "h2: the server cancelled the stream")
	case http2.ErrCodeEnhanceYourCalm:
		return status.New(codes.ResourceExhausted, "h2: the server reset the stream: ENHANCE_YOUR_CALM")
	}
	return status.Newf(codes.Internal, "h2: the server reset the stream: %v", code)
}
