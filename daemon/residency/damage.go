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

	"github.com/continuityd/continuityd/daemon/residency/storage"
	"github.com/continuityd/continuityd/internal/atomicfile"
)

// Damage to an agent's files is never silent. A write answered 200 lives
// in the write-ahead log until the next flush to bbolt, so a log that lost
// records loses acknowledged writes, and numbering on from what bbolt
// holds would hand out again sequence numbers (and Idempotency-Keys) the
// upstreams already hold for other content. Open therefore refuses an agent
// whose log or bbolt file cannot be believed, naming the file and what it
// found, and keeps the file as it is; AcceptLoss is the operator's explicit
// way on (`continuityd recover --accept-loss`).
//
// How a torn write is told apart from damage: see package storage
// (storage.CheckLog).

// DamageError is an agent file that cannot be trusted. Errors from Open
// wrap it; errors.As finds it.
type DamageError = storage.DamageError

// WALFile is the name of the write-ahead log inside an agent's state
// directory.
const WALFile = storage.LogFile

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
	db, err := storage.OpenBolt(path, time.Second, true)
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
	err = storage.GuardBolt(path, func() error {
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
	found, err := storage.ReadLog(dir, storage.DefaultLogSize)
	if err != nil {
		return nil, err
	}
	for _, r := range found.Recs {
		if r.ID > in.Applied {
			in.Unapplied = append(in.Unapplied, RecordAt{ID: r.ID, Offset: r.Off, Length: storage.HeaderSize + len(r.Payload)})
		}
	}
	if hasApplied {
		if _, err := storage.CheckLog(found, in.Applied, in.Clean); err != nil {
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
	db, err := storage.OpenBolt(filepath.Join(dir, File), time.Second, false)
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
