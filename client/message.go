package client

import (
	"fmt"
	"strings"

	"github.com/raftmq/raftmq/message"
)

// AnyQueue as Message.QueueID lets the producer choose the queue, round
// robin over the route's write queues.
const AnyQueue int32 = -1

// Message is a message to send.
type Message struct {
	Topic string
	// QueueID is the queue to write; AnyQueue (-1) lets the producer pick
	// round robin. The zero value means queue 0.
	QueueID int32
	Body    []byte
	// Tags becomes the TAGS property (one tag, used for filtering).
	Tags string
	// Keys become the KEYS property, joined by spaces; they are indexed
	// for look-ups by key. A key must not contain a space.
	Keys []string
	// Flag is the user flag, stored as is.
	Flag int32
	// Properties are sent as they are, except that Tags and Keys, when
	// set, replace TAGS and KEYS. A UNIQ_KEY here is used as the message
	// id; without one the producer sets a fresh one. Names must be
	// non-empty; names and values must not contain \x01 or \x02.
	Properties map[string]string
}

// NewMessage returns a message for topic with the producer choosing the
// queue.
func NewMessage(topic string, body []byte) *Message {
	return &Message{Topic: topic, QueueID: AnyQueue, Body: body}
}

// check validates what the broker would reject as MESSAGE_ILLEGAL, so that
// such messages fail before anything is sent.
func (m *Message) check() error {
	if err := message.CheckTopic(m.Topic); err != nil {
		return err
	}
	if len(m.Body) > message.MaxBodySize {
		return fmt.Errorf("client: body of %d bytes exceeds %d: %w", len(m.Body), message.MaxBodySize, message.ErrMessageTooLarge)
	}
	if m.QueueID < AnyQueue {
		return fmt.Errorf("client: queue id %d: want >= 0, or AnyQueue", m.QueueID)
	}
	if err := checkProperty(message.PropertyTags, m.Tags); err != nil {
		return err
	}
	for _, k := range m.Keys {
		if k == "" || strings.Contains(k, message.KeySeparator) {
			return fmt.Errorf("client: key %q is empty or contains a space: %w", k, message.ErrBadProperty)
		}
		if err := checkProperty(message.PropertyKeys, k); err != nil {
			return err
		}
	}
	for k, v := range m.Properties {
		if err := checkProperty(k, v); err != nil {
			return err
		}
	}
	return nil
}

func checkProperty(k, v string) error {
	if k == "" || strings.ContainsAny(k, "\x01\x02") || strings.ContainsAny(v, "\x01\x02") {
		return fmt.Errorf("client: property %q=%q: empty name or separator character: %w", k, v, message.ErrBadProperty)
	}
	return nil
}

// uniqKey returns the message's own UNIQ_KEY, or "".
func (m *Message) uniqKey() string { return m.Properties[message.PropertyUniqKey] }

// overridden reports whether property k is replaced by a Message field.
func (m *Message) overridden(k string) bool {
	switch k {
	case message.PropertyTags:
		return m.Tags != ""
	case message.PropertyKeys:
		return len(m.Keys) > 0
	}
	return false
}

// writeProperties writes the properties string of m, with UNIQ_KEY set to
// uniq, in RocketMQ's encoding (name \x01 value \x02 per pair). m must
// have been checked.
func (m *Message) writeProperties(b *strings.Builder, uniq string) {
	pair := func(k, v string) {
		b.WriteString(k)
		b.WriteByte(message.NameValueSeparator)
		b.WriteString(v)
		b.WriteByte(message.PropertySeparator)
	}
	for k, v := range m.Properties {
		if k != message.PropertyUniqKey && !m.overridden(k) {
			pair(k, v)
		}
	}
	if m.Tags != "" {
		pair(message.PropertyTags, m.Tags)
	}
	if len(m.Keys) > 0 {
		b.WriteString(message.PropertyKeys)
		b.WriteByte(message.NameValueSeparator)
		for i, k := range m.Keys {
			if i > 0 {
				b.WriteString(message.KeySeparator)
			}
			b.WriteString(k)
		}
		b.WriteByte(message.PropertySeparator)
	}
	pair(message.PropertyUniqKey, uniq)
}
