package residency

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/continuityd/continuityd/internal/atomicfile"
)

// Damage to an agent's files is never silent. A write answered 200 lives
// in the write-ahead log until bbolt's next checkpoint, so a log that lost
// records loses acknowledged writes, and numbering on from what bbolt
// holds would hand out again sequence numbers (and Idempotency-Keys) the
// upstreams already hold for other content. Open therefore refuses an agent
// whose log or bbolt file cannot be believed, naming the file and what it
// found, and keeps the file as it is; AcceptLoss is the operator's explicit
// way on (`continuityd recover --accept-loss`).
//
// What a torn write looks like is told apart from damage this way: a crash
// tears at most the one record being written, which was never answered,
// and what follows it is zeros or records of an earlier lap (lower ids).
// A valid record with a higher id after the point where reading stopped
// was written after the damaged one: the records between are lost. A log
// that is missing, shorter than it was preallocated, or all zeros while
// bbolt says records were written and the last process did not close the
// store cleanly may have lost the records bbolt lacked.
//
// Limit: damage to the very last record written looks exactly like a torn
// write and is treated as one.

// DamageError is an agent file that cannot be trusted. Errors from Open
// wrap it; errors.As finds it.
type DamageError struct {
	Agent string // filled in by Open
	Path  string // the file
	Found string // what was found
	Lost  string // what that may have lost
}

func (e *DamageError) Error() string {
	agent := "NAME"
	if e.Agent != "" {
		agent = e.Agent
	}
	return fmt.Sprintf("%s is damaged: %s; %s. The file is kept as it is and the agent is not served. "+
		"To accept the loss and go on: `continuityd recover --agent %s --accept-loss` "+
		"(moves the damaged file aside; numbering goes on past every seq already used), then reload continuityd",
		e.Path, e.Found, e.Lost, agent)
}

// withAgent names the agent in a DamageError inside err.
func withAgent(err error, agent string) error {
	var de *DamageError
	if errors.As(err, &de) {
		de.Agent = agent
	}
	return err
}

// checkWAL decides whether the log found on disk can be believed, given
// the last record id bbolt holds and whether the last process closed the
// store. It returns a description of a torn tail ("" when none) to log.
func checkWAL(f *walFound, applied uint64, clean bool) (torn string, err error) {
	if applied > 0 && !clean {
		lost := "the writes acknowledged after bbolt's last checkpoint (up to 250 ms of them, or half the log) are gone"
		switch {
		case !f.existed:
			return "", &DamageError{Path: f.path,
				Found: fmt.Sprintf("the write-ahead log is missing, while residency.db says %d records were written and continuityd did not stop cleanly", applied),
				Lost:  lost}
		case f.length < f.size:
			return "", &DamageError{Path: f.path,
				Found: fmt.Sprintf("the write-ahead log is %d bytes, but it was preallocated to %d: it was truncated", f.length, f.size),
				Lost:  lost}
		case allZero(f.data):
			return "", &DamageError{Path: f.path,
				Found: fmt.Sprintf("the write-ahead log is all zeros, while residency.db says %d records were written and continuityd did not stop cleanly", applied),
				Lost:  lost}
		}
	}
	last := applied
	if n := len(f.recs); n > 0 && f.recs[n-1].id > last {
		last = f.recs[n-1].id
	}
	if later := recordsAfter(f.data, f.end, last); len(later) > 0 {
		what := "fails its checksum"
		if r, _, ok := recordAt(f.data, f.end); ok {
			what = fmt.Sprintf("carries id %d where %d should follow", r.id, last+1)
		}
		return "", &DamageError{Path: f.path,
			Found: fmt.Sprintf("the record at offset %d %s, yet %d valid records written later follow it (ids %d..%d, from offset %d)",
				f.end, what, len(later), later[0].id, later[len(later)-1].id, later[0].off),
			Lost: fmt.Sprintf("the acknowledged writes from record %d on cannot be replayed in order", last+1)}
	}
	if !clean && f.end+walHeader <= len(f.data) && !allZero(f.data[f.end:f.end+walHeader]) {
		if _, _, ok := recordAt(f.data, f.end); !ok {
			torn = fmt.Sprintf("a record torn by the crash at offset %d (never acknowledged) was skipped", f.end)
		}
	}
	return torn, nil
}

func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

var zeroPage [4096]byte

// openBolt opens an agent's bbolt file after checking its pages, so that
// damage shows at open as a DamageError naming the file, not as a panic.
// The check runs on a read-only open first: a writable open rebuilds the
// freelist by walking every page in a goroutine of bbolt's own, where a
// damaged page panics beyond anyone's recover. For a residency the walk
// takes a few milliseconds.
func openBolt(path string, timeout time.Duration, readOnly bool) (*bolt.DB, error) {
	if _, err := os.Stat(path); err == nil || readOnly {
		db, err := rawOpenBolt(path, timeout, true)
		if err != nil {
			return nil, err
		}
		if err := checkBolt(db, path); err != nil {
			db.Close()
			return nil, err
		}
		if readOnly {
			return db, nil
		}
		if err := db.Close(); err != nil {
			return nil, err
		}
	}
	return rawOpenBolt(path, timeout, false)
}

func rawOpenBolt(path string, timeout time.Duration, readOnly bool) (*bolt.DB, error) {
	var db *bolt.DB
	err := guardBolt(path, func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{
			Timeout:  timeout,
			ReadOnly: readOnly,
			// The freelist is rebuilt on open instead of being written on
			// every commit: fewer pages per fsync on the hot path.
			NoFreelistSync: true,
			FreelistType:   bolt.FreelistMapType,
		})
		if err != nil {
			if errors.Is(err, bolterrors.ErrTimeout) {
				return fmt.Errorf("%s is locked by another process (is another continuityd running with the same state_dir?)", path)
			}
			if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrVersionMismatch) {
				return &DamageError{Path: path, Found: fmt.Sprintf("bbolt cannot open it (%v)", err),
					Lost: "the agent's stored state cannot be read"}
			}
			return fmt.Errorf("open %s: %w", path, err)
		}
		return nil
	})
	return db, err
}

// checkBolt reads every page of the file that is in use, through a walk
// of every bucket and key, in this goroutine, so that a damaged page
// panics where guardBolt recovers it. (bbolt's own Tx.Check cannot serve:
// it first rebuilds the freelist in a goroutine of bbolt's, where a panic
// takes the process down.)
func checkBolt(db *bolt.DB, path string) error {
	return guardBolt(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
				walkBucket(b)
				return nil
			})
		})
	})
}

func walkBucket(b *bolt.Bucket) {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if sub := b.Bucket(k); sub != nil {
				walkBucket(sub)
			}
		}
	}
}

// guardBolt runs fn, turning a panic (bbolt panics on some damaged pages)
// into a DamageError naming the file.
func guardBolt(path string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &DamageError{Path: path, Found: fmt.Sprintf("reading it made bbolt fail (%v)", v),
				Lost: "the agent's stored state cannot be read"}
		}
	}()
	return fn()
}

// Inspection is what Inspect found in an agent's state directory.
type Inspection struct {
	Dir string
	// Damage is the reason the agent is refused, or nil.
	Damage *DamageError
	// Seq is the last sequence number bbolt holds, Reserved the highest one
	// the log may have used past it (numbering goes on above it after a
	// loss is accepted), Applied the last log record bbolt holds.
	Seq, Reserved, Applied uint64
	// Clean reports whether the last process closed the store.
	Clean bool
	// Unapplied is the records the log holds past Applied (not yet in
	// bbolt), and where each lies in the log.
	Unapplied []RecordAt
}

// RecordAt is one write-ahead log record: its id, where it starts in the
// file, and its length with the header.
type RecordAt struct {
	ID             uint64
	Offset, Length int
}

// Inspect reads an agent's residency without changing it: what Open would
// say of its files. It fails (with the lock error) while a running daemon
// has the agent open, which means the agent was not refused.
func Inspect(dir string) (*Inspection, error) {
	in := &Inspection{Dir: dir}
	path := filepath.Join(dir, File)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no residency here: %w", err)
	}
	db, err := openBolt(path, time.Second, true)
	if err != nil {
		var de *DamageError
		if errors.As(err, &de) {
			in.Damage = de
			return in, nil
		}
		return nil, err
	}
	defer db.Close()
	var hasApplied bool
	err = guardBolt(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			st := tx.Bucket(bucketState)
			if st == nil {
				return nil
			}
			if v := st.Get(keyWALApplied); len(v) == 8 {
				in.Applied, hasApplied = binary.BigEndian.Uint64(v), true
			}
			if v := st.Get(keySeqReserved); len(v) == 8 {
				in.Reserved = binary.BigEndian.Uint64(v)
			}
			in.Clean = bytes.Equal(st.Get(keyClean), []byte{1})
			var d doc
			if raw := st.Get(keyDoc); raw != nil {
				if err := json.Unmarshal(raw, &d); err != nil {
					return &DamageError{Path: path, Found: fmt.Sprintf("the stored state does not decode (%v)", err),
						Lost: "the agent's stored state cannot be read"}
				}
			}
			in.Seq = d.Seq
			return nil
		})
	})
	if err != nil {
		var de *DamageError
		if errors.As(err, &de) {
			in.Damage = de
			return in, nil
		}
		return nil, err
	}
	found, err := readWAL(dir, walSize)
	if err != nil {
		return nil, err
	}
	for _, r := range found.recs {
		if r.id > in.Applied {
			in.Unapplied = append(in.Unapplied, RecordAt{ID: r.id, Offset: r.off, Length: walHeader + len(r.payload)})
		}
	}
	if hasApplied {
		if _, err := checkWAL(found, in.Applied, in.Clean); err != nil {
			errors.As(err, &in.Damage)
		}
	}
	return in, nil
}

// AcceptedLoss is what AcceptLoss did.
type AcceptedLoss struct {
	// MovedAside lists each damaged file's new name (beside the old one).
	MovedAside []string
	// NextSeq is the sequence number the agent's next write gets; 1 (under
	// a new residency id) when bbolt itself was damaged.
	NextSeq uint64
	// Fresh is set when residency.db itself was damaged: the agent starts
	// a new residency (new id, so new Idempotency-Keys); the upstreams keep
	// what they received.
	Fresh bool
}

// AcceptLoss is the operator's explicit acceptance that an agent refused
// for damage loses what the damaged file held. The damaged file is moved
// aside (never deleted) and, for a damaged log, numbering goes on past
// every sequence number the log may have used, so no Idempotency-Key is
// used twice. It refuses when Inspect finds no damage, and while a daemon
// has the agent open.
func AcceptLoss(dir string, now time.Time) (*AcceptedLoss, error) {
	in, err := Inspect(dir)
	if err != nil {
		return nil, err
	}
	if in.Damage == nil {
		return nil, fmt.Errorf("%s: nothing is damaged, so there is no loss to accept", dir)
	}
	stamp := now.UTC().Format("20060102T150405Z")
	out := &AcceptedLoss{}
	moveAside := func(name string) error {
		from := filepath.Join(dir, name)
		if _, err := os.Lstat(from); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		to := from + ".damaged-" + stamp
		if err := os.Rename(from, to); err != nil {
			return err
		}
		out.MovedAside = append(out.MovedAside, to)
		return nil
	}
	if in.Damage.Path == filepath.Join(dir, File) {
		// A new residency.db starts a new residency (new id, so new
		// Idempotency-Keys). Its log goes with it: its records belong to
		// the state set aside.
		if err := moveAside(File); err != nil {
			return nil, err
		}
		if err := moveAside(WALFile); err != nil {
			return nil, err
		}
		out.Fresh, out.NextSeq = true, 1
		return out, atomicfile.SyncDir(dir)
	}
	db, err := openBolt(filepath.Join(dir, File), time.Second, false)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := moveAside(WALFile); err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		st := tx.Bucket(bucketState)
		var d doc
		if err := json.Unmarshal(st.Get(keyDoc), &d); err != nil {
			return err
		}
		d.Seq = max(d.Seq, in.Reserved)
		raw, err := json.Marshal(&d)
		if err != nil {
			return err
		}
		out.NextSeq = d.Seq + 1
		for k, v := range map[string][]byte{
			string(keyDoc):         raw,
			string(keySeqReserved): u64(d.Seq + seqReserve),
			// bbolt holds all that is left: a new, empty log is no damage.
			string(keyClean): {1},
		} {
			if err := st.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record the accepted loss in %s: %w", filepath.Join(dir, File), err)
	}
	return out, nil
}
