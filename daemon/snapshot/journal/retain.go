package journal

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// KeepRefName is the ref that holds the journal's blobs for git's
// garbage collection: a commit of a tree of every blob an entry holds.
// It is no snapshot (refs/snapshots/) and is never shipped.
const KeepRefName = "refs/continuityd/journal"

// RetainResult says what a retention pass did.
type RetainResult struct {
	Dropped int   // versions thinned
	Kept    int   // versions left
	Bytes   int64 // the bytes of the blobs they hold
}

// cand is one version retention weighs.
type cand struct {
	seq    uint64
	at     int64
	size   int64
	blob   [20]byte
	kept   bool
	bytes  bool // dropped by the byte bound, not by age
	newest bool // its file's newest: dropped last
	path   string
}

// Retain thins the versions (see the package's comment): every one for
// KeepAll, the newest of each hour until KeepHourly, the newest of each
// day after; then, over MaxBytes, the oldest first, each file's newest
// last.
func (j *Journal) Retain() (RetainResult, error) {
	j.retaining.Lock()
	defer j.retaining.Unlock()
	now := j.now().UnixNano()
	all := int64(j.o.KeepAll)
	hourly := int64(j.o.KeepHourly)
	var res RetainResult
	var cands []cand
	err := j.db.View(func(tx *bolt.Tx) error {
		bv := tx.Bucket(bucketVersions)
		c := tx.Bucket(bucketPaths).Cursor()
		var file []cand
		flush := func() {
			// Newest first: the first of each hour (day) seen is its newest.
			seen := map[int64]bool{}
			for i := len(file) - 1; i >= 0; i-- {
				v := &file[i]
				age := now - v.at
				v.newest = i == len(file)-1
				slot := v.at / int64(time.Hour)
				if age > hourly {
					slot = -1 - v.at/int64(24*time.Hour)
				}
				switch {
				case v.newest || age <= all:
					v.kept = true
				default:
					v.kept = !seen[slot]
				}
				seen[slot] = true
			}
			cands = append(cands, file...)
			file = file[:0]
		}
		var cur []byte
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) < 9 {
				continue
			}
			p, seq := k[:len(k)-9], k[len(k)-8:]
			if !bytes.Equal(p, cur) {
				flush()
				cur = append(cur[:0], p...)
			}
			e, err := decodeEntry(beUint64(seq), bv.Get(seq))
			if err != nil {
				continue // damaged: History names it
			}
			file = append(file, cand{seq: e.Seq, at: e.At.UnixNano(), size: e.Size, blob: e.Blob, path: e.Path})
			if !e.Kept() {
				file[len(file)-1].size = 0
			}
		}
		flush()
		return nil
	})
	if err != nil {
		return res, err
	}
	// The byte bound: each blob counted once, over the versions kept.
	refs := map[[20]byte]int{}
	var bytes int64
	for _, v := range cands {
		if v.kept && v.size > 0 {
			if refs[v.blob] == 0 {
				bytes += v.size
			}
			refs[v.blob]++
		}
	}
	if limit := j.o.MaxBytes; limit > 0 && bytes > limit {
		order := make([]int, 0, len(cands))
		for i, v := range cands {
			if v.kept {
				order = append(order, i)
			}
		}
		slices.SortFunc(order, func(a, b int) int {
			x, y := cands[a], cands[b]
			if x.newest != y.newest {
				if x.newest {
					return 1
				}
				return -1
			}
			return cmp.Compare(x.at, y.at)
		})
		for _, i := range order {
			if bytes <= limit {
				break
			}
			v := &cands[i]
			v.kept, v.bytes = false, true
			if v.size > 0 {
				if refs[v.blob]--; refs[v.blob] == 0 {
					bytes -= v.size
				}
			}
		}
	}
	var drop []cand
	for _, v := range cands {
		if v.kept {
			res.Kept++
		} else {
			drop = append(drop, v)
		}
	}
	res.Bytes = bytes
	j.held.Store(bytes)
	if len(drop) == 0 {
		return res, nil
	}
	err = j.db.Update(func(tx *bolt.Tx) error {
		bv, bp, bb, bt := tx.Bucket(bucketVersions), tx.Bucket(bucketPaths), tx.Bucket(bucketBlobs), tx.Bucket(bucketThinned)
		for _, v := range drop {
			if err := bv.Delete(seqKey(v.seq)); err != nil {
				return err
			}
			if err := bp.Delete(pathKey(v.path, v.seq)); err != nil {
				return err
			}
			if v.size > 0 || v.blob != [20]byte{} {
				if size, n := readBlobVal(bb.Get(v.blob[:])); n > 1 {
					if err := bb.Put(v.blob[:], blobVal(size, n-1)); err != nil {
						return err
					}
				} else if err := bb.Delete(v.blob[:]); err != nil {
					return err
				}
			}
			t := decodeThinned(bt.Get([]byte(v.path)))
			at := time.Unix(0, v.at)
			if t.Count == 0 || at.Before(t.First) {
				t.First = at
			}
			if t.Count == 0 || at.After(t.Last) {
				t.Last = at
			}
			t.Count++
			if v.bytes {
				t.ByBytes++
			} else {
				t.ByAge++
			}
			if err := bt.Put([]byte(v.path), t.encode()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Dropped = len(drop)
	j.log.Info("version journal: retention thinned versions", "dropped", res.Dropped, "kept", res.Kept, "bytes", res.Bytes)
	return res, nil
}

// KeepRef applies retention, then points KeepRefName at a commit of a
// tree of every blob the journal holds, so that the store's garbage
// collection keeps those blobs and drops those of versions thinned. The
// tree is fanned out by the id's first two hex digits, as git's objects
// are.
func (j *Journal) KeepRef(ctx context.Context) error {
	if _, err := j.Retain(); err != nil {
		return err
	}
	fans := map[string][]repo.TreeEntry{}
	err := j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlobs).ForEach(func(k, _ []byte) error {
			if len(k) != 20 {
				return nil
			}
			var id repo.OID
			copy(id[:], k)
			h := id.String()
			fans[h[:2]] = append(fans[h[:2]], repo.TreeEntry{Name: h[2:], Mode: 0o100644, ID: id})
			return nil
		})
	})
	if err != nil {
		return err
	}
	var zw repo.Compressors
	top := make([]repo.TreeEntry, 0, len(fans))
	for fan, ents := range fans {
		id, err := j.o.Repo.WriteLoose("tree", repo.EncodeTree(ents), &zw)
		if err != nil {
			return err
		}
		top = append(top, repo.TreeEntry{Name: fan, Mode: repo.ModeTree, ID: id})
	}
	tree, err := j.o.Repo.WriteLoose("tree", repo.EncodeTree(top), &zw)
	if err != nil {
		return err
	}
	commit, err := j.o.Repo.WriteLoose("commit", repo.CommitObject(tree.String(), j.now().Unix(), "continuityd version journal: the blobs it keeps\n"), &zw)
	if err != nil {
		return err
	}
	_, err = j.o.Repo.Git().Run(ctx, repo.Call{Args: []string{"update-ref", KeepRefName, commit.String()}})
	if err != nil {
		return fmt.Errorf("version journal: %w", err)
	}
	return nil
}

// String describes what retention dropped of a file's versions, for
// people: how many, between which times, and why (their age, the byte
// bound); "" when nothing was.
func (t Thinned) String() string {
	if t.Count == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "thinned: %d %s between %s and %s", t.Count, plural(t.Count), t.First.UTC().Format(time.RFC3339), t.Last.UTC().Format(time.RFC3339))
	var why []string
	if t.ByAge > 0 {
		why = append(why, fmt.Sprintf("%d older than %s (after that the newest of each hour is kept, and after %s the newest of each day)",
			t.ByAge, short(t.KeepAll), short(t.KeepHourly)))
	}
	if t.ByBytes > 0 {
		why = append(why, fmt.Sprintf("%d to keep the journal within its share of keep_bytes (%d bytes; the oldest go first, each file's newest last)",
			t.ByBytes, t.MaxBytes))
	}
	if len(why) > 0 {
		b.WriteString(": ")
		b.WriteString(strings.Join(why, "; "))
	}
	return b.String()
}

// short is d as a person writes it: 24h, not 24h0m0s.
func short(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return "version"
	}
	return "versions"
}
