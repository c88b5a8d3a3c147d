package h2

import (
	"bufio"
	"bytes"
	"runtime"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

type itemKind uint8

const (
	kWrite       itemKind = iota // a stream's headers, data and/or trailers
	kSettings                    // our SETTINGS and the connection window's first update
	kSettingsAck                 // the peer's SETTINGS applied
	kPingAck
	kWindow // WINDOW_UPDATE for received data
	kRST
	kGoAway
	kKick  // windows grew: retry blocked streams
	kDrop  // a reset stream: drop what it still has queued
	kClose // flush and close the connection
)

// item is one thing for the writer to do.
type item struct {
	kind itemKind
	sid  uint32
	st   *stream // kWrite from a call, kDrop

	hdr  []hpack.HeaderField // HEADERS before data
	data []byte              // DATA (message with its 5-byte prefix)
	trl  []hpack.HeaderField // trailers (END_STREAM)
	rst  bool                // RST_STREAM NO_ERROR after the trailers (the client still sends)
	buf  *[]byte             // data's buffer, returned to the pool once written

	code       http2.ErrCode
	incr       uint32
	ping       [8]byte
	debug      string
	closeAfter bool
	settings   []http2.Setting
	maxFrame   uint32
	tableSize  uint32
	hasTable   bool
}

// enqueue queues it for the writer, starting a writer goroutine if none
// runs.
func (c *conn) enqueue(it item) { c.push(it, false) }

// push queues it; with inline, a caller that finds no writer running
// writes the queue itself (a call's answer, the connection's only call
// in flight: no hand-off to another goroutine). The reader never writes
// inline: a client that does not read while it writes would stall it.
func (c *conn) push(it item, inline bool) {
	c.qmu.Lock()
	if c.wstopped {
		// The connection is gone: nothing is written any more.
		c.qmu.Unlock()
		if it.buf != nil {
			putBuf(it.buf)
		}
		return
	}
	c.q = append(c.q, it)
	start := !c.writing
	if start {
		c.writing = true
	}
	c.qmu.Unlock()
	switch {
	case !start:
	case inline:
		c.drain(false)
	default:
		go c.drainFn()
	}
}

// writer is the writing state of a connection, used by whoever holds
// conn.writing.
type writer struct {
	c        *conn
	bw       *bufio.Writer
	fr       *http2.Framer
	enc      *hpack.Encoder
	hbuf     bytes.Buffer
	maxFrame uint32
	blocked  []*stream // streams whose data waits for a window, in order
	closing  bool
}

func newWriter(c *conn) *writer {
	w := &writer{c: c, maxFrame: 16384}
	w.bw = bufio.NewWriterSize(c.nc, c.srv.opts.WriteBufferSize)
	w.fr = http2.NewFramer(w.bw, nil)
	w.enc = hpack.NewEncoder(&w.hbuf)
	return w
}

// drain writes what is queued until the queue is empty, flushes and
// gives up the writing role. With yield (the writer goroutine), it
// yields the processor once before the flush, so that answers about to
// be queued go out in the same write, as the remoting port's writer does.
func (c *conn) drain(yield bool) {
	w := c.w
	yielded := false
	for {
		c.qmu.Lock()
		items := c.q
		if len(items) > 0 {
			c.q, c.spare = c.spare, nil
		}
		c.qmu.Unlock()
		if len(items) > 0 {
			for i := range items {
				if err := w.do(&items[i]); err != nil {
					c.stopWriting(err)
					return
				}
			}
			clear(items)
			c.qmu.Lock()
			c.spare = items[:0]
			c.qmu.Unlock()
			continue
		}
		if yield && !yielded {
			yielded = true
			runtime.Gosched()
			continue
		}
		if w.bw.Buffered() > 0 {
			if err := w.bw.Flush(); err != nil {
				c.stopWriting(err)
				return
			}
		}
		if w.closing {
			c.stopWriting(nil)
			return
		}
		c.qmu.Lock()
		if len(c.q) > 0 {
			c.qmu.Unlock()
			yielded = false
			continue
		}
		c.writing = false
		c.qmu.Unlock()
		return
	}
}

// stopWriting closes the connection; no writer starts again.
func (c *conn) stopWriting(err error) {
	c.qmu.Lock()
	c.wstopped = true
	c.writing = false
	c.q = nil
	c.qmu.Unlock()
	c.close(err)
}

func (w *writer) do(it *item) error {
	switch it.kind {
	case kWrite:
		s := it.st
		if s == nil {
			// An answer without a call (refused): trailers only.
			return w.writeStream(nil, it)
		}
		if s.wdead {
			w.release(it)
			return nil
		}
		if len(s.wpending) > 0 {
			s.wpending = append(s.wpending, *it)
			return nil
		}
		return w.writeStream(s, it)
	case kSettings:
		if err := w.fr.WriteSettings(it.settings...); err != nil {
			return err
		}
		if it.incr > 0 {
			return w.fr.WriteWindowUpdate(0, it.incr)
		}
	case kSettingsAck:
		if it.maxFrame >= 16384 && it.maxFrame <= 1<<24-1 {
			w.maxFrame = it.maxFrame
		}
		if it.hasTable {
			w.enc.SetMaxDynamicTableSizeLimit(it.tableSize)
		}
		if err := w.fr.WriteSettingsAck(); err != nil {
			return err
		}
		return w.unblock()
	case kPingAck:
		return w.fr.WritePing(true, it.ping)
	case kWindow:
		return w.fr.WriteWindowUpdate(it.sid, it.incr)
	case kRST:
		return w.fr.WriteRSTStream(it.sid, it.code)
	case kGoAway:
		if err := w.fr.WriteGoAway(it.sid, it.code, []byte(it.debug)); err != nil {
			return err
		}
		if it.closeAfter {
			w.closing = true
		}
	case kClose:
		w.closing = true
	case kKick:
		return w.unblock()
	case kDrop:
		s := it.st
		s.wdead = true
		for i := range s.wpending {
			w.release(&s.wpending[i])
		}
		s.wpending = nil
		w.c.forget(s)
	}
	return nil
}

// unblock writes what blocked streams can now send.
func (w *writer) unblock() error {
	if w.c.sendWin.Load() <= 0 {
		return nil
	}
	blocked := w.blocked
	w.blocked = nil
	for i, s := range blocked {
		for len(s.wpending) > 0 && !s.wdead {
			it := s.wpending[0]
			s.wpending = s.wpending[1:]
			if err := w.writeStream(s, &it); err != nil {
				return err
			}
			if s.inBlocked {
				// Blocked again (writeStream put the rest back first).
				break
			}
		}
		if !s.inBlocked && len(s.wpending) == 0 {
			s.wpending = nil
		}
		if w.c.sendWin.Load() <= 0 {
			w.blocked = append(w.blocked, blocked[i+1:]...)
			break
		}
	}
	return nil
}

// writeStream writes it for s (nil: a refused call), as far as the
// windows let it; the rest waits in s.wpending.
func (w *writer) writeStream(s *stream, it *item) error {
	if it.hdr != nil {
		if err := w.writeHeaders(it.sid, it.hdr, false); err != nil {
			return err
		}
		it.hdr = nil
	}
	if s != nil {
		s.inBlocked = false
	}
	for len(it.data) > 0 {
		n := min(int64(len(it.data)), int64(w.maxFrame), w.c.sendWin.Load(), s.sendWin.Load())
		if n <= 0 {
			// Wait for WINDOW_UPDATE: this item first, then the rest.
			s.wpending = append([]item{*it}, s.wpending...)
			s.inBlocked = true
			w.blocked = append(w.blocked, s)
			return nil
		}
		if debugW {
			println("data", it.sid, n, len(it.data), it.data[0], w.c.sendWin.Load(), s.sendWin.Load())
		}
		if err := w.fr.WriteData(it.sid, false, it.data[:n]); err != nil {
			return err
		}
		w.c.wrote.Store(true)
		w.c.sendWin.Add(-n)
		s.sendWin.Add(-n)
		it.data = it.data[n:]
		s.sent(int(n))
	}
	w.release(it)
	if it.trl != nil {
		if err := w.writeHeaders(it.sid, it.trl, true); err != nil {
			return err
		}
		if s != nil {
			w.c.forget(s)
		}
		if it.rst {
			return w.fr.WriteRSTStream(it.sid, http2.ErrCodeNo)
		}
	}
	return nil
}

func (w *writer) release(it *item) {
	if it.buf != nil {
		putBuf(it.buf)
		it.buf = nil
		it.data = nil
	}
}

// writeHeaders encodes fields into HEADERS (and CONTINUATION frames).
func (w *writer) writeHeaders(sid uint32, fields []hpack.HeaderField, end bool) error {
	w.hbuf.Reset()
	for _, f := range fields {
		if err := w.enc.WriteField(f); err != nil {
			return err
		}
	}
	w.c.wrote.Store(true)
	block := w.hbuf.Bytes()
	first := true
	for {
		n := min(len(block), int(w.maxFrame))
		frag, last := block[:n], n == len(block)
		block = block[n:]
		var err error
		if first {
			err = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: frag, EndStream: end, EndHeaders: last})
			first = false
		} else {
			err = w.fr.WriteContinuation(sid, last, frag)
		}
		if err != nil || last {
			return err
		}
	}
}

const debugW = false
