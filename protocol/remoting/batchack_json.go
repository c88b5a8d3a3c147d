package remoting

import (
	"encoding/base64"
	"strconv"
)

// decodeBatchAckFast decodes a BATCH_ACK_MESSAGE body of the plain shape
// clients write: an object of "brokerName" and "acks", each ack an object
// of BatchAck's short keys, strings without escapes or non-ASCII bytes,
// integers, and "b" a base64 string or null. It reports false for
// anything else (another key, another null, an escape, a float, white space inside a value, an
// out-of-range number), and DecodeBatchAckBody then runs encoding/json,
// so the fast path only ever returns what json.Unmarshal would. On the
// leader, json.Unmarshal of batch ack bodies was a tenth of the CPU of a
// pop run with 16 consumers, and its recursion grew every handler's stack.
func decodeBatchAckFast(b []byte) (BatchAckBody, bool) {
	p := jsonScan{b: b}
	var body BatchAckBody
	ok := p.object(func(key []byte) bool {
		switch string(key) {
		case "brokerName":
			s, ok := p.str()
			body.BrokerName = s
			return ok
		case "acks":
			if !p.byte('[') {
				return false
			}
			body.Acks = []BatchAck{}
			if p.peek(']') {
				return p.byte(']')
			}
			for {
				var a BatchAck
				if !p.object(func(key []byte) bool { return p.ackField(string(key), &a) }) {
					return false
				}
				body.Acks = append(body.Acks, a)
				if p.peek(',') {
					p.i++
					continue
				}
				return p.byte(']')
			}
		}
		return false
	})
	p.space()
	return body, ok && p.i == len(p.b)
}

// jsonScan reads the subset of JSON decodeBatchAckFast accepts.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek skips white space and reports whether c is next.
func (p *jsonScan) peek(c byte) bool {
	p.space()
	return p.i < len(p.b) && p.b[p.i] == c
}

// byte skips white space and c, reporting whether c was there.
func (p *jsonScan) byte(c byte) bool {
	if !p.peek(c) {
		return false
	}
	p.i++
	return true
}

// object reads an object, calling field for each key with the scanner
// at the value.
func (p *jsonScan) object(field func(key []byte) bool) bool {
	if !p.byte('{') {
		return false
	}
	if p.peek('}') {
		p.i++
		return true
	}
	for {
		key, ok := p.raw()
		if !ok || !p.byte(':') || !field(key) {
			return false
		}
		if p.peek(',') {
			p.i++
			continue
		}
		return p.byte('}')
	}
}

// raw reads a string of printable ASCII without escapes and returns its
// bytes (aliasing the body).
func (p *jsonScan) raw() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

func (p *jsonScan) str() (string, bool) {
	s, ok := p.raw()
	return string(s), ok
}

// int reads an integer of bits bits.
func (p *jsonScan) int(bits int) (int64, bool) {
	p.space()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.b[digits] == '0' && p.i-digits > 1) {
		return 0, false // no digits, or a leading zero JSON forbids
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false // json.Unmarshal refuses a float for an int
		}
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, bits)
	return v, err == nil
}

func (p *jsonScan) ackField(key string, a *BatchAck) bool {
	var ok bool
	switch key {
	case "c":
		a.ConsumerGroup, ok = p.str()
	case "t":
		a.Topic, ok = p.str()
	case "r":
		a.RetryFlag, ok = p.str()
	case "so":
		a.StartOffset, ok = p.int(64)
	case "q":
		var v int64
		v, ok = p.int(32)
		a.QueueID = int32(v)
	case "rq":
		var v int64
		v, ok = p.int(32)
		a.ReviveQueueID = int32(v)
	case "pt":
		a.PopTime, ok = p.int(64)
	case "it":
		a.InvisibleTime, ok = p.int(64)
	case "b":
		if p.space(); len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
			p.i += 4
			a.Bits = nil // a Go client's empty bit set; json sets nil too
			return true
		}
		var s []byte
		if s, ok = p.raw(); ok {
			// As encoding/json decodes a []byte.
			a.Bits = make([]byte, base64.StdEncoding.DecodedLen(len(s)))
			n, err := base64.StdEncoding.Decode(a.Bits, s)
			a.Bits, ok = a.Bits[:n], err == nil
		}
	}
	return ok
}
