package storage

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	bolt "go.etcd.io/bbolt"
)

var update = flag.Bool("update", false, "rewrite the golden log from the writer")

func parseLog(data []byte) []Record {
	recs, _ := ParseRun(data)
	return recs
}

func TestParseRunStopsAtFirstBadRecord(t *testing.T) {
	dir := t.TempDir()
	found, err := ReadLog(dir, 4096)
	if err != nil || len(found.Recs) != 0 || found.Existed {
		t.Fatalf("fresh log: %v %+v", err, found)
	}
	w, err := OpenLog(found)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.ContinueAfter(6)
	for _, p := range []string{"one", "two", "three"} {
		if err := w.Append([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if !w.Fits(4096-int(w.Used())-HeaderSize) || w.Fits(4096-int(w.Used())-HeaderSize+1) {
		t.Fatal("fits is off by one")
	}
	data, _ := os.ReadFile(filepath.Join(dir, LogFile))
	if len(data) != 4096 {
		t.Fatalf("not preallocated: %d bytes", len(data))
	}
	got := parseLog(data)
	if len(got) != 3 || got[0].ID != 7 || string(got[2].Payload) != "three" {
		t.Fatalf("parsed %+v", got)
	}
	// Flip one bit in the second record: only the first survives.
	data[HeaderSize+3+HeaderSize+1] ^= 1
	if got := parseLog(data); len(got) != 1 {
		t.Fatalf("after corruption: %d records", len(got))
	}
	// A new lap: the first record overwrites the start, the stale ones
	// after it have lower ids and are not read.
	w.ContinueAfter(9)
	if err := w.Append([]byte("ten")); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(filepath.Join(dir, LogFile))
	if got := parseLog(data); len(got) != 1 || got[0].ID != 10 {
		t.Fatalf("after a new lap: %+v", got)
	}
}

// goldenDir holds the golden log, under the name the store gives a log.
const goldenDir = "testdata/golden"

// goldenSize is the preallocated size of testdata/golden/residency.wal.
const goldenSize = 512

// goldenBatches are the records of testdata/golden/residency.wal, from id 41 on: a
// put of a new bucket's key, a batch of two puts and a delete, and a put
// of an empty value.
var goldenBatches = [][]Mutation{
	{{Op: OpPut, Bucket: []byte("state"), Key: []byte("wal_started"), Value: []byte{1}}},
	{
		{Op: OpPut, Bucket: []byte("state"), Key: []byte("doc"), Value: []byte(`{"seq":7,"focus":"golden"}`)},
		{Op: OpPut, Bucket: []byte("log"), Key: []byte{0, 0, 0, 0, 0, 0, 0, 7}, Value: []byte(`{"seq":7,"kind":"checkpoint"}`)},
		{Op: OpDelete, Bucket: []byte("log"), Key: []byte{0, 0, 0, 0, 0, 0, 0, 3}},
	},
	{{Op: OpPut, Bucket: []byte("cursors"), Key: []byte("qday"), Value: []byte{}}},
}

const goldenFirstID = 41

func goldenPayload(ms []Mutation) []byte {
	var p []byte
	for _, m := range ms {
		if m.Op == OpPut {
			p = AppendPut(p, m.Bucket, m.Key, m.Value)
		} else {
			p = AppendDelete(p, m.Bucket, m.Key)
		}
	}
	return p
}

// The writer produces, for the same records, exactly the bytes of
// testdata/golden/residency.wal: the on-disk format has not changed under the logs
// that already exist. (-update rewrites the file after a deliberate
// change of format, which must then also be able to read the old one.)
func TestGoldenLogWriter(t *testing.T) {
	dir := t.TempDir()
	found, err := ReadLog(dir, goldenSize)
	if err != nil {
		t.Fatal(err)
	}
	w, err := OpenLog(found)
	if err != nil {
		t.Fatal(err)
	}
	w.ContinueAfter(goldenFirstID - 1)
	for _, b := range goldenBatches {
		if err := w.Append(goldenPayload(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join(goldenDir, LogFile)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the writer's bytes differ from %s:\n got %x\nwant %x", golden, trimZeros(got), trimZeros(want))
	}
}

func trimZeros(b []byte) []byte { return bytes.TrimRight(b, "\x00") }

// testdata/golden/residency.wal decodes to the records and changes it was written
// with, byte for byte where the package comment says they lie.
func TestGoldenLogDecodes(t *testing.T) {
	found, err := ReadLog(goldenDir, goldenSize)
	if err != nil {
		t.Fatal(err)
	}
	if !found.Existed || found.Length != goldenSize {
		t.Fatalf("golden log: existed %v, %d bytes", found.Existed, found.Length)
	}
	// The first record by hand, as the format describes it.
	hdr := found.Data[:HeaderSize]
	if n := int(hdr[4]) | int(hdr[5])<<8; n != 1+1+5+1+11+1+1 || hdr[8] != goldenFirstID || !bytes.Equal(hdr[9:16], make([]byte, 7)) {
		t.Fatalf("first header % x", hdr)
	}
	if len(found.Recs) != len(goldenBatches) {
		t.Fatalf("%d records, want %d", len(found.Recs), len(goldenBatches))
	}
	off := 0
	for i, r := range found.Recs {
		if r.ID != goldenFirstID+uint64(i) || r.Off != off {
			t.Errorf("record %d: id %d at %d, want id %d at %d", i, r.ID, r.Off, goldenFirstID+i, off)
		}
		off += HeaderSize + len(r.Payload)
		ms, err := DecodeMutations(r.Payload)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		want := goldenBatches[i]
		if len(ms) != len(want) {
			t.Fatalf("record %d: %d changes, want %d", i, len(ms), len(want))
		}
		for j, m := range ms {
			w := want[j]
			if m.Op != w.Op || !bytes.Equal(m.Bucket, w.Bucket) || !bytes.Equal(m.Key, w.Key) || !bytes.Equal(m.Value, w.Value) {
				t.Errorf("record %d change %d: %+v, want %+v", i, j, m, w)
			}
		}
	}
	if found.End != off {
		t.Errorf("the run ends at %d, want %d", found.End, off)
	}
	if torn, err := CheckLog(found, goldenFirstID-1, false); err != nil || torn != "" {
		t.Errorf("CheckLog: %q %v", torn, err)
	}
}

// Replaying the golden records into bbolt gives the state they describe.
func TestGoldenLogReplays(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	found, err := ReadLog(goldenDir, goldenSize)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{"state", "log", "cursors"} {
			if _, err := tx.CreateBucket([]byte(b)); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte("log")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 3}, []byte("old")); err != nil {
			return err
		}
		for _, r := range found.Recs {
			if err := Replay(tx, r.Payload); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("state")).Get([]byte("doc")); string(v) != `{"seq":7,"focus":"golden"}` {
			t.Errorf("doc %q", v)
		}
		if v := tx.Bucket([]byte("log")).Get([]byte{0, 0, 0, 0, 0, 0, 0, 3}); v != nil {
			t.Errorf("the deleted key is still there: %q", v)
		}
		if v := tx.Bucket([]byte("cursors")).Get([]byte("qday")); v == nil || len(v) != 0 {
			t.Errorf("the empty value: %v", v)
		}
		return nil
	})
}

// A payload that does not decode is refused, not half applied.
func TestDecodeMutationsRefusesMalformed(t *testing.T) {
	for _, p := range [][]byte{{9, 1, 'a', 1, 'b'}, {OpPut, 5, 'a'}, {OpPut, 1, 'a', 1, 'b'}} {
		if _, err := DecodeMutations(p); err == nil {
			t.Errorf("% x decoded", p)
		}
	}
}

// TestReadLogAllocatesTheFileOnce: reading the preallocated log at open
// takes one buffer of its size, not the 10 MB io.ReadAll's doubling made
// of a 4 MiB log at every start (issue 23's resting memory: that garbage
// stayed resident).
func TestReadLogAllocatesTheFileOnce(t *testing.T) {
	dir := t.TempDir()
	found, err := ReadLog(dir, DefaultLogSize)
	if err != nil {
		t.Fatal(err)
	}
	w, err := OpenLog(found) // preallocates DefaultLogSize
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	found, err = ReadLog(dir, DefaultLogSize)
	runtime.ReadMemStats(&after)
	if err != nil || found.Length != DefaultLogSize {
		t.Fatalf("ReadLog: %v, %d bytes", err, found.Length)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > DefaultLogSize+DefaultLogSize/8 {
		t.Fatalf("ReadLog of a %d-byte log allocated %d bytes", DefaultLogSize, n)
	}
}
