package residency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string, ups ...string) *Store {
	t.Helper()
	s, err := Open(Options{Agent: "builder", Dir: dir, Upstreams: ups})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func str(s string) *string { return &s }

func TestStatePersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, "local")
	if _, err := s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str("ship it"), Decide: &capsule.Decision{Chosen: "a", Because: "twenty-four characters at least"}}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutCapsule(ctx, &capsule.Capsule{Version: "1", Goal: "g"}, false, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	id := s.cur.ResidencyID
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, "local")
	defer s.Close()
	r := s.Resume()
	if r.Focus != "ship it" || len(r.Decisions) != 1 || r.Capsule == nil || r.Capsule.Capsule.Goal != "g" || r.Seq != 2 {
		t.Fatalf("after reopen: %+v", r)
	}
	if s.cur.ResidencyID != id {
		t.Fatal("residency id changed on reopen")
	}
	ws, _ := s.Pending("local", 0, 10)
	if len(ws) != 2 || ws[0].IdempotencyKey != fmt.Sprintf("cd-%s-1", id) || ws[1].Kind != capsule.WriteCapsule {
		t.Fatalf("log after reopen: %+v", ws)
	}
}

func TestRefusedOpInBatchLeavesOthersIntact(t *testing.T) {
	s := open(t, t.TempDir(), "local")
	defer s.Close()
	ctx := context.Background()
	// Fill to the limit so that opens can fail on the stored state.
	var ops capsule.CommitmentOps
	for i := 0; i < guard.MaxOpenCommitments-1; i++ {
		ops.Open = append(ops.Open, capsule.OpenCommitment{Title: fmt.Sprintf("task %d", i)})
	}
	if _, err := s.Checkpoint(ctx, &capsule.Checkpoint{Commitments: &ops}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	// Many writers at once: only one of the "open one more" writes can win,
	// every focus write lands.
	var wg sync.WaitGroup
	var mu sync.Mutex
	opened, refused := 0, 0
	for i := 0; i < 32; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := s.Checkpoint(ctx, &capsule.Checkpoint{Commitments: &capsule.CommitmentOps{Open: []capsule.OpenCommitment{{Title: "race"}}}}, capsule.OriginExplicit)
			mu.Lock()
			defer mu.Unlock()
			var ce *capsule.Error
			switch {
			case err == nil:
				opened++
			case errors.As(err, &ce) && ce.Code == capsule.CodeTooManyOpenLoops:
				refused++
			default:
				t.Errorf("unexpected: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str(fmt.Sprint(i))}, capsule.OriginExplicit); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	r := s.Resume()
	open := 0
	for _, c := range r.Commitments {
		if c.Status == capsule.CommitmentOpen {
			open++
		}
	}
	if opened != 1 || refused != 31 || open != guard.MaxOpenCommitments {
		t.Fatalf("opened %d refused %d open %d", opened, refused, open)
	}
	// 1 + 1 open + 32 focus writes; refused ones took no sequence number.
	if r.Seq != 34 {
		t.Fatalf("seq %d, want 34", r.Seq)
	}
}

func TestAckPrunesOnlyWhatEveryUpstreamHas(t *testing.T) {
	s := open(t, t.TempDir(), "a", "b")
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str(fmt.Sprint(i))}, capsule.OriginExplicit); err != nil {
			t.Fatal(err)
		}
	}
	ups := []string{"a", "b"}
	s.Ack("a", 5, ups)
	waitAcked(t, s, "a", 5)
	if n, _ := s.PendingCount("a", 0); n != 0 {
		t.Fatalf("a pending %d", n)
	}
	if n, _ := s.PendingCount("b", 0); n != 5 {
		t.Fatalf("b pending %d: pruned before b had them", n)
	}
	s.Ack("b", 3, ups)
	waitAcked(t, s, "b", 3)
	ws, _ := s.Pending("b", 0, 10)
	if len(ws) != 2 || ws[0].Seq != 4 {
		t.Fatalf("b pending after ack 3: %+v", ws)
	}
	// Entries 1..3 are gone from the log; 4..5 stay for b.
	var keys int
	s.view(func(tx *bolt.Tx) error {
		// Counted with a cursor: Stats reads pages, which an open write
		// transaction has not written yet.
		return tx.Bucket(bucketLog).ForEach(func(_, _ []byte) error { keys++; return nil })
	})
	if keys != 2 {
		t.Fatalf("log holds %d entries, want 2", keys)
	}
}

func TestNewUpstreamStartsAtHead(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, "local")
	s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str("old")}, capsule.OriginExplicit)
	s.Close()
	s = open(t, dir, "local", "qday")
	defer s.Close()
	if n, _ := s.PendingCount("qday", 0); n != 0 {
		t.Fatalf("a new upstream was sent the past: %d pending", n)
	}
	if n, _ := s.PendingCount("local", 0); n != 1 {
		t.Fatalf("local pending %d", n)
	}
}

func TestClosedStoreRefusesWrites(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "x"))
	s.Close()
	if _, err := s.Checkpoint(context.Background(), &capsule.Checkpoint{Focus: str("late")}, capsule.OriginExplicit); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v", err)
	}
	s.Visited(visitOf(s)) // must not panic or block after Close
}

// waitAcked waits for a lazy ack to commit (at most lazyDelay plus a commit).
func waitAcked(t *testing.T, s *Store, upstream string, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for s.Acknowledged(upstream) < seq {
		if time.Now().After(deadline) {
			t.Fatalf("ack of %s up to %d never committed", upstream, seq)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// StateJSON is Resume(false) encoded, less the fields only the agent
// fills (snapshot, upstreams), whether the writer made it during the
// commit (an API checkpoint) or the reader makes it (any other write).
func TestStateJSONIsTheEncodedResume(t *testing.T) {
	s := open(t, t.TempDir(), "local")
	defer s.Close()
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		got, err := s.StateJSON()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(savedState{Resume: s.Resume()})
		if want := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
			t.Fatalf("%s:\n got %s\nwant %s", when, got, want)
		}
		var m map[string]any
		json.Unmarshal(got, &m)
		_, snap := m["snapshot"]
		_, ups := m["upstreams"]
		if snap || ups || m["focus"] == nil && when != "fresh" {
			t.Fatalf("%s: the saved state carries snapshot or upstreams, or lost its focus: %s", when, got)
		}
	}
	check("fresh")
	s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str("a <b> & c")}, capsule.OriginExplicit)
	if e := s.stateJSON.Load(); e == nil || e.d != s.cur {
		t.Fatal("an API checkpoint did not leave its encoded state behind")
	}
	check("after an API checkpoint")
	s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str("automatic")}, capsule.OriginAutomatic)
	check("after an automatic checkpoint")
	s.PutCapsule(ctx, &capsule.Capsule{Version: "1", Goal: "g"}, false, capsule.OriginExplicit)
	check("after a capsule")
}

// Concurrent writers answered by one commit share its encoding, which the
// commit starts and does not wait for: every caller gets a complete state
// that holds its own write (run under -race, this also checks that the
// encoding is published safely).
func TestStateJSONUnderConcurrentWriters(t *testing.T) {
	s := open(t, t.TempDir(), "local")
	defer s.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				seq, err := s.Checkpoint(context.Background(), &capsule.Checkpoint{Focus: str(fmt.Sprint("writer ", w, " write ", i))}, capsule.OriginExplicit)
				if err != nil {
					t.Error(err)
					return
				}
				raw, err := s.StateJSON()
				if err != nil {
					t.Error(err)
					return
				}
				var got struct{ Seq uint64 }
				if err := json.Unmarshal(raw, &got); err != nil || got.Seq < seq {
					t.Errorf("answer to write %d: seq %d, %v in %s", seq, got.Seq, err, raw)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// The log entry of a checkpoint encoded in two parts (the checkpoint by its
// caller, the envelope in the commit) is byte for byte what encoding the
// whole write gives.
func TestLogWriteEncodedMatchesJSONMarshal(t *testing.T) {
	s := open(t, t.TempDir(), "local")
	defer s.Close()
	ctx := context.Background()
	ws := capsule.WorkingState{NextAction: str("run <the> fuzzers & wait"), LastResult: str("ok"),
		ResultRef: capsule.NullableString{Set: true}}
	cps := []*capsule.Checkpoint{
		{Focus: str("ship it")},
		{WorkingState: &ws, Decide: &capsule.Decision{Chosen: "a", Because: "twenty-four characters at least", PassedOver: "b"}},
		{Commitments: &capsule.CommitmentOps{Open: []capsule.OpenCommitment{{Title: "write the note"}}}},
	}
	for _, cp := range cps {
		if _, err := s.Checkpoint(ctx, cp, capsule.OriginExplicit); err != nil {
			t.Fatal(err)
		}
	}
	var raws [][]byte
	s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLog).ForEach(func(_, v []byte) error { raws = append(raws, slices.Clone(v)); return nil })
	})
	if len(raws) != 3 {
		t.Fatalf("%d log entries", len(raws))
	}
	for _, raw := range raws {
		var w capsule.Write
		if err := json.Unmarshal(raw, &w); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(&w)
		if !bytes.Equal(raw, want) {
			t.Fatalf("\n got %s\nwant %s", raw, want)
		}
	}
}

func TestCheckpointIfRefusesAStaleRead(t *testing.T) {
	s := open(t, t.TempDir(), "local")
	defer s.Close()
	ctx := context.Background()
	read := s.Resume().Seq
	if _, err := s.Checkpoint(ctx, &capsule.Checkpoint{Focus: str("the agent's")}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckpointIf(ctx, &capsule.Checkpoint{Focus: str("derived")}, capsule.OriginAutomatic, read); !errors.Is(err, capsule.ErrStaleState) {
		t.Fatalf("stale read: %v", err)
	}
	r := s.Resume()
	if r.Focus != "the agent's" || r.Seq != read+1 {
		t.Fatalf("a stale conditional write changed the state: %q seq %d", r.Focus, r.Seq)
	}
	if _, err := s.CheckpointIf(ctx, &capsule.Checkpoint{Focus: str("derived")}, capsule.OriginAutomatic, r.Seq); err != nil {
		t.Fatal(err)
	}
	if got := s.Resume().Focus; got != "derived" {
		t.Fatalf("a current conditional write was not stored: %q", got)
	}
}

// TestSignalIsALastWrite: a store whose only writes are signals (hooks,
// transcripts) has a last write: status never shows "SEQ 2, LAST WRITE
// never".
func TestSignalIsALastWrite(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), "local")
	defer s.Close()
	for range 2 {
		if _, err := s.Signal(ctx, &capsule.Signal{Kind: "context", UsedFraction: ptrF(0.4)}); err != nil {
			t.Fatal(err)
		}
	}
	r := s.Resume()
	if r.Seq != 2 || r.LastWriteAt == nil {
		t.Fatalf("seq %d, last write %v: a numbered write without a last write", r.Seq, r.LastWriteAt)
	}
}

// TestContextIsItsSessions: the context figure says where it came from,
// survives a reopen, and a signal from another session clears it (that
// session's context is unknown until reported) while one from the same
// session keeps it.
func TestContextIsItsSessions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, "local")
	if _, err := s.Signal(ctx, &capsule.Signal{Kind: "context", UsedFraction: ptrF(0.46), Via: "transcript", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Signal(ctx, &capsule.Signal{Kind: "activity", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir, "local")
	defer s.Close()
	if c := s.Resume().Context; c.UsedFraction == nil || *c.UsedFraction != 0.46 || c.Via != "transcript" {
		t.Fatalf("after the same session's signal and a reopen: %+v, want 0.46 via transcript", c)
	}
	if _, err := s.Signal(ctx, &capsule.Signal{Kind: "session", Event: "start", SessionID: "s2"}); err != nil {
		t.Fatal(err)
	}
	if c := s.Resume().Context; c.UsedFraction != nil || c.Via != "" || c.SessionID != "s2" {
		t.Fatalf("a new session kept the last one's figure: %+v", c)
	}
}
