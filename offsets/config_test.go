package offsets

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTopics(t *testing.T) {
	db := openTestDB(t, "")
	order := NewTopicConfig("B", 2)
	order.Order = true
	order.Perm = PermRead | PermWrite | PermInherit
	order.TopicFilterType = FilterMultiTag
	order.TopicSysFlag = 1
	order.Attributes = map[string]string{"message.type": "FIFO"}
	noAttrs := NewTopicConfig("A", 1)
	noAttrs.Attributes = nil
	update(t, db, func(tx *Tx) error {
		require.NoError(t, tx.PutTopic(order))
		require.NoError(t, tx.PutTopic(noAttrs))
		require.NoError(t, tx.PutTopic(NewTopicConfig("C", 3)))
		return nil
	})
	require.NoError(t, db.View(func(tx *Tx) error {
		got, ok, err := tx.Topic("B")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, order, got)
		got, ok, err = tx.Topic("A")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, map[string]string{}, got.Attributes, "stored configs always have attributes")
		_, ok, err = tx.Topic("missing")
		require.NoError(t, err)
		require.False(t, ok)
		_, ok, err = tx.Topic("")
		require.NoError(t, err)
		require.False(t, ok)
		all, err := tx.Topics()
		require.NoError(t, err)
		require.Len(t, all, 3)
		require.Equal(t, []string{"A", "B", "C"}, []string{all[0].TopicName, all[1].TopicName, all[2].TopicName})
		return nil
	}))
	update(t, db, func(tx *Tx) error {
		updated := NewTopicConfig("C", 5)
		require.NoError(t, tx.PutTopic(updated))
		ok, err := tx.DeleteTopic("A")
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = tx.DeleteTopic("A")
		require.NoError(t, err)
		require.False(t, ok)
		return nil
	})
	require.NoError(t, db.View(func(tx *Tx) error {
		all, err := tx.Topics()
		require.NoError(t, err)
		require.Len(t, all, 2)
		require.Equal(t, int32(5), all[1].WriteQueueNums)
		return nil
	}))
}

func TestTopicConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*TopicConfig)
		want string
	}{
		{"empty name", func(c *TopicConfig) { c.TopicName = "" }, "topic name is empty"},
		{"long name", func(c *TopicConfig) { c.TopicName = strings.Repeat("a", 128) }, "limit 127"},
		{"bad char", func(c *TopicConfig) { c.TopicName = "a.b" }, `character '.'`},
		{"at", func(c *TopicConfig) { c.TopicName = "a@b" }, `character '@'`},
		{"zero read queues", func(c *TopicConfig) { c.ReadQueueNums = 0 }, "readQueueNums 0 not in 1..1024"},
		{"too many write queues", func(c *TopicConfig) { c.WriteQueueNums = 1025 }, "writeQueueNums 1025"},
		{"perm", func(c *TopicConfig) { c.Perm = 16 }, "perm 16"},
		{"negative perm", func(c *TopicConfig) { c.Perm = -1 }, "perm -1"},
		{"filter", func(c *TopicConfig) { c.TopicFilterType = "" }, "topicFilterType"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := NewTopicConfig("T", 4)
			c.edit(&cfg)
			err := cfg.Validate()
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, c.want)
		})
	}
	ok := NewTopicConfig(strings.Repeat("a", 127), 1024)
	ok.TopicName = "%RETRY%a|b_c-" + strings.Repeat("Z9", 50)
	require.NoError(t, ok.Validate())

	db := openTestDB(t, "")
	err := db.Update(func(tx *Tx) error { return tx.PutTopic(NewTopicConfig("bad name", 1)) })
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "offsets: put topic")
}

func TestSubscriptionGroups(t *testing.T) {
	db := openTestDB(t, "")
	g := NewSubscriptionGroupConfig("g1")
	require.Equal(t, SubscriptionGroupConfig{
		GroupName: "g1", ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: 16, WhichBrokerWhenConsumeSlowly: 1,
		NotifyConsumerIdsChangedEnable: true, ConsumeTimeoutMinute: 15, Attributes: map[string]string{},
	}, g)
	g.ConsumeMessageOrderly = true
	g.BrokerID = 1
	g.GroupSysFlag = 2
	g.Attributes["k"] = "v"
	update(t, db, func(tx *Tx) error {
		require.NoError(t, tx.PutSubscriptionGroup(g))
		require.NoError(t, tx.PutSubscriptionGroup(NewSubscriptionGroupConfig("g0")))
		return nil
	})
	require.NoError(t, db.View(func(tx *Tx) error {
		got, ok, err := tx.SubscriptionGroup("g1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, g, got)
		_, ok, err = tx.SubscriptionGroup("nope")
		require.NoError(t, err)
		require.False(t, ok)
		all, err := tx.SubscriptionGroups()
		require.NoError(t, err)
		require.Len(t, all, 2)
		require.Equal(t, "g0", all[0].GroupName)
		return nil
	}))
	update(t, db, func(tx *Tx) error {
		ok, err := tx.DeleteSubscriptionGroup("g0")
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = tx.DeleteSubscriptionGroup("g0")
		require.NoError(t, err)
		require.False(t, ok)
		return nil
	})

	for _, c := range []struct {
		name string
		edit func(*SubscriptionGroupConfig)
		want string
	}{
		{"empty name", func(c *SubscriptionGroupConfig) { c.GroupName = "" }, "group name is empty"},
		{"long name", func(c *SubscriptionGroupConfig) { c.GroupName = strings.Repeat("g", 256) }, "limit 255"},
		{"retry queues", func(c *SubscriptionGroupConfig) { c.RetryQueueNums = -1 }, "retryQueueNums -1"},
		{"retry times", func(c *SubscriptionGroupConfig) { c.RetryMaxTimes = -2 }, "retryMaxTimes -2"},
		{"broker id", func(c *SubscriptionGroupConfig) { c.BrokerID = -1 }, "brokerId -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := NewSubscriptionGroupConfig("g")
			c.edit(&cfg)
			err := db.Update(func(tx *Tx) error { return tx.PutSubscriptionGroup(cfg) })
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, c.want)
		})
	}
}

func TestConfigJSONDefaults(t *testing.T) {
	var tc TopicConfig
	require.NoError(t, json.Unmarshal([]byte(`{"topicName":"T","order":true,"unknown":[1,2]}`), &tc))
	want := NewTopicConfig("T", DefaultQueueNums)
	want.Order = true
	require.Equal(t, want, tc)

	var gc SubscriptionGroupConfig
	require.NoError(t, json.Unmarshal([]byte(`{"groupName":"g","consumeEnable":false,"groupRetryPolicy":{"type":"CUSTOMIZED"}}`), &gc))
	wantG := NewSubscriptionGroupConfig("g")
	wantG.ConsumeEnable = false
	require.Equal(t, wantG, gc)

	// Field names are RocketMQ's.
	b, err := json.Marshal(NewTopicConfig("T", 2))
	require.NoError(t, err)
	require.JSONEq(t, `{"topicName":"T","readQueueNums":2,"writeQueueNums":2,"perm":6,
		"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false,"attributes":{}}`, string(b))
	b, err = json.Marshal(NewSubscriptionGroupConfig("g"))
	require.NoError(t, err)
	require.JSONEq(t, `{"groupName":"g","consumeEnable":true,"consumeFromMinEnable":true,
		"consumeBroadcastEnable":true,"consumeMessageOrderly":false,"retryQueueNums":1,"retryMaxTimes":16,
		"brokerId":0,"whichBrokerWhenConsumeSlowly":1,"notifyConsumerIdsChangedEnable":true,"groupSysFlag":0,
		"consumeTimeoutMinute":15,"attributes":{}}`, string(b))
}
