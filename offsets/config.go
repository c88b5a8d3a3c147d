package offsets

import (
	"encoding/json"
	"fmt"
)

// Topic permission bits (RocketMQ PermName).
const (
	PermPriority int32 = 8
	PermRead     int32 = 4
	PermWrite    int32 = 2
	PermInherit  int32 = 1
	// permAll is every defined bit; perm values outside it are invalid.
	permAll = PermPriority | PermRead | PermWrite | PermInherit
)

// Topic filter types (RocketMQ TopicFilterType).
const (
	FilterSingleTag = "SINGLE_TAG"
	FilterMultiTag  = "MULTI_TAG"
)

// RocketMQ defaults and limits.
const (
	DefaultQueueNums   int32 = 16 // TopicConfig read/write queue nums
	MaxQueueNums       int32 = 1024
	MaxTopicNameLen          = 127 // TopicValidator.TOPIC_MAX_LENGTH
	MaxGroupNameLen          = 255 // Validators.CHARACTER_MAX_LENGTH
	DefaultPerm              = PermRead | PermWrite
	defaultRetryQueues int32 = 1
	defaultRetryTimes  int32 = 16
	defaultTimeoutMin  int64 = 15
)

// TopicConfig is RocketMQ's TopicConfig, with its JSON field names.
// Unmarshalling fills absent fields with RocketMQ's defaults.
type TopicConfig struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int32             `json:"readQueueNums"`
	WriteQueueNums  int32             `json:"writeQueueNums"`
	Perm            int32             `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int32             `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes"`
}

// NewTopicConfig returns RocketMQ's default topic config for name with
// queues read and write queues.
func NewTopicConfig(name string, queues int32) TopicConfig {
	return TopicConfig{
		TopicName:       name,
		ReadQueueNums:   queues,
		WriteQueueNums:  queues,
		Perm:            DefaultPerm,
		TopicFilterType: FilterSingleTag,
		Attributes:      map[string]string{},
	}
}

// Validate checks c against RocketMQ's rules; errors wrap ErrInvalidConfig.
func (c TopicConfig) Validate() error {
	if err := checkTopicName(c.TopicName, ErrInvalidConfig); err != nil {
		return err
	}
	for _, n := range []struct {
		field string
		v     int32
	}{{"readQueueNums", c.ReadQueueNums}, {"writeQueueNums", c.WriteQueueNums}} {
		if n.v < 1 || n.v > MaxQueueNums {
			return fmt.Errorf("topic %q: %s %d not in 1..%d: %w", c.TopicName, n.field, n.v, MaxQueueNums, ErrInvalidConfig)
		}
	}
	if c.Perm&^permAll != 0 || c.Perm < 0 {
		return fmt.Errorf("topic %q: perm %d has bits outside %d: %w", c.TopicName, c.Perm, permAll, ErrInvalidConfig)
	}
	if c.TopicFilterType != FilterSingleTag && c.TopicFilterType != FilterMultiTag {
		return fmt.Errorf("topic %q: topicFilterType %q is not %s or %s: %w",
			c.TopicName, c.TopicFilterType, FilterSingleTag, FilterMultiTag, ErrInvalidConfig)
	}
	return nil
}

// normalized returns c with a non-nil Attributes map, so that JSON always
// holds "attributes":{} as RocketMQ writes it.
func (c TopicConfig) normalized() TopicConfig {
	if c.Attributes == nil {
		c.Attributes = map[string]string{}
	}
	return c
}

// topicConfigJSON decodes a TopicConfig while telling absent fields apart.
type topicConfigJSON struct {
	TopicName       *string           `json:"topicName"`
	ReadQueueNums   *int32            `json:"readQueueNums"`
	WriteQueueNums  *int32            `json:"writeQueueNums"`
	Perm            *int32            `json:"perm"`
	TopicFilterType *string           `json:"topicFilterType"`
	TopicSysFlag    *int32            `json:"topicSysFlag"`
	Order           *bool             `json:"order"`
	Attributes      map[string]string `json:"attributes"`
}

func (w topicConfigJSON) config() TopicConfig {
	c := NewTopicConfig("", DefaultQueueNums)
	setIf(&c.TopicName, w.TopicName)
	setIf(&c.ReadQueueNums, w.ReadQueueNums)
	setIf(&c.WriteQueueNums, w.WriteQueueNums)
	setIf(&c.Perm, w.Perm)
	setIf(&c.TopicFilterType, w.TopicFilterType)
	setIf(&c.TopicSysFlag, w.TopicSysFlag)
	setIf(&c.Order, w.Order)
	if w.Attributes != nil {
		c.Attributes = w.Attributes
	}
	return c
}

// UnmarshalJSON decodes RocketMQ JSON, defaulting absent fields as
// RocketMQ's TopicConfig constructor does. Unknown fields are ignored.
func (c *TopicConfig) UnmarshalJSON(data []byte) error {
	var w topicConfigJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = w.config()
	return nil
}

// SubscriptionGroupConfig is RocketMQ's SubscriptionGroupConfig, with its
// JSON field names (groupRetryPolicy and subscriptionDataSet are not kept).
// Unmarshalling fills absent fields with RocketMQ's defaults.
type SubscriptionGroupConfig struct {
	GroupName                      string            `json:"groupName"`
	ConsumeEnable                  bool              `json:"consumeEnable"`
	ConsumeFromMinEnable           bool              `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool              `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool              `json:"consumeMessageOrderly"`
	RetryQueueNums                 int32             `json:"retryQueueNums"`
	RetryMaxTimes                  int32             `json:"retryMaxTimes"`
	BrokerID                       int64             `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64             `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool              `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int32             `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int64             `json:"consumeTimeoutMinute"`
	Attributes                     map[string]string `json:"attributes"`
}

// NewSubscriptionGroupConfig returns RocketMQ's default config for group name.
func NewSubscriptionGroupConfig(name string) SubscriptionGroupConfig {
	return SubscriptionGroupConfig{
		GroupName:                      name,
		ConsumeEnable:                  true,
		ConsumeFromMinEnable:           true,
		ConsumeBroadcastEnable:         true,
		RetryQueueNums:                 defaultRetryQueues,
		RetryMaxTimes:                  defaultRetryTimes,
		WhichBrokerWhenConsumeSlowly:   1,
		NotifyConsumerIdsChangedEnable: true,
		ConsumeTimeoutMinute:           defaultTimeoutMin,
		Attributes:                     map[string]string{},
	}
}

// Validate checks c; errors wrap ErrInvalidConfig.
func (c SubscriptionGroupConfig) Validate() error {
	if err := checkGroupName(c.GroupName, ErrInvalidConfig); err != nil {
		return err
	}
	switch {
	case c.RetryQueueNums < 0 || c.RetryQueueNums > MaxQueueNums:
		return fmt.Errorf("group %q: retryQueueNums %d not in 0..%d: %w", c.GroupName, c.RetryQueueNums, MaxQueueNums, ErrInvalidConfig)
	case c.RetryMaxTimes < -1:
		return fmt.Errorf("group %q: retryMaxTimes %d below -1: %w", c.GroupName, c.RetryMaxTimes, ErrInvalidConfig)
	case c.BrokerID < 0:
		return fmt.Errorf("group %q: brokerId %d is negative: %w", c.GroupName, c.BrokerID, ErrInvalidConfig)
	case c.WhichBrokerWhenConsumeSlowly < 0:
		return fmt.Errorf("group %q: whichBrokerWhenConsumeSlowly %d is negative: %w", c.GroupName, c.WhichBrokerWhenConsumeSlowly, ErrInvalidConfig)
	case c.ConsumeTimeoutMinute < 0:
		return fmt.Errorf("group %q: consumeTimeoutMinute %d is negative: %w", c.GroupName, c.ConsumeTimeoutMinute, ErrInvalidConfig)
	}
	return nil
}

func (c SubscriptionGroupConfig) normalized() SubscriptionGroupConfig {
	if c.Attributes == nil {
		c.Attributes = map[string]string{}
	}
	return c
}

// subscriptionGroupJSON decodes a SubscriptionGroupConfig while telling
// absent fields apart.
type subscriptionGroupJSON struct {
	GroupName                      *string           `json:"groupName"`
	ConsumeEnable                  *bool             `json:"consumeEnable"`
	ConsumeFromMinEnable           *bool             `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         *bool             `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          *bool             `json:"consumeMessageOrderly"`
	RetryQueueNums                 *int32            `json:"retryQueueNums"`
	RetryMaxTimes                  *int32            `json:"retryMaxTimes"`
	BrokerID                       *int64            `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   *int64            `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable *bool             `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   *int32            `json:"groupSysFlag"`
	ConsumeTimeoutMinute           *int64            `json:"consumeTimeoutMinute"`
	Attributes                     map[string]string `json:"attributes"`
}

func (w subscriptionGroupJSON) config() SubscriptionGroupConfig {
	c := NewSubscriptionGroupConfig("")
	setIf(&c.GroupName, w.GroupName)
	setIf(&c.ConsumeEnable, w.ConsumeEnable)
	setIf(&c.ConsumeFromMinEnable, w.ConsumeFromMinEnable)
	setIf(&c.ConsumeBroadcastEnable, w.ConsumeBroadcastEnable)
	setIf(&c.ConsumeMessageOrderly, w.ConsumeMessageOrderly)
	setIf(&c.RetryQueueNums, w.RetryQueueNums)
	setIf(&c.RetryMaxTimes, w.RetryMaxTimes)
	setIf(&c.BrokerID, w.BrokerID)
	setIf(&c.WhichBrokerWhenConsumeSlowly, w.WhichBrokerWhenConsumeSlowly)
	setIf(&c.NotifyConsumerIdsChangedEnable, w.NotifyConsumerIdsChangedEnable)
	setIf(&c.GroupSysFlag, w.GroupSysFlag)
	setIf(&c.ConsumeTimeoutMinute, w.ConsumeTimeoutMinute)
	if w.Attributes != nil {
		c.Attributes = w.Attributes
	}
	return c
}

// UnmarshalJSON decodes RocketMQ JSON, defaulting absent fields as
// RocketMQ's SubscriptionGroupConfig does. Unknown fields are ignored.
func (c *SubscriptionGroupConfig) UnmarshalJSON(data []byte) error {
	var w subscriptionGroupJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = w.config()
	return nil
}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// checkTopicName applies RocketMQ's TopicValidator: 1..127 characters from
// [%|a-zA-Z0-9_-]. Errors wrap class.
func checkTopicName(name string, class error) error {
	return checkName("topic", name, MaxTopicNameLen, class)
}

// CheckGroupName reports whether name is a group name the offsets table
// stores (RocketMQ's group rule: 1..255 characters from [%|a-zA-Z0-9_-]);
// its error wraps ErrInvalidArgument. Whatever replicates a consumer
// offset must check it first: Tx.SetConsumerOffset refuses other names.
func CheckGroupName(name string) error { return checkGroupName(name, ErrInvalidArgument) }

// checkGroupName applies RocketMQ's group rule: 1..255 characters from
// [%|a-zA-Z0-9_-]. Errors wrap class.
func checkGroupName(name string, class error) error {
	return checkName("group", name, MaxGroupNameLen, class)
}

func checkName(kind, name string, maxLen int, class error) error {
	if name == "" {
		return fmt.Errorf("%s name is empty: %w", kind, class)
	}
	if len(name) > maxLen {
		return fmt.Errorf("%s name %.20q... is %d characters, limit %d: %w", kind, name, len(name), maxLen, class)
	}
	for i := 0; i < len(name); i++ {
		if !nameChar(name[i]) {
			return fmt.Errorf("%s name %q: character %q not in [%%|a-zA-Z0-9_-]: %w", kind, name, name[i], class)
		}
	}
	return nil
}

func nameChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '%' || c == '|' || c == '_' || c == '-':
		return true
	}
	return false
}

// Topic returns the config of topic name.
func (t *Tx) Topic(name string) (TopicConfig, bool, error) {
	if name == "" {
		return TopicConfig{}, false, nil
	}
	v := t.topics.Get([]byte(name))
	if v == nil {
		return TopicConfig{}, false, nil
	}
	c, err := decodeTopic(v)
	if err != nil {
		return TopicConfig{}, false, fmt.Errorf("offsets: topic %q: %w", name, err)
	}
	return c, true, nil
}

func decodeTopic(v []byte) (TopicConfig, error) {
	var c TopicConfig
	if err := json.Unmarshal(v, &c); err != nil {
		return TopicConfig{}, fmt.Errorf("%w: %w", err, ErrCorrupt)
	}
	return c.normalized(), nil
}

// PutTopic validates c and stores it, replacing any config of that name.
func (t *Tx) PutTopic(c TopicConfig) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("offsets: put topic: %w", err)
	}
	v, err := json.Marshal(c.normalized())
	if err != nil {
		return fmt.Errorf("offsets: put topic %q: %w", c.TopicName, err)
	}
	return t.put(t.topics, []byte(c.TopicName), v, "topic "+c.TopicName)
}

// DeleteTopic removes the config of topic name, reporting whether it existed.
// Consumer and queue offsets of the topic are left alone.
func (t *Tx) DeleteTopic(name string) (bool, error) {
	if name == "" || t.topics.Get([]byte(name)) == nil {
		return false, nil
	}
	return true, t.del(t.topics, []byte(name), "topic "+name)
}

// Topics returns every topic config, sorted by name.
func (t *Tx) Topics() ([]TopicConfig, error) {
	var out []TopicConfig
	err := t.topics.ForEach(func(k, v []byte) error {
		c, err := decodeTopic(v)
		if err != nil {
			return fmt.Errorf("offsets: topic %q: %w", k, err)
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// SubscriptionGroup returns the config of group name.
func (t *Tx) SubscriptionGroup(name string) (SubscriptionGroupConfig, bool, error) {
	if name == "" {
		return SubscriptionGroupConfig{}, false, nil
	}
	v := t.groups.Get([]byte(name))
	if v == nil {
		return SubscriptionGroupConfig{}, false, nil
	}
	c, err := decodeGroup(v)
	if err != nil {
		return SubscriptionGroupConfig{}, false, fmt.Errorf("offsets: subscription group %q: %w", name, err)
	}
	return c, true, nil
}

func decodeGroup(v []byte) (SubscriptionGroupConfig, error) {
	var c SubscriptionGroupConfig
	if err := json.Unmarshal(v, &c); err != nil {
		return SubscriptionGroupConfig{}, fmt.Errorf("%w: %w", err, ErrCorrupt)
	}
	return c.normalized(), nil
}

// PutSubscriptionGroup validates c and stores it, replacing any config of
// that name.
func (t *Tx) PutSubscriptionGroup(c SubscriptionGroupConfig) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("offsets: put subscription group: %w", err)
	}
	v, err := json.Marshal(c.normalized())
	if err != nil {
		return fmt.Errorf("offsets: put subscription group %q: %w", c.GroupName, err)
	}
	return t.put(t.groups, []byte(c.GroupName), v, "subscription group "+c.GroupName)
}

// DeleteSubscriptionGroup removes the config of group name, reporting
// whether it existed. The group's consumer offsets are left alone (see
// DeleteConsumerOffsets).
func (t *Tx) DeleteSubscriptionGroup(name string) (bool, error) {
	if name == "" || t.groups.Get([]byte(name)) == nil {
		return false, nil
	}
	return true, t.del(t.groups, []byte(name), "subscription group "+name)
}

// SubscriptionGroups returns every subscription group config, sorted by name.
func (t *Tx) SubscriptionGroups() ([]SubscriptionGroupConfig, error) {
	var out []SubscriptionGroupConfig
	err := t.groups.ForEach(func(k, v []byte) error {
		c, err := decodeGroup(v)
		if err != nil {
			return fmt.Errorf("offsets: subscription group %q: %w", k, err)
		}
		out = append(out, c)
		return nil
	})
	return out, err
}
