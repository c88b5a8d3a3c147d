package remoting

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// JSON bodies. Field names are those of RocketMQ's Java classes. The types
// marshal with encoding/json (json.Marshal works on them directly); their
// MarshalJSON methods write empty lists and maps as [] and {}, never null,
// because Java code iterates them without null checks and the Go client
// panics on a missing brokerAddrs. Decode with DecodeJSON (or the DecodeX
// helpers), which also accepts fastjson's non-standard output.

// DecodeJSON decodes a JSON body into v with encoding/json. If body is not
// standard JSON, it retries after quoting bare object keys: Java's fastjson
// writes maps with integer keys that way, e.g. an Apache name server's
// "brokerAddrs":{0:"10.0.0.1:10911"} for old clients. Errors wrap
// ErrMalformed.
func DecodeJSON(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if fixed, ok := quoteBareKeys(body); ok {
			if err2 := json.Unmarshal(fixed, v); err2 == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("remoting: decode JSON body into %T: %w: %w", v, ErrMalformed, err)
}

// quoteBareKeys returns b with every unquoted object key quoted, and
// whether it changed anything. It copies strings verbatim and reports
// false for input it cannot follow; encoding/json validates the result.
func quoteBareKeys(b []byte) ([]byte, bool) {
	out := make([]byte, 0, len(b)+16)
	var stack []byte // open containers, '{' or '['
	expectKey, changed := false, false
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(b) {
				return nil, false
			}
			out = append(out, b[i:j+1]...)
			i = j + 1
			expectKey = false
			continue
		case c == '{' || c == '[':
			stack = append(stack, c)
			expectKey = c == '{'
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return nil, false
			}
			stack = stack[:len(stack)-1]
			expectKey = false
		case c == ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1] == '{'
		case c == ':':
			expectKey = false
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case expectKey && isBareKeyByte(c):
			j := i
			for j < len(b) && isBareKeyByte(b[j]) {
				j++
			}
			out = append(out, '"')
			out = append(out, b[i:j]...)
			out = append(out, '"')
			i = j
			expectKey, changed = false, true
			continue
		default:
			expectKey = false
		}
		out = append(out, c)
		i++
	}
	return out, changed
}

func isBareKeyByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
		c == '-' || c == '_' || c == '$' || c == '.'
}

// TopicRouteData is the body of a successful GET_ROUTEINFO_BY_TOPIC
// response (RocketMQ's TopicRouteData). Encoded compactly, as the Go client
// requires:
//
//	{"queueDatas":[{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],
//	 "brokerDatas":[{"cluster":"c","brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.1:10911"}}],
//	 "filterServerTable":{}}
//
// (one line, no spaces; orderTopicConf only when set).
type TopicRouteData struct {
	// OrderTopicConf is "brokerName:queueNums;..." for order topics, or
	// empty (omitted).
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []QueueData         `json:"queueDatas"`
	BrokerDatas       []BrokerData        `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// QueueData describes one broker name's queues of a topic.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`  // consumers use queues 0..ReadQueueNums-1
	WriteQueueNums int    `json:"writeQueueNums"` // producers use queues 0..WriteQueueNums-1
	Perm           int    `json:"perm"`           // Perm* bits; 6 = read and write
	TopicSysFlag   int    `json:"topicSysFlag"`
}

// BrokerData lists the addresses of one broker name: broker id -> "ip:port".
// Id MasterID (0) is the one producers write to. The Go client parses
// brokerAddrs with a string split, so addresses must not contain ',' or
// '"' and should be IPv4 literals or host names.
type BrokerData struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs"` // JSON keys "0", "1", ...
}

// MarshalJSON writes nil lists and maps as [] and {}.
func (r TopicRouteData) MarshalJSON() ([]byte, error) {
	type plain TopicRouteData
	p := plain(r)
	if p.QueueDatas == nil {
		p.QueueDatas = []QueueData{}
	}
	if p.BrokerDatas == nil {
		p.BrokerDatas = []BrokerData{}
	}
	if p.FilterServerTable == nil {
		p.FilterServerTable = map[string][]string{}
	}
	return json.Marshal(p)
}

// MarshalJSON writes a nil BrokerAddrs as {}: the Go client panics on a
// route whose brokerAddrs is missing.
func (d BrokerData) MarshalJSON() ([]byte, error) {
	type plain BrokerData
	p := plain(d)
	if p.BrokerAddrs == nil {
		p.BrokerAddrs = map[int64]string{}
	}
	return json.Marshal(p)
}

// Encode returns the JSON body.
func (r *TopicRouteData) Encode() ([]byte, error) { return json.Marshal(r) }

// DecodeTopicRouteData decodes a route body, standard JSON or fastjson's
// bare-integer-key form.
func DecodeTopicRouteData(body []byte) (TopicRouteData, error) {
	var r TopicRouteData
	err := DecodeJSON(body, &r)
	return r, err
}

// HeartbeatData is the body of HEART_BEAT (34).
type HeartbeatData struct {
	ClientID        string         `json:"clientID"` // "ip@pid" or similar
	ProducerDataSet []ProducerData `json:"producerDataSet"`
	ConsumerDataSet []ConsumerData `json:"consumerDataSet"`
}

// ProducerData names a producer group of the client.
type ProducerData struct {
	GroupName string `json:"groupName"`
}

// ConsumerData describes a consumer group of the client.
type ConsumerData struct {
	GroupName string `json:"groupName"`
	// ConsumeType: "CONSUME_PASSIVELY" (push), "CONSUME_ACTIVELY" (pull),
	// "CONSUME_POP".
	ConsumeType string `json:"consumeType"`
	// MessageModel: "CLUSTERING" or "BROADCASTING".
	MessageModel string `json:"messageModel"`
	// ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
	// "CONSUME_FROM_FIRST_OFFSET" or "CONSUME_FROM_TIMESTAMP".
	ConsumeFromWhere    string             `json:"consumeFromWhere"`
	SubscriptionDataSet []SubscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"`
}

// SubscriptionData is one topic subscription of a consumer group.
type SubscriptionData struct {
	Topic     string   `json:"topic"`
	SubString string   `json:"subString"` // "*" or "TagA || TagB"
	TagsSet   []string `json:"tagsSet"`
	// CodeSet holds the tags' Java String.hashCode values. The Go client
	// sends them as JSON strings, Java as numbers; both decode.
	CodeSet []int `json:"codeSet"`
	// SubVersion: Go sends UnixNano, Java milliseconds.
	SubVersion     int64  `json:"subVersion"`
	ExpressionType string `json:"expressionType"` // "TAG" or "SQL92"
}

// MarshalJSON writes nil sets as [].
func (h HeartbeatData) MarshalJSON() ([]byte, error) {
	type plain HeartbeatData
	p := plain(h)
	if p.ProducerDataSet == nil {
		p.ProducerDataSet = []ProducerData{}
	}
	if p.ConsumerDataSet == nil {
		p.ConsumerDataSet = []ConsumerData{}
	}
	return json.Marshal(p)
}

// MarshalJSON writes a nil subscription set as [].
func (d ConsumerData) MarshalJSON() ([]byte, error) {
	type plain ConsumerData
	p := plain(d)
	if p.SubscriptionDataSet == nil {
		p.SubscriptionDataSet = []SubscriptionData{}
	}
	return json.Marshal(p)
}

// MarshalJSON writes nil sets as [].
func (d SubscriptionData) MarshalJSON() ([]byte, error) {
	type plain SubscriptionData
	p := plain(d)
	if p.TagsSet == nil {
		p.TagsSet = []string{}
	}
	if p.CodeSet == nil {
		p.CodeSet = []int{}
	}
	return json.Marshal(p)
}

// UnmarshalJSON accepts codeSet elements as numbers or as strings holding
// numbers.
func (d *SubscriptionData) UnmarshalJSON(b []byte) error {
	type plain SubscriptionData
	var p struct {
		plain
		CodeSet []flexInt `json:"codeSet"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*d = SubscriptionData(p.plain)
	d.CodeSet = nil
	if p.CodeSet != nil {
		d.CodeSet = make([]int, len(p.CodeSet))
		for i, c := range p.CodeSet {
			d.CodeSet[i] = int(c)
		}
	}
	return nil
}

// flexInt is an integer sent as a JSON number or a JSON string.
type flexInt int

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("remoting: %q is not an integer: %w", s, ErrMalformed)
	}
	*f = flexInt(n)
	return nil
}

// Encode returns the JSON body.
func (h *HeartbeatData) Encode() ([]byte, error) { return json.Marshal(h) }

// DecodeHeartbeatData decodes a HEART_BEAT body from a Go or Java client.
func DecodeHeartbeatData(body []byte) (HeartbeatData, error) {
	var h HeartbeatData
	err := DecodeJSON(body, &h)
	return h, err
}

// ConsumerListBody is the body of a GET_CONSUMER_LIST_BY_GROUP response
// (RocketMQ's GetConsumerListByGroupResponseBody).
type ConsumerListBody struct {
	ConsumerIDList []string `json:"consumerIdList"`
}

// MarshalJSON writes a nil list as [].
func (c ConsumerListBody) MarshalJSON() ([]byte, error) {
	type plain ConsumerListBody
	p := plain(c)
	if p.ConsumerIDList == nil {
		p.ConsumerIDList = []string{}
	}
	return json.Marshal(p)
}
