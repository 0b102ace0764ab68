package residency

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
)

// The domain's rules run on a txn, which sees the storage through kv
// only: these tests apply them to an in-memory document and store, with
// no disk, no bbolt and no log.

// memKV is kv on maps: the in-memory store of the rules' tests.
type memKV map[string]map[string][]byte

func (m memKV) Get(bucket, key []byte) []byte { return m[string(bucket)][string(key)] }

func (m memKV) Keys(bucket, prefix []byte, while func(k []byte) bool) [][]byte {
	var keys [][]byte
	for k := range m[string(bucket)] {
		if bytes.HasPrefix([]byte(k), prefix) {
			keys = append(keys, []byte(k))
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	for i, k := range keys {
		if while != nil && !while(k) {
			return keys[:i]
		}
	}
	return keys
}

func (m memKV) Put(bucket, key, value []byte) error {
	if m[string(bucket)] == nil {
		m[string(bucket)] = map[string][]byte{}
	}
	m[string(bucket)][string(key)] = bytes.Clone(value)
	return nil
}

func (m memKV) Delete(bucket, key []byte) error {
	delete(m[string(bucket)], string(key))
	return nil
}

var rulesNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// memTxn is a batch on an empty residency held in memory.
func memTxn() (*txn, memKV) {
	kv := memKV{}
	d := (&doc{ResidencyID: "r1"}).clone()
	return &txn{kv: kv, d: d, now: rulesNow, acked: map[string]uint64{}}, kv
}

func openCommitments(n int) *capsule.Checkpoint {
	ops := &capsule.CommitmentOps{}
	for i := range n {
		ops.Open = append(ops.Open, capsule.OpenCommitment{Title: fmt.Sprint("loop ", i)})
	}
	return &capsule.Checkpoint{Commitments: ops}
}

func refusalCode(err error) string {
	var ce *capsule.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// The open-commitment limit counts what is open after the write: a write
// past it is refused and changes nothing; closing one makes room in the
// same write; an id that is not open is refused, naming where.
func TestRuleCommitmentLimit(t *testing.T) {
	tx, kv := memTxn()
	if _, err := tx.checkpoint(openCommitments(guard.MaxOpenCommitments), capsule.OriginExplicit, nil); err != nil {
		t.Fatal(err)
	}
	before := tx.d.clone()
	_, err := tx.checkpoint(openCommitments(1), capsule.OriginExplicit, nil)
	if refusalCode(err) != capsule.CodeTooManyOpenLoops {
		t.Fatalf("one past the limit: %v", err)
	}
	if tx.d.Seq != before.Seq || len(tx.d.Commitments) != len(before.Commitments) {
		t.Fatalf("a refused write changed the document: seq %d, %d commitments", tx.d.Seq, len(tx.d.Commitments))
	}
	replace := openCommitments(1)
	replace.Commitments.Close = []capsule.CloseCommitment{{ID: "c_1", Evidence: "done"}}
	if _, err := tx.checkpoint(replace, capsule.OriginExplicit, nil); err != nil {
		t.Fatalf("close one and open one at the limit: %v", err)
	}
	if kv.Get(bucketDone, []byte("c_1")) == nil {
		t.Error("the closed commitment is not kept in its bucket")
	}
	unknown := &capsule.Checkpoint{Commitments: &capsule.CommitmentOps{Drop: []capsule.DropCommitment{{ID: "c_1", Reason: "again"}}}}
	_, err = tx.checkpoint(unknown, capsule.OriginExplicit, nil)
	var ce *capsule.Error
	if !errors.As(err, &ce) || ce.Code != capsule.CodeUnknownCommitment || ce.Field != "commitments.drop[0].id" {
		t.Fatalf("dropping a closed commitment: %v", err)
	}
}

// A stopped residency refuses every checkpoint but the one that resumes it.
func TestRuleStoppedResidency(t *testing.T) {
	tx, _ := memTxn()
	if _, err := tx.checkpoint(&capsule.Checkpoint{Stop: &capsule.Stop{Reason: "done"}}, capsule.OriginExplicit, nil); err != nil {
		t.Fatal(err)
	}
	focus := "next"
	if _, err := tx.checkpoint(&capsule.Checkpoint{Focus: &focus}, capsule.OriginExplicit, nil); refusalCode(err) != capsule.CodeResidencyStopped {
		t.Fatalf("a checkpoint while stopped: %v", err)
	}
	if _, err := tx.checkpoint(&capsule.Checkpoint{Focus: &focus, ResumeResidency: true}, capsule.OriginExplicit, nil); err != nil || tx.d.Stopped != nil || tx.d.Focus != "next" {
		t.Fatalf("resume_residency: %v, stopped %v, focus %q", err, tx.d.Stopped, tx.d.Focus)
	}
}

// since_last_visit: a visit clears what it was shown and nothing that
// landed after it; a path changed again after the visit stays, counting
// only the changes since.
func TestRuleSinceLastVisit(t *testing.T) {
	tx, _ := memTxn()
	tx.noteActivity([]string{"a.go", "b.go"}, 2)
	tx.noteActivity([]string{"a.go"}, 1)
	mark := markVisit(tx.d.clone()) // what the agent was shown
	tx.noteActivity([]string{"a.go", "c.go"}, 2)
	tx.now = rulesNow.Add(time.Minute)
	tx.visited(*mark)
	got := tx.d.Since.wire()
	if !slices.Equal(got.Paths, []string{"c.go", "a.go"}) || got.PathCounts["a.go"] != 1 || got.PathCounts["c.go"] != 1 {
		t.Fatalf("after the visit: paths %q counts %v", got.Paths, got.PathCounts)
	}
	if got.PathCount != 2 || !got.Since.Equal(rulesNow.Add(time.Minute)) {
		t.Fatalf("after the visit: path_count %d since %v", got.PathCount, got.Since)
	}
}

// The dead letter counts each refused write once however often it is
// refused, moves the upstream's cursor past it, and a discard or a
// delivered retry takes it out again.
func TestRuleDeadLetter(t *testing.T) {
	tx, kv := memTxn()
	ws := []capsule.Write{{Seq: 3}, {Seq: 4}}
	for range 2 {
		if err := tx.reject("qday", ws, "400 bad", []string{"qday"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := tx.d.DeadLetters["qday"]; n != 2 {
		t.Fatalf("dead letters counted %d, want 2", n)
	}
	if c := tx.cursor("qday"); c != 4 {
		t.Fatalf("cursor %d, want 4", c)
	}
	retry := func(k []byte, d *DeadLetter, t *txn) error {
		d.Retry = true
		return t.put(bucketDead, k, []byte(`{"retry":true}`))
	}
	if n, err := tx.editDead("qday", 9, retry); refusalCode(err) != capsule.CodeNotFound || n != 0 {
		t.Fatalf("retry of an unknown seq: %d %v", n, err)
	}
	if n, err := tx.editDead("qday", 0, retry); err != nil || n != 2 {
		t.Fatalf("retry all: %d %v", n, err)
	}
	if err := tx.retryDone("qday", 3, ""); err != nil {
		t.Fatal(err)
	}
	if err := tx.retryDone("qday", 4, "400 still bad"); err != nil {
		t.Fatal(err)
	}
	if n := tx.d.DeadLetters["qday"]; n != 1 || kv.Get(bucketDead, deadKey("qday", 3)) != nil || kv.Get(bucketDead, deadKey("qday", 4)) == nil {
		t.Fatalf("after the retries: count %d, bucket %v", n, kv[string(bucketDead)])
	}
}
