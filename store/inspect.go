package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
)

// ErrInspectFailed is returned by Inspect when it found corruption.
var ErrInspectFailed = errors.New("store: inspection found problems")

// InspectReport is what Inspect found, for people (Write) and scripts
// (its JSON encoding).
type InspectReport struct {
	Dir       string           `json:"dir"`
	Commitlog InspectCommitlog `json:"commitlog"`
	Queues    []InspectQueue   `json:"consumeQueues"`
	Index     []InspectIndex   `json:"indexFiles"`
	Meta      *InspectMeta     `json:"meta,omitempty"`
	// Journal is the consume queues' tail journal that meta.db names
	// (nil: none), whose units the next open replays into the queues.
	Journal *InspectJournal `json:"tailJournal,omitempty"`
	// Problems are the corruptions found, each naming its file and
	// offset; OK is true when there are none.
	Problems []string `json:"problems"`
	OK       bool     `json:"ok"`
}

// InspectCommitlog is the commit log's part of an InspectReport.
type InspectCommitlog struct {
	Dir           string           `json:"dir"`
	DurableIndex  uint64           `json:"durableIndex"`
	CleanShutdown bool             `json:"cleanShutdown"`
	Segments      []InspectSegment `json:"segments"`
	Entries       int              `json:"entries"`
	Messages      int              `json:"messages"`
	ByTopic       map[string]int   `json:"messagesByTopic"`
	// TornTail: the log ends in unsynced bytes the next open cuts.
	TornTail string `json:"tornTail,omitempty"`
}

// InspectSegment is one commit-log segment.
type InspectSegment struct {
	File       string `json:"file"`
	FirstIndex uint64 `json:"firstIndex"`
	LastIndex  uint64 `json:"lastIndex"`
	Entries    int    `json:"entries"`
	Bytes      int64  `json:"bytes"`
	Sealed     bool   `json:"sealed"`
}

// InspectQueue is one consume queue, read raw.
type InspectQueue struct {
	Topic     string `json:"topic"`
	QueueID   string `json:"queueId"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	Files     int    `json:"files"`
}

// InspectJournal is the consume queues' tail journal: units a
// checkpoint covered that were not in the queues' files yet. A node that
// stopped uncleanly replays them at its next open, so a queue's max offset
// read from its files alone (InspectQueue) may be behind.
type InspectJournal struct {
	File    string `json:"file"`
	Covered int64  `json:"coveredBytes"` // bytes of it the last checkpoint covers
	Records int    `json:"records"`
	Units   int    `json:"units"`
	// Queues are the queues the covered records reach, with the max
	// offset the replay gives each.
	Queues []InspectOffset `json:"queues"`
}

// InspectIndex is one index file.
type InspectIndex struct {
	File     string `json:"file"`
	Entries  int64  `json:"entries"`
	BeginPhy int64  `json:"beginPhyOffset"`
	EndPhy   int64  `json:"endPhyOffset"`
}

// InspectMeta is the bbolt database's content.
type InspectMeta struct {
	AppliedIndex    uint64          `json:"appliedIndex"`
	AppliedTerm     uint64          `json:"appliedTerm"`
	Topics          []InspectTopic  `json:"topics"`
	Groups          []InspectGroup  `json:"groups"`
	QueueOffsets    []InspectOffset `json:"nextQueueOffsets"`
	ConsumerOffsets []InspectOffset `json:"consumerOffsets"`
}

// InspectTopic is a topic's config in the bbolt database.
type InspectTopic struct {
	Topic       string `json:"topic"`
	ReadQueues  int32  `json:"readQueueNums"`
	WriteQueues int32  `json:"writeQueueNums"`
	Perm        int32  `json:"perm"`
}

// InspectGroup is a subscription group's config.
type InspectGroup struct {
	Group         string `json:"group"`
	RetryMaxTimes int32  `json:"retryMaxTimes"`
}

// InspectOffset is a queue offset: the next one of a queue, or a consumer
// group's committed one.
type InspectOffset struct {
	Group   string `json:"group,omitempty"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
}

// Inspect examines a store directory without changing it (InspectDir)
// and writes the report to w as text. It returns ErrInspectFailed
// (wrapped) if anything is corrupt.
func Inspect(fs vfs.FS, dir string, w io.Writer) error {
	rep, err := InspectDir(fs, dir, nil)
	if rep != nil {
		rep.Write(w)
	}
	return err
}

// InspectDir examines a store directory without changing it: segments
// with entry and message counts (every CRC verified, message body CRCs
// too), consume queues with their offsets, index files and the bbolt
// contents. progress, if set, is called after each commit-log entry with
// the entries scanned and the log position reached. It returns the report
// and, if anything is corrupt, ErrInspectFailed (wrapped) with it. The
// store must not be open in another process.
func InspectDir(fs vfs.FS, dir string, progress func(entries int, pos int64)) (*InspectReport, error) {
	rep := &InspectReport{Dir: dir}
	// Files are read through mappings; on a full or failing device a page
	// may not be readable (SIGBUS): report that instead of crashing.
	err := vfs.CatchFault(func() error { return inspect(fs, dir, rep, progress) })
	if errors.Is(err, vfs.ErrFault) {
		rep.Problems = append(rep.Problems, err.Error())
	} else if err != nil {
		return nil, err
	}
	rep.OK = len(rep.Problems) == 0
	if !rep.OK {
		return rep, fmt.Errorf("%w: %d problem(s), first: %s", ErrInspectFailed, len(rep.Problems), rep.Problems[0])
	}
	return rep, nil
}

func inspect(fs vfs.FS, dir string, rep *InspectReport, progress func(int, int64)) error {
	ro := vfs.ReadOnly(fs)
	cl := &rep.Commitlog
	cl.Dir, cl.ByTopic = vfs.Join(dir, "commitlog"), map[string]int{}
	lrep, err := commitlog.Inspect(ro, cl.Dir, func(e commitlog.EntryRef) error {
		if progress != nil {
			progress(cl.Entries+1, e.Pos)
		}
		cl.Entries++
		if e.Type != 0 || len(e.Body) == 0 {
			return nil
		}
		kind, _, payload, err := parseBody(e.Body)
		if err != nil {
			return nil
		}
		recs := entryRecords(kind, payload)
		base := e.Pos + commitlog.HeaderSize + BodyHeaderSize + int64(len(payload)-len(recs))
		for off := 0; off < len(recs); {
			v, err := message.Parse(recs[off:], true)
			if err != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("entry %d: message record at physical offset %d: %v",
					e.Index, base+int64(off), err))
				break
			}
			cl.Messages++
			cl.ByTopic[string(v.Topic)]++
			off += v.Size
		}
		return nil
	})
	if err != nil {
		return err
	}
	cl.DurableIndex, cl.CleanShutdown, cl.Entries, cl.TornTail = lrep.DurableIndex, lrep.CleanShutdown, lrep.Entries, lrep.TornTail
	for _, s := range lrep.Segments {
		cl.Segments = append(cl.Segments, InspectSegment{File: filepath.Base(s.Path), FirstIndex: s.FirstIndex, LastIndex: s.LastIndex,
			Entries: s.Entries, Bytes: s.Bytes, Sealed: s.Sealed})
	}
	if lrep.Problem != nil {
		rep.Problems = append(rep.Problems, lrep.Problem.Error())
	}

	// Consume queues, read raw: opening them could repair a tail.
	if err := inspectQueues(ro, vfs.Join(dir, "consumequeue"), rep); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("consume queues: %v", err))
	}

	// Index.
	idx, err := index.Open(ro, vfs.Join(dir, "index"), index.Options{})
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("index: %v", err))
	} else {
		for _, f := range idx.Files() {
			rep.Index = append(rep.Index, InspectIndex{File: f.Name, Entries: int64(f.IndexCount - 1), BeginPhy: f.BeginPhyOffset, EndPhy: f.EndPhyOffset})
		}
		idx.Close()
	}

	// bbolt.
	m, journal, err := inspectMeta(dir)
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("meta.db: %v", err))
	}
	rep.Meta = m
	if journal != nil {
		if err := inspectJournal(ro, dir, journal, rep); err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		}
	}
	return nil
}

// inspectJournal reads the tail journal that raw (meta.db's mark) names,
// as the next open would replay it, into rep.Journal; an error is what
// would stop that open (the journal missing, short or corrupt).
func inspectJournal(fs vfs.FS, dir string, raw []byte, rep *InspectReport) error {
	m, err := decodeJournalMark(raw)
	if err != nil {
		return err
	}
	name := journalName(m.id)
	j := &InspectJournal{File: name, Covered: m.size}
	rep.Journal = j
	b, err := readJournalFile(fs, vfs.Join(dir, name), name, m)
	if err != nil {
		return err
	}
	at := map[string]int{}
	for off := journalHeaderBytes; off < len(b); {
		r, n, err := consumequeue.DecodeJournalRecord(b[off:])
		if err != nil {
			return fmt.Errorf("tail journal %s at byte %d: %w", name, off, err)
		}
		off += n
		j.Records++
		units := len(r.Units) / consumequeue.UnitSize
		j.Units += units
		key := fmt.Sprintf("%s\x00%d", r.Topic, r.QueueID)
		i, ok := at[key]
		if !ok {
			i = len(j.Queues)
			at[key] = i
			j.Queues = append(j.Queues, InspectOffset{Topic: r.Topic, QueueID: r.QueueID})
		}
		j.Queues[i].Offset = max(j.Queues[i].Offset, r.Start+int64(units))
	}
	sort.Slice(j.Queues, func(a, b int) bool {
		if j.Queues[a].Topic != j.Queues[b].Topic {
			return j.Queues[a].Topic < j.Queues[b].Topic
		}
		return j.Queues[a].QueueID < j.Queues[b].QueueID
	})
	return nil
}

// Write prints the report for people.
func (rep *InspectReport) Write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	cl := &rep.Commitlog
	fmt.Fprintf(tw, "commitlog\t%s\n", cl.Dir)
	fmt.Fprintf(tw, "  durable index (checkpoint)\t%d\tclean shutdown\t%v\n", cl.DurableIndex, cl.CleanShutdown)
	fmt.Fprintf(tw, "  segment\tfirst index\tlast index\tentries\tbytes\tsealed\n")
	for _, s := range cl.Segments {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%v\n", s.File, s.FirstIndex, s.LastIndex, s.Entries, s.Bytes, s.Sealed)
	}
	fmt.Fprintf(tw, "  entries\t%d\tmessages\t%d\n", cl.Entries, cl.Messages)
	topics := make([]string, 0, len(cl.ByTopic))
	for t := range cl.ByTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		fmt.Fprintf(tw, "  messages in %s\t%d\n", t, cl.ByTopic[t])
	}
	if cl.TornTail != "" {
		fmt.Fprintf(tw, "  torn tail (unsynced writes; the next open cuts it)\t%s\n", cl.TornTail)
	}
	fmt.Fprintf(tw, "consume queues\n  topic\tqueue\tmin offset\tmax offset\tfiles\n")
	for _, q := range rep.Queues {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\n", q.Topic, q.QueueID, q.MinOffset, q.MaxOffset, q.Files)
	}
	if j := rep.Journal; j != nil {
		fmt.Fprintf(tw, "tail journal (replayed into the queues at the next open)\t%s\tcovered bytes %d\trecords %d\tunits %d\n", j.File, j.Covered, j.Records, j.Units)
		for _, q := range j.Queues {
			fmt.Fprintf(tw, "  max offset after replay %s/%d\t%d\n", q.Topic, q.QueueID, q.Offset)
		}
	}
	fmt.Fprintf(tw, "index files\n  file\tentries\tbegin phy\tend phy\n")
	for _, f := range rep.Index {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\n", f.File, f.Entries, f.BeginPhy, f.EndPhy)
	}
	if m := rep.Meta; m != nil {
		fmt.Fprintf(tw, "meta.db\n  applied index\t%d\tterm\t%d\n", m.AppliedIndex, m.AppliedTerm)
		for _, t := range m.Topics {
			fmt.Fprintf(tw, "  topic %s\tqueues %d/%d\tperm %d\n", t.Topic, t.ReadQueues, t.WriteQueues, t.Perm)
		}
		for _, g := range m.Groups {
			fmt.Fprintf(tw, "  group %s\tretry max %d\n", g.Group, g.RetryMaxTimes)
		}
		for _, o := range m.QueueOffsets {
			fmt.Fprintf(tw, "  next queue offset %s/%d\t%d\n", o.Topic, o.QueueID, o.Offset)
		}
		for _, o := range m.ConsumerOffsets {
			fmt.Fprintf(tw, "  consumer offset %s %s/%d\t%d\n", o.Group, o.Topic, o.QueueID, o.Offset)
		}
	}
	tw.Flush()
	if len(rep.Problems) > 0 {
		fmt.Fprintf(w, "\nPROBLEMS (%d):\n", len(rep.Problems))
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
		return
	}
	fmt.Fprintln(w, "\nOK: every CRC verified, no corruption found")
}

// inspectMeta reads meta.db, and returns with it the tail journal's mark
// (nil: none).
func inspectMeta(dir string) (*InspectMeta, []byte, error) {
	db, err := offsets.Open(filepath.Join(dir, "meta.db"), offsets.Options{})
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	m := &InspectMeta{}
	var journal []byte
	err = db.View(func(tx *offsets.Tx) error {
		if b, ok := tx.Meta(metaTailJournal); ok {
			journal = append([]byte(nil), b...)
		}
		var err error
		if m.AppliedIndex, m.AppliedTerm, err = tx.AppliedIndex(); err != nil {
			return err
		}
		topics, err := tx.Topics()
		if err != nil {
			return err
		}
		for _, t := range topics {
			m.Topics = append(m.Topics, InspectTopic{Topic: t.TopicName, ReadQueues: t.ReadQueueNums, WriteQueues: t.WriteQueueNums, Perm: t.Perm})
		}
		groups, err := tx.SubscriptionGroups()
		if err != nil {
			return err
		}
		for _, g := range groups {
			m.Groups = append(m.Groups, InspectGroup{Group: g.GroupName, RetryMaxTimes: int32(g.RetryMaxTimes)})
		}
		if err := tx.ForEachQueueOffset(func(topic string, q int32, off int64) error {
			m.QueueOffsets = append(m.QueueOffsets, InspectOffset{Topic: topic, QueueID: q, Offset: off})
			return nil
		}); err != nil {
			return err
		}
		return tx.ForEachConsumerOffset(func(group, topic string, q int32, off int64) error {
			m.ConsumerOffsets = append(m.ConsumerOffsets, InspectOffset{Group: group, Topic: topic, QueueID: q, Offset: off})
			return nil
		})
	})
	if err != nil {
		return nil, nil, err
	}
	return m, journal, nil
}

// inspectQueues reads every consume queue file directly: 20-byte units
// (phy int64, size int32, tags int64), a unit with size 0 unwritten.
func inspectQueues(fs vfs.FS, root string, rep *InspectReport) error {
	topics, err := fs.List(root)
	if errors.Is(err, vfs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, topic := range topics {
		queues, err := fs.List(vfs.Join(root, topic))
		if err != nil {
			return err
		}
		for _, q := range queues {
			files, err := fs.List(vfs.Join(root, topic, q))
			if err != nil {
				return err
			}
			min, max := int64(-1), int64(0)
			var lastPhy int64 = -1
			for _, name := range files {
				var base int64
				if _, err := fmt.Sscanf(name, "%d", &base); err != nil || len(name) != 20 {
					continue
				}
				path := vfs.Join(root, topic, q, name)
				b, err := vfs.ReadFile(fs, path)
				if err != nil {
					return err
				}
				for off := 0; off+consumequeue.UnitSize <= len(b); off += consumequeue.UnitSize {
					phy := int64(binary.BigEndian.Uint64(b[off:]))
					size := int32(binary.BigEndian.Uint32(b[off+8:]))
					if size == 0 && phy == 0 {
						continue
					}
					if size < 0 || phy < 0 || phy < lastPhy {
						return fmt.Errorf("%s at byte %d: bad unit (phy %d, size %d)", path, off, phy, size)
					}
					lastPhy = phy
					o := (base + int64(off)) / consumequeue.UnitSize
					if min < 0 {
						min = o
					}
					max = o + 1
				}
			}
			if min < 0 {
				min = 0
			}
			rep.Queues = append(rep.Queues, InspectQueue{Topic: topic, QueueID: q, MinOffset: min, MaxOffset: max, Files: len(files)})
		}
	}
	return nil
}
