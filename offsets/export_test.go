package offsets

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/export golden files")

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

var configFiles = []string{TopicsFile, ConsumerOffsetFile, SubscriptionGroupFile}

// TestExportImportRoundTrip: export, import into a fresh DB, export again:
// the files are byte-identical (the clock is fixed), and so is the state.
func TestExportImportRoundTrip(t *testing.T) {
	a := openTestDB(t, "")
	populate(t, a)
	dir1, dir2 := t.TempDir(), filepath.Join(t.TempDir(), "nested", "config")
	require.NoError(t, ExportConfig(a, dir1))

	b := openTestDB(t, "")
	sum, err := ImportConfig(b, dir1)
	require.NoError(t, err)
	require.Equal(t, ImportSummary{
		Files:  []string{TopicsFile, SubscriptionGroupFile, ConsumerOffsetFile},
		Topics: 3, SubscriptionGroups: 2, ConsumerOffsets: 4 + 4 + 12 + 1,
	}, sum)
	require.NoError(t, ExportConfig(b, dir2))
	for _, name := range configFiles {
		require.Equal(t, string(readFile(t, filepath.Join(dir1, name))), string(readFile(t, filepath.Join(dir2, name))), name)
	}
	da, db := dump(t, a), dump(t, b)
	for _, bucket := range []string{bucketTopics, bucketGroups, bucketConsumerOffsets} {
		require.Equal(t, da[bucket], db[bucket], bucket)
	}
	entries, err := os.ReadDir(dir1)
	require.NoError(t, err)
	require.Len(t, entries, 3, "no temp files left behind")
}

// TestExportGolden pins the exported format. Run with -update to rewrite.
func TestExportGolden(t *testing.T) {
	db := openTestDB(t, "")
	populate(t, db)
	dir := t.TempDir()
	require.NoError(t, ExportConfig(db, dir))
	for _, name := range configFiles {
		got := readFile(t, filepath.Join(dir, name))
		golden := filepath.Join("testdata", "export", name)
		if *updateGolden {
			require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
			require.NoError(t, os.WriteFile(golden, got, 0o644))
		}
		require.Equal(t, string(readFile(t, golden)), string(got), "%s differs; rerun with -update if intended", name)
	}
}

func TestImportRocketMQSample(t *testing.T) {
	db := openTestDB(t, "")
	update(t, db, func(tx *Tx) error { // kept: import merges
		return tx.SetConsumerOffset("other", "TopicTest", 0, 5)
	})
	sum, err := ImportConfig(db, filepath.Join("testdata", "rocketmq"))
	require.NoError(t, err)
	require.Equal(t, 4, sum.Topics)
	require.Equal(t, 2, sum.SubscriptionGroups)
	require.Equal(t, 1+4+16, sum.ConsumerOffsets)

	require.NoError(t, db.View(func(tx *Tx) error {
		c, ok, err := tx.Topic("SCHEDULE_TOPIC_XXXX")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, NewTopicConfig("SCHEDULE_TOPIC_XXXX", 18), c)
		c, ok, err = tx.Topic("OrderTopic")
		require.NoError(t, err)
		require.True(t, ok)
		want := NewTopicConfig("OrderTopic", DefaultQueueNums) // absent fields take RocketMQ defaults
		want.Order = true
		want.Attributes = map[string]string{"message.type": "FIFO"}
		require.Equal(t, want, c)

		g, ok, err := tx.SubscriptionGroup("order_group")
		require.NoError(t, err)
		require.True(t, ok)
		wantG := NewSubscriptionGroupConfig("order_group")
		wantG.ConsumeMessageOrderly = true
		wantG.ConsumeBroadcastEnable = false
		wantG.RetryMaxTimes = 3
		require.Equal(t, wantG, g)
		g, ok, err = tx.SubscriptionGroup("please_rename_unique_group_name_4")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, NewSubscriptionGroupConfig("please_rename_unique_group_name_4"), g)

		m, err := tx.ConsumerOffsets("please_rename_unique_group_name_4", "TopicTest")
		require.NoError(t, err)
		require.Equal(t, map[int32]int64{0: 250, 1: 249, 2: 251, 3: 250}, m)
		off, ok, err := tx.ConsumerOffset("order_group", "OrderTopic", 15)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(25), off)
		off, ok, err = tx.ConsumerOffset("other", "TopicTest", 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(5), off)
		return nil
	}))
}

func TestImportMalformed(t *testing.T) {
	validTopics := `{"topicConfigTable":{"T":{"topicName":"T"}}}`
	for _, c := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"syntax error", map[string]string{TopicsFile: "{\n\t\"topicConfigTable\":{\n\t\t\"T\":{,}\n}}"},
			[]string{"topics.json", "line 3, column 8", "invalid character ','"}},
		{"truncated", map[string]string{SubscriptionGroupFile: "{\"subscriptionGroupTable\":{"},
			[]string{"subscriptionGroup.json", "line 1, column 28", "unexpected end of JSON input"}},
		{"empty", map[string]string{ConsumerOffsetFile: " \n"},
			[]string{"consumerOffset.json", "file is empty"}},
		{"wrong type", map[string]string{TopicsFile: "{\"topicConfigTable\":{\n\"T\":{\"readQueueNums\":\"4\"}}}"},
			[]string{"topics.json", "line 2", `field topicConfigTable["T"].readQueueNums`, "JSON string cannot be a Go int32"}},
		{"top level array", map[string]string{TopicsFile: "[]"},
			[]string{"topics.json", "(top level)", "JSON array"}},
		{"invalid topic", map[string]string{TopicsFile: `{"topicConfigTable":{"T":{"readQueueNums":0}}}`},
			[]string{"topics.json", `topicConfigTable["T"]`, "readQueueNums 0 not in 1..1024"}},
		{"bad topic name", map[string]string{TopicsFile: `{"topicConfigTable":{"a b":{}}}`},
			[]string{"topics.json", `topic name "a b"`}},
		{"name mismatch", map[string]string{TopicsFile: `{"topicConfigTable":{"T":{"topicName":"U"}}}`},
			[]string{"topics.json", `topicConfigTable["T"]: topicName is "U"`}},
		{"group mismatch", map[string]string{SubscriptionGroupFile: `{"subscriptionGroupTable":{"g":{"groupName":"h"}}}`},
			[]string{"subscriptionGroup.json", `groupName is "h"`}},
		{"invalid group", map[string]string{SubscriptionGroupFile: `{"subscriptionGroupTable":{"g":{"retryMaxTimes":-5}}}`},
			[]string{"subscriptionGroup.json", "retryMaxTimes -5"}},
		{"no separator", map[string]string{ConsumerOffsetFile: `{"offsetTable":{"TopicTest":{0:1}}}`},
			[]string{"consumerOffset.json", `offsetTable["TopicTest"]`, "exactly one '@'"}},
		{"two separators", map[string]string{ConsumerOffsetFile: `{"offsetTable":{"T@g@h":{0:1}}}`},
			[]string{"consumerOffset.json", "exactly one '@'"}},
		{"empty group", map[string]string{ConsumerOffsetFile: `{"offsetTable":{"T@":{0:1}}}`},
			[]string{"consumerOffset.json", "group name is empty"}},
		{"bad queue id", map[string]string{ConsumerOffsetFile: `{"offsetTable":{"T@g":{"x":1}}}`},
			[]string{"consumerOffset.json", `queue id "x"`}},
		{"negative queue id", map[string]string{ConsumerOffsetFile: `{"offsetTable":{"T@g":{-1:1}}}`},
			[]string{"consumerOffset.json", `queue id "-1"`}},
		{"negative offset", map[string]string{ConsumerOffsetFile: `{"offsetTable":{"T@g":{0:-1}}}`},
			[]string{"consumerOffset.json", "negative offset -1"}},
		{"fractional offset", map[string]string{ConsumerOffsetFile: "{\"offsetTable\":{\"T@g\":{0:1,\n1:1.5}}}"},
			[]string{"consumerOffset.json", "line 2, column 5", `field offsetTable["T@g"]`, "JSON number 1.5 cannot be a Go int64"}},
		{"later file bad, nothing applied", map[string]string{TopicsFile: validTopics, ConsumerOffsetFile: `{"offsetTable":{"T@g":{0:"x"}}}`},
			[]string{"consumerOffset.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range c.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
			}
			db := openTestDB(t, "")
			before := dump(t, db)
			_, err := ImportConfig(db, dir)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, "offsets: import config: ")
			for _, w := range c.want {
				require.ErrorContains(t, err, w)
			}
			require.Equal(t, before, dump(t, db), "a failed import writes nothing")
		})
	}
}

func TestImportNoFiles(t *testing.T) {
	db := openTestDB(t, "")
	_, err := ImportConfig(db, t.TempDir())
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "none of topics.json")
}

func TestJSONDocQuotesIntKeys(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{0:1,12:3}`, `{"0":1,"12":3}`},
		{"{\"a\":{0:250\n\t\t},\"b\":{ -3 :1}}", "{\"a\":{\"0\":250\n\t\t},\"b\":{ \"-3\" :1}}"},
		{`{"s":"{0:1,2:3}"}`, `{"s":"{0:1,2:3}"}`},                 // inside a string: untouched
		{`{"s":"x\"{0:1"}`, `{"s":"x\"{0:1"}`},                     // escaped quote
		{`{"a":[1, 2,3],"b":{1:2}}`, `{"a":[1, 2,3],"b":{"1":2}}`}, // array numbers untouched
		{`{"0":1}`, `{"0":1}`},
		{`{-:1}`, `{-:1}`},
	} {
		d := newJSONDoc([]byte(c.in))
		require.Equal(t, c.want, string(d.data), c.in)
	}
	d := newJSONDoc([]byte("{0:1,\n1:x}"))
	var v map[string]int
	err := d.unmarshal(&v)
	require.ErrorContains(t, err, "line 2, column 3", "positions refer to the file as written")
}
