package schedule

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Recalling a delayed or timer message before it is due (RocketMQ 5's
// RecallMessage). A send of a scheduled message answers a recall handle
// (Handle): the topic, the broker name, the due time, the message id
// (UNIQ_KEY) and the commit log position of the record that waits, which
// is the same on every replica. A recall is a replicated entry (Recall)
// that puts the message's topic and id in the recalled set (Recalled) if
// it is not due yet; a delivery entry whose records include a recalled
// message is refused at apply, and the leader, which skips recalled
// messages when it builds deliveries, builds it again without it. Both are
// decided in log order: a recall applied after the delivery of its message
// finds the horizon (the latest delivery time applied) at or past the due
// time and is refused, so OK means the message was never delivered and
// never will be.

// ErrRecallTooLate is the result of a recall of a message already due:
// delivered, or about to be.
var ErrRecallTooLate = errors.New("schedule: the message is due; too late to recall it")

// ErrBadHandle is returned for a recall handle that does not decode.
var ErrBadHandle = errors.New("schedule: malformed recall handle")

// RecallKeep is how long past its due time a recalled message's entry
// stays in the recalled set (measured against the horizon): a recalled
// message whose delivery falls behind by more than this could be
// delivered after all.
const RecallKeep = 24 * 3600 * 1000 // ms

// Handle is a recall handle's content.
type Handle struct {
	Topic      string
	BrokerName string
	Due        int64 // ms
	MsgID      string
	Phy        int64 // commit log position of the scheduled record
}

// Encode returns the handle as clients get it: "v1 topic broker due id
// phy", base64 (URL alphabet, no padding).
func (h Handle) Encode() string {
	s := strings.Join([]string{"v1", h.Topic, h.BrokerName, strconv.FormatInt(h.Due, 10), h.MsgID, strconv.FormatInt(h.Phy, 10)}, " ")
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// DecodeHandle parses a recall handle.
func DecodeHandle(s string) (Handle, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Handle{}, fmt.Errorf("%w: %v", ErrBadHandle, err)
	}
	f := strings.Split(string(b), " ")
	if len(f) != 6 || f[0] != "v1" || f[1] == "" || f[4] == "" {
		return Handle{}, fmt.Errorf("%w: want v1 TOPIC BROKER DUE ID POSITION", ErrBadHandle)
	}
	due, err1 := strconv.ParseInt(f[3], 10, 64)
	phy, err2 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || due <= 0 || phy < 0 {
		return Handle{}, fmt.Errorf("%w: bad due time or position", ErrBadHandle)
	}
	return Handle{Topic: f[1], BrokerName: f[2], Due: due, MsgID: f[4], Phy: phy}, nil
}

// Recall is the payload of a recall entry: the message of Topic with
// UNIQ_KEY MsgID, due at Due, recalled by a leader whose clock read Now.
type Recall struct {
	Topic string `json:"topic"`
	MsgID string `json:"id"`
	Due   int64  `json:"due"`
	Now   int64  `json:"now"`
}

// Recalled is the replicated recalled set: messages recalled before they
// were due (by topic and UNIQ_KEY, to their due time) and the horizon,
// the latest leader time of an applied delivery.
type Recalled struct {
	Horizon int64            `json:"horizon"`
	Keys    map[string]int64 `json:"keys,omitempty"`
}

func recallKey(topic, id string) string { return topic + "\x00" + id }

// Has reports whether the message of topic with UNIQ_KEY id is recalled.
func (r *Recalled) Has(topic, id string) bool {
	if len(r.Keys) == 0 {
		return false
	}
	_, ok := r.Keys[recallKey(topic, id)]
	return ok
}

// Len returns the number of recalled messages held.
func (r *Recalled) Len() int { return len(r.Keys) }

// Apply applies a recall: ErrRecallTooLate when the message is due by
// the recall's own time or the horizon; a message recalled before stays
// recalled (nil).
func (r *Recalled) Apply(c Recall) error {
	if c.Topic == "" || c.MsgID == "" {
		return fmt.Errorf("%w: recall without topic or message id", ErrBadHandle)
	}
	if r.Has(c.Topic, c.MsgID) {
		return nil
	}
	if c.Due <= max(c.Now, r.Horizon) {
		return fmt.Errorf("%w: due at %d, deliveries have reached %d", ErrRecallTooLate, c.Due, max(c.Now, r.Horizon))
	}
	if r.Keys == nil {
		r.Keys = map[string]int64{}
	}
	r.Keys[recallKey(c.Topic, c.MsgID)] = c.Due
	return nil
}

// Delivered moves the horizon to a delivery's time and forgets recalled
// messages due more than RecallKeep before it. It reports whether
// anything changed.
func (r *Recalled) Delivered(now int64) bool {
	if now <= r.Horizon {
		return false
	}
	r.Horizon = now
	for k, due := range r.Keys {
		if due < now-RecallKeep {
			delete(r.Keys, k)
		}
	}
	return true
}

// Encode returns the set's encoding (JSON), as checkpoints hold it.
func (r *Recalled) Encode() []byte {
	b, _ := json.Marshal(r) // a map of strings and an int: cannot fail
	return b
}

// DecodeRecalled parses Encode's output.
func DecodeRecalled(b []byte) (Recalled, error) {
	var r Recalled
	if err := json.Unmarshal(b, &r); err != nil {
		return Recalled{}, fmt.Errorf("schedule: recalled set: %w", err)
	}
	return r, nil
}
