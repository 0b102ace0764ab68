package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

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

// WithAgent names the agent in a DamageError inside err.
func WithAgent(err error, agent string) error {
	var de *DamageError
	if errors.As(err, &de) {
		de.Agent = agent
	}
	return err
}

// CheckLog decides whether the log found on disk can be believed, given
// the last record id bbolt holds and whether the last process closed the
// store. It returns a description of a torn tail ("" when none) to log.
func CheckLog(f *Found, applied uint64, clean bool) (torn string, err error) {
	if applied > 0 && !clean {
		lost := "the writes acknowledged since bbolt last caught up with the log (up to 250 ms of them, or half the log) are gone"
		switch {
		case !f.Existed:
			return "", &DamageError{Path: f.Path,
				Found: fmt.Sprintf("the write-ahead log is missing, while residency.db says %d records were written and continuityd did not stop cleanly", applied),
				Lost:  lost}
		case f.Length < f.Size:
			return "", &DamageError{Path: f.Path,
				Found: fmt.Sprintf("the write-ahead log is %d bytes, but it was preallocated to %d: it was truncated", f.Length, f.Size),
				Lost:  lost}
		case allZero(f.Data):
			return "", &DamageError{Path: f.Path,
				Found: fmt.Sprintf("the write-ahead log is all zeros, while residency.db says %d records were written and continuityd did not stop cleanly", applied),
				Lost:  lost}
		}
	}
	last := applied
	if n := len(f.Recs); n > 0 && f.Recs[n-1].ID > last {
		last = f.Recs[n-1].ID
	}
	if later := RecordsAfter(f.Data, f.End, last); len(later) > 0 {
		what := "fails its checksum"
		if r, _, ok := ReadRecord(f.Data, f.End); ok {
			what = fmt.Sprintf("carries id %d where %d should follow", r.ID, last+1)
		}
		return "", &DamageError{Path: f.Path,
			Found: fmt.Sprintf("the record at offset %d %s, yet %d valid records written later follow it (ids %d..%d, from offset %d)",
				f.End, what, len(later), later[0].ID, later[len(later)-1].ID, later[0].Off),
			Lost: fmt.Sprintf("the acknowledged writes from record %d on cannot be replayed in order", last+1)}
	}
	if !clean && f.End+HeaderSize <= len(f.Data) && !allZero(f.Data[f.End:f.End+HeaderSize]) {
		if _, _, ok := ReadRecord(f.Data, f.End); !ok {
			torn = fmt.Sprintf("a record torn by the crash at offset %d (never acknowledged) was skipped", f.End)
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

// OpenBolt opens an agent's bbolt file after checking its pages, so that
// damage shows at open as a DamageError naming the file, not as a panic.
// The check runs on a read-only open first: a writable open rebuilds the
// freelist by walking every page in a goroutine of bbolt's own, where a
// damaged page panics beyond anyone's recover. For a residency the walk
// takes a few milliseconds.
func OpenBolt(path string, timeout time.Duration, readOnly bool) (*bolt.DB, error) {
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
	err := GuardBolt(path, func() error {
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
// panics where GuardBolt recovers it. (bbolt's own Tx.Check cannot serve:
// it first rebuilds the freelist in a goroutine of bbolt's, where a panic
// takes the process down.)
func checkBolt(db *bolt.DB, path string) error {
	return GuardBolt(path, func() error {
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

// GuardBolt runs fn, turning a panic (bbolt panics on some damaged pages)
// into a DamageError naming the file.
func GuardBolt(path string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &DamageError{Path: path, Found: fmt.Sprintf("reading it made bbolt fail (%v)", v),
				Lost: "the agent's stored state cannot be read"}
		}
	}()
	return fn()
}
