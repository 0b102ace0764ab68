package residency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/residency/storage"
)

// crashedWithRecords leaves a store as a SIGKILL would with n checkpoints
// answered since bbolt last caught up with the log (flushToBolt), and returns the log's records
// past what bbolt holds and the seqs answered.
func crashedWithRecords(t *testing.T, dir string, n int) ([]storage.Record, []uint64) {
	t.Helper()
	s := openStore(t, walOptions(dir, storage.DefaultLogSize))
	var seqs []uint64
	for i := range n {
		seq, err := s.Checkpoint(context.Background(), &capsule.Checkpoint{Focus: str(fmt.Sprint("step ", i))}, capsule.OriginExplicit)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	crash(t, s)
	data, err := os.ReadFile(filepath.Join(dir, WALFile))
	if err != nil {
		t.Fatal(err)
	}
	recs := parseLog(data)
	if len(recs) < n {
		t.Fatalf("%d records for %d writes", len(recs), n)
	}
	return recs, seqs
}

// wantDamage opens dir and requires a DamageError that names the log and
// says what was found; the file must be left exactly as it was.
func wantDamage(t *testing.T, dir, file, found string) *DamageError {
	t.Helper()
	path := filepath.Join(dir, file)
	before, _ := os.ReadFile(path)
	s, err := Open(walOptions(dir, storage.DefaultLogSize))
	if err == nil {
		s.Close()
		t.Fatal("opened a damaged residency without a word")
	}
	var de *DamageError
	if !errors.As(err, &de) {
		t.Fatalf("not a DamageError: %v", err)
	}
	if de.Path != path || !strings.Contains(err.Error(), found) || !strings.Contains(err.Error(), "recover --agent builder --accept-loss") {
		t.Fatalf("error does not name %s, %q and the way out: %v", path, found, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the damaged file was changed")
	}
	return de
}

func flipBit(t *testing.T, path string, off int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, int64(off))
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, int64(off)); err != nil {
		t.Fatal(err)
	}
}

func TestWALDamageIsRefused(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string, recs []storage.Record)
		found  string
	}{
		{"bit flip early", func(t *testing.T, path string, recs []storage.Record) {
			flipBit(t, path, recs[0].Off+storage.HeaderSize+2)
		}, "valid records written later follow it"},
		{"bit flip deep", func(t *testing.T, path string, recs []storage.Record) {
			flipBit(t, path, recs[len(recs)-3].Off+storage.HeaderSize+5)
		}, "valid records written later follow it"},
		{"bit flip in an id", func(t *testing.T, path string, recs []storage.Record) {
			flipBit(t, path, recs[4].Off+9)
		}, "valid records written later follow it"},
		{"truncated", func(t *testing.T, path string, recs []storage.Record) {
			if err := os.Truncate(path, int64(recs[len(recs)-1].Off)); err != nil {
				t.Fatal(err)
			}
		}, "it was truncated"},
		{"truncated to nothing", func(t *testing.T, path string, recs []storage.Record) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}, "it was truncated"},
		{"zeroed", func(t *testing.T, path string, recs []storage.Record) {
			if err := os.WriteFile(path, make([]byte, storage.DefaultLogSize), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "all zeros"},
		{"deleted", func(t *testing.T, path string, recs []storage.Record) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			recs, seqs := crashedWithRecords(t, dir, 12)
			c.damage(t, filepath.Join(dir, WALFile), recs)
			wantDamage(t, dir, WALFile, c.found)
			// Refused again at the next try: nothing was "repaired".
			wantDamage(t, dir, WALFile, c.found)

			in, err := Inspect(dir)
			if err != nil || in.Damage == nil {
				t.Fatalf("inspect: %v %+v", err, in)
			}
			acc, err := AcceptLoss(dir, time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			if c.name != "deleted" {
				if len(acc.MovedAside) != 1 || !strings.HasSuffix(acc.MovedAside[0], ".damaged-20261201T040000Z") {
					t.Fatalf("moved aside %v", acc.MovedAside)
				}
				if _, err := os.Stat(acc.MovedAside[0]); err != nil {
					t.Fatal("the damaged log is gone:", err)
				}
			}
			s := openStore(t, walOptions(dir, storage.DefaultLogSize))
			last := seqs[len(seqs)-1]
			if acc.NextSeq <= last {
				t.Fatalf("next seq %d repeats an answered one (last %d)", acc.NextSeq, last)
			}
			seq, err := s.Checkpoint(context.Background(), &capsule.Checkpoint{Focus: str("after the loss")}, capsule.OriginExplicit)
			if err != nil || seq != acc.NextSeq {
				t.Fatalf("first write after the loss: seq %d (want %d), %v", seq, acc.NextSeq, err)
			}
			pend, err := s.Pending("a", 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range pend {
				for _, old := range seqs {
					if w.IdempotencyKey == fmt.Sprintf("cd-%s-%d", s.cur.ResidencyID, old) {
						t.Fatalf("Idempotency-Key %s used again", w.IdempotencyKey)
					}
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := AcceptLoss(dir, time.Now()); err == nil || !strings.Contains(err.Error(), "nothing is damaged") {
				t.Fatalf("a second AcceptLoss on a sound residency: %v", err)
			}
		})
	}
}

// A torn tail (the record being written when the power went) is what a
// crash leaves: recovered quietly, described for the log.
func TestWALTornTailIsNotDamage(t *testing.T) {
	dir := t.TempDir()
	recs, seqs := crashedWithRecords(t, dir, 6)
	last := recs[len(recs)-1]
	// The last record half written over: its checksum fails, nothing valid
	// and newer follows it.
	flipBit(t, filepath.Join(dir, WALFile), last.Off+storage.HeaderSize+1)
	s := openStore(t, walOptions(dir, storage.DefaultLogSize))
	if rec := s.Recovery(); rec.TornTail == "" || rec.Replayed != len(recs)-1 {
		t.Fatalf("recovery %+v", rec)
	}
	if got := s.Resume().Seq; got != seqs[len(seqs)-2] {
		t.Fatalf("seq %d after the torn tail", got)
	}
}

// After a clean stop bbolt holds everything: a log that is then removed
// or zeroed loses nothing and is made anew.
func TestWALLossAfterCleanStopIsHarmless(t *testing.T) {
	for _, damage := range []string{"remove", "zero", "truncate"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, walOptions(dir, storage.DefaultLogSize))
			mixedWorkload(t, s, 1)
			want := takeSnapshot(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, WALFile)
			switch damage {
			case "remove":
				os.Remove(path)
			case "zero":
				os.WriteFile(path, make([]byte, storage.DefaultLogSize), 0o600)
			case "truncate":
				os.Truncate(path, 100)
			}
			s = openStore(t, walOptions(dir, storage.DefaultLogSize))
			wantSnapshot(t, s, want, "after a clean stop and a lost log")
		})
	}
}

// The seqs a log may use are reserved in bbolt before they are answered.
func TestSeqReservationIsInBbolt(t *testing.T) {
	dir := t.TempDir()
	recs, seqs := crashedWithRecords(t, dir, 3)
	_ = recs
	in, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if in.Reserved < seqs[len(seqs)-1] || in.Seq >= seqs[len(seqs)-1] || len(in.Unapplied) != 3 || in.Clean {
		t.Fatalf("inspection %+v for answered seqs %v", in, seqs)
	}
}

func TestDamagedBboltIsAnErrorNotAPanic(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, walOptions(dir, storage.DefaultLogSize))
	mixedWorkload(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, File)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Scribble over every page but the two meta pages: the tree bbolt
	// walks is garbage.
	const page = 4096
	for i := 2 * page; i < len(data); i++ {
		data[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	de := wantDamage(t, dir, File, "residency.db is damaged")
	if de.Path != path {
		t.Fatalf("names %s", de.Path)
	}
	acc, err := AcceptLoss(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !acc.Fresh || len(acc.MovedAside) != 2 {
		t.Fatalf("accepted %+v", acc)
	}
	s = openStore(t, walOptions(dir, storage.DefaultLogSize))
	if r := s.Resume(); r.Seq != 0 {
		t.Fatalf("fresh residency at seq %d", r.Seq)
	}
}
