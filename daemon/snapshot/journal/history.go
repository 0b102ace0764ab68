package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// History is a file's versions, oldest first, and what retention thinned
// of them. Damaged counts entries that did not check (and are not
// listed).
type History struct {
	Versions []Entry
	Thinned  Thinned
	Damaged  int
}

// MaxHistory bounds the versions History returns: the newest are kept.
const MaxHistory = 10_000

// History lists path's versions.
func (j *Journal) History(p string) (History, error) {
	var h History
	err := j.db.View(func(tx *bolt.Tx) error {
		bv := tx.Bucket(bucketVersions)
		prefix := append([]byte(p), 0)
		c := tx.Bucket(bucketPaths).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if len(k) != len(prefix)+8 {
				continue // a longer path sharing the prefix cannot hold a NUL: never
			}
			seq := k[len(prefix):]
			e, err := decodeEntry(beUint64(seq), bv.Get(seq))
			if err != nil || e.Path != p {
				h.Damaged++
				continue
			}
			h.Versions = append(h.Versions, e)
		}
		h.Thinned = decodeThinned(tx.Bucket(bucketThinned).Get([]byte(p)))
		h.Thinned.KeepAll, h.Thinned.KeepHourly, h.Thinned.MaxBytes = j.o.KeepAll, j.o.KeepHourly, j.o.MaxBytes
		return nil
	})
	if len(h.Versions) > MaxHistory {
		h.Versions = slices.Clone(h.Versions[len(h.Versions)-MaxHistory:])
	}
	if h.Damaged > 0 {
		j.noteDamage(fmt.Sprintf("%d entries of the version journal do not check (damaged) and are not listed", h.Damaged))
	}
	return h, err
}

func (j *Journal) noteDamage(why string) {
	j.mu.Lock()
	if j.problem == "" {
		j.log.Warn("version journal: " + why)
		j.problem = why
	}
	j.mu.Unlock()
}

// Version is the entry numbered seq.
func (j *Journal) Version(seq uint64) (Entry, bool, error) {
	var e Entry
	var ok bool
	err := j.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketVersions).Get(seqKey(seq))
		if v == nil {
			return nil
		}
		var err error
		if e, err = decodeEntry(seq, v); err != nil {
			j.noteDamage(fmt.Sprintf("the version journal's entry %d does not check (damaged)", seq))
			return fmt.Errorf("version %d: %w", seq, err)
		}
		ok = true
		return nil
	})
	return e, ok, err
}

// At is the version of path that stood at t: the newest whose time is
// not after t.
func (j *Journal) At(p string, t time.Time) (Entry, bool, error) {
	h, err := j.History(p)
	if err != nil {
		return Entry{}, false, err
	}
	for i := len(h.Versions) - 1; i >= 0; i-- {
		if !h.Versions[i].At.After(t) {
			return h.Versions[i], true, nil
		}
	}
	return Entry{}, false, nil
}

// Newest is path's newest version that holds a content (a deletion or a
// version not kept are passed over), and whether the newest of all is it.
func (j *Journal) Newest(p string) (e Entry, newestOfAll bool, ok bool, err error) {
	h, err := j.History(p)
	if err != nil {
		return Entry{}, false, false, err
	}
	for i := len(h.Versions) - 1; i >= 0; i-- {
		if h.Versions[i].Kept() {
			return h.Versions[i], i == len(h.Versions)-1, true, nil
		}
	}
	return Entry{}, false, false, nil
}

// Count is the number of versions held.
func (j *Journal) Count() (int, error) {
	var n int
	err := j.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketVersions).Stats().KeyN
		return nil
	})
	return n, err
}

// latencies keeps the last settle-to-durable times, for the benchmarks
// and the metrics.
type latencies struct {
	mu   sync.Mutex
	ring [1024]time.Duration
	n    int
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.ring[l.n%len(l.ring)] = d
	l.n++
	l.mu.Unlock()
}

// Latencies are the last (at most 1024) times from a version's last
// write to its being durable.
func (j *Journal) Latencies() []time.Duration {
	j.lat.mu.Lock()
	defer j.lat.mu.Unlock()
	n := min(j.lat.n, len(j.lat.ring))
	return slices.Clone(j.lat.ring[:n])
}
