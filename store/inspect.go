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
	"github.com/raftmq/raftmq/commitlog/message"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/index"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/offsets"
)

// ErrInspectFailed is returned by Inspect when it found corruption.
var ErrInspectFailed = errors.New("store: inspection found problems")

// Inspect examines a store directory without changing it: segments with
// entry and message counts (every CRC verified, message body CRCs too),
// consume queues with their offsets, index files and the bbolt contents. It
// writes a report to w and returns ErrInspectFailed (wrapped) if anything
// is corrupt. The store must not be open in another process.
func Inspect(fs vfs.FS, dir string, w io.Writer) error {
	// Files are read through mappings; on a full or failing device a page
	// may not be readable (SIGBUS): report that instead of crashing.
	err := vfs.CatchFault(func() error { return inspect(fs, dir, w) })
	if errors.Is(err, vfs.ErrFault) {
		fmt.Fprintf(w, "\nPROBLEMS (1):\n  - %v\n", err)
		return fmt.Errorf("%w: %w", ErrInspectFailed, err)
	}
	return err
}

func inspect(fs vfs.FS, dir string, w io.Writer) error {
	ro := vfs.ReadOnly(fs)
	var problems []string
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	defer tw.Flush()

	// Commitlog.
	topicMsgs := map[string]int{}
	msgs, badMsgs := 0, 0
	rep, err := commitlog.Inspect(ro, vfs.Join(dir, "commitlog"), func(e commitlog.EntryRef) error {
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
				badMsgs++
				problems = append(problems, fmt.Sprintf("entry %d: message record at physical offset %d: %v",
					e.Index, base+int64(off), err))
				break
			}
			msgs++
			topicMsgs[string(v.Topic)]++
			off += v.Size
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(tw, "commitlog\t%s\n", vfs.Join(dir, "commitlog"))
	fmt.Fprintf(tw, "  durable index (checkpoint)\t%d\tclean shutdown\t%v\n", rep.DurableIndex, rep.CleanShutdown)
	fmt.Fprintf(tw, "  segment\tfirst index\tlast index\tentries\tbytes\tsealed\n")
	for _, s := range rep.Segments {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%v\n", filepath.Base(s.Path), s.FirstIndex, s.LastIndex, s.Entries, s.Bytes, s.Sealed)
	}
	fmt.Fprintf(tw, "  entries\t%d\tmessages\t%d\n", rep.Entries, msgs)
	topics := make([]string, 0, len(topicMsgs))
	for t := range topicMsgs {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		fmt.Fprintf(tw, "  messages in %s\t%d\n", t, topicMsgs[t])
	}
	if rep.TornTail != "" {
		fmt.Fprintf(tw, "  torn tail (unsynced writes; the next open cuts it)\t%s\n", rep.TornTail)
	}
	if rep.Problem != nil {
		problems = append(problems, rep.Problem.Error())
	}

	// Consume queues, read raw: opening them could repair a tail.
	fmt.Fprintf(tw, "consume queues\n  topic\tqueue\tmin offset\tmax offset\tfiles\n")
	if err := inspectQueues(ro, vfs.Join(dir, "consumequeue"), tw); err != nil {
		problems = append(problems, fmt.Sprintf("consume queues: %v", err))
	}

	// Index.
	idx, err := index.Open(ro, vfs.Join(dir, "index"), index.Options{})
	if err != nil {
		problems = append(problems, fmt.Sprintf("index: %v", err))
	} else {
		fmt.Fprintf(tw, "index files\n  file\tentries\tbegin phy\tend phy\n")
		for _, f := range idx.Files() {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\n", f.Name, f.IndexCount-1, f.BeginPhyOffset, f.EndPhyOffset)
		}
		idx.Close()
	}

	// bbolt.
	if err := inspectMeta(dir, tw); err != nil {
		problems = append(problems, fmt.Sprintf("meta.db: %v", err))
	}
	tw.Flush()
	if len(problems) > 0 {
		fmt.Fprintf(w, "\nPROBLEMS (%d):\n", len(problems))
		for _, p := range problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
		return fmt.Errorf("%w: %d problem(s), first: %s", ErrInspectFailed, len(problems), problems[0])
	}
	fmt.Fprintln(w, "\nOK: every CRC verified, no corruption found")
	return nil
}

func inspectMeta(dir string, w io.Writer) error {
	db, err := offsets.Open(filepath.Join(dir, "meta.db"), offsets.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *offsets.Tx) error {
		applied, term, err := tx.AppliedIndex()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "meta.db\n  applied index\t%d\tterm\t%d\n", applied, term)
		topics, err := tx.Topics()
		if err != nil {
			return err
		}
		for _, t := range topics {
			fmt.Fprintf(w, "  topic %s\tqueues %d/%d\tperm %d\n", t.TopicName, t.ReadQueueNums, t.WriteQueueNums, t.Perm)
		}
		groups, err := tx.SubscriptionGroups()
		if err != nil {
			return err
		}
		for _, g := range groups {
			fmt.Fprintf(w, "  group %s\tretry max %d\n", g.GroupName, g.RetryMaxTimes)
		}
		if err := tx.ForEachQueueOffset(func(topic string, q int32, off int64) error {
			fmt.Fprintf(w, "  next queue offset %s/%d\t%d\n", topic, q, off)
			return nil
		}); err != nil {
			return err
		}
		return tx.ForEachConsumerOffset(func(group, topic string, q int32, off int64) error {
			fmt.Fprintf(w, "  consumer offset %s %s/%d\t%d\n", group, topic, q, off)
			return nil
		})
	})
}

// inspectQueues reads every consume queue file directly: 20-byte units
// (phy int64, size int32, tags int64), a unit with size 0 unwritten.
func inspectQueues(fs vfs.FS, root string, w io.Writer) error {
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
			fmt.Fprintf(w, "  %s\t%s\t%d\t%d\t%d\n", topic, q, min, max, len(files))
		}
	}
	return nil
}
