package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/place"
	"github.com/continuityd/continuityd/daemon/policy"
	"github.com/continuityd/continuityd/internal/statefiles"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
	"github.com/continuityd/continuityd/upstream/qdaytest"
)

// secretToken is a token the secret guard recognises.
const secretToken = "ghp_R7x9Qm2LkP4vT8nZ3wY6bJ1cF5hD0sA2eG7k"

// TestCheckpointStoresOrRefusesWhole: a checkpoint is stored durably and
// answered with the saved state; a body the guard refuses answers with the
// rule's code, names no Go type and stores nothing.
func TestCheckpointStoresOrRefusesWhole(t *testing.T) {
	a := startAgent(t, testOptions(t, t.TempDir()))
	ctx := context.Background()
	ans, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"ship the migration","working_state":{"next_action":"run the tests"}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	var state capsule.Resume
	if err := json.Unmarshal(ans.State, &state); err != nil {
		t.Fatalf("answer's state %s: %v", ans.State, err)
	}
	if ans.Seq == 0 || state.Focus != "ship the migration" || state.WorkingState == nil || state.WorkingState.NextAction != "run the tests" {
		t.Fatalf("answer seq %d, state %s", ans.Seq, ans.State)
	}
	for body, code := range map[string]string{
		`{"focus":"a","focus":"b"}`:                   capsule.CodeInvalidJSON,
		`{"focus":42}`:                                capsule.CodeInvalidField,
		`{"focus":"x","mood":"fine"}`:                 capsule.CodeUnknownField,
		`{"focus":"deploy with ` + secretToken:        capsule.CodeInvalidJSON,
		`{"focus":"deploy with ` + secretToken + `"}`: capsule.CodeSecretDetected,
		`not json`: capsule.CodeInvalidJSON,
	} {
		_, err := a.Checkpoint(ctx, a.g, []byte(body), false)
		ce := refusal(t, err, code)
		if strings.Contains(ce.Message, "ghp_") || strings.Contains(ce.Message, "Go struct") {
			t.Errorf("refusal of %s: %q", body, ce.Message)
		}
	}
	if r := a.LocalResume(); r.Seq != ans.Seq || r.Focus != "ship the migration" {
		t.Fatalf("a refused checkpoint changed the state: seq %d (was %d), focus %q", r.Seq, ans.Seq, r.Focus)
	}
}

// TestCheckpointSyncAndDeadLetter: a checkpoint with sync says what each
// upstream did: the local archive took it; Q-Day refused it for good (a
// 400), so it waits in Q-Day's dead letter until retried, and the retry
// delivers it.
func TestCheckpointSyncAndDeadLetter(t *testing.T) {
	o := testOptions(t, t.TempDir())
	srv := withQDay(t, &o)
	a := startAgent(t, o)
	ctx := context.Background()
	srv.Script(qdaytest.Fault{Kind: qdaytest.Status400, Path: qdaytest.CheckpointPath})
	ans, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"refused once"}`), true)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]SyncedUpstream{}
	for _, s := range ans.Sync {
		byName[s.Name] = s
	}
	if l := byName["local"]; !l.Delivered {
		t.Errorf("local: %+v, want delivered", l)
	}
	if q := byName["qday"]; q.Delivered || !q.Refused || q.Error == nil {
		t.Errorf("qday: %+v, want refused for good with the reason", q)
	}

	dl, err := a.DeadLetters("qday")
	if err != nil || len(dl) != 1 || dl[0].Write.Seq != ans.Seq {
		t.Fatalf("qday's dead letter %+v (%v): want seq %d", dl, err, ans.Seq)
	}
	if dl, err := a.DeadLetters(""); err != nil || len(dl) != 1 {
		t.Fatalf("every upstream's dead letter %+v (%v)", dl, err)
	}
	_, err = a.DeadLetters("nowhere")
	refusal(t, err, capsule.CodeNotFound)
	// A name that is not an upstream of the agent's is not repeated: it
	// may be a secret pasted by mistake.
	_, _, err = a.DeadLetterAction(ctx, []byte(`{"upstream":"`+secretToken+`"}`), true)
	if ce := refusal(t, err, capsule.CodeInvalidField); strings.Contains(ce.Message, "ghp_") || !strings.Contains(ce.Message, "qday") {
		t.Fatalf("refusal %q: want the agent's upstreams named, not what was sent", ce.Message)
	}
	_, _, err = a.DeadLetterAction(ctx, []byte(`{"upstream":"qday","seq":"one"}`), true)
	refusal(t, err, capsule.CodeInvalidField)

	_, n, err := a.DeadLetterAction(ctx, []byte(`{"upstream":"qday","seq":`+fmt.Sprint(ans.Seq)+`}`), true)
	if err != nil || n != 1 {
		t.Fatalf("retry: %d (%v), want 1", n, err)
	}
	testwait.Until(t, func() string { return fmt.Sprintf("Q-Day took %d checkpoints", len(srv.Accepted())) }, func() bool {
		dl, _ := a.DeadLetters("qday")
		return len(srv.Accepted()) == 1 && len(dl) == 0
	})
}

// TestResumeAddsTheUpstreamsViewsAndVisits: resume is the residency with
// what the upstreams hold (Q-Day's view, its directions marked with their
// source); since_last_visit is cleared only once the visit is passed back.
func TestResumeAddsTheUpstreamsViewsAndVisits(t *testing.T) {
	o := testOptions(t, t.TempDir())
	srv := withQDay(t, &o)
	srv.SetDirections(json.RawMessage(`{"text":"review the PR first"}`))
	a := startAgent(t, o)
	ctx := context.Background()
	if _, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"resume me"}`), true); err != nil {
		t.Fatal(err)
	}
	r, visit := a.Resume(ctx, ResumeOptions{})
	if r.Focus != "resume me" || r.SinceLastVisit.Writes != 1 {
		t.Fatalf("resume: focus %q, since_last_visit %+v", r.Focus, r.SinceLastVisit)
	}
	if _, ok := r.Remote["qday"]; !ok || len(r.Directions) != 1 {
		t.Fatalf("remote %v, directions %s: want Q-Day's view and its direction", r.Remote, r.Directions)
	}
	var dir map[string]string
	if err := json.Unmarshal(r.Directions[0], &dir); err != nil || dir["source"] != "qday" || dir["text"] != "review the PR first" {
		t.Fatalf("direction %s: want it marked with its source", r.Directions[0])
	}
	// Read again without passing the visit back: the news stays.
	if again, _ := a.Resume(ctx, ResumeOptions{Local: true}); again.SinceLastVisit.Writes != 1 {
		t.Fatalf("a visit not received cleared since_last_visit: %+v", again.SinceLastVisit)
	}
	a.Visited(visit)
	testwait.Until(t, func() string { return fmt.Sprintf("since_last_visit %+v", a.LocalResume().SinceLastVisit) },
		func() bool { return a.LocalResume().SinceLastVisit.Writes == 0 })
}

// TestCapsuleSealAndPut: no capsule is NO_CAPSULE; seal builds one from
// the state (the caller's fields override), checked like any capsule;
// a refused seal or put stores nothing.
func TestCapsuleSealAndPut(t *testing.T) {
	a := startAgent(t, testOptions(t, t.TempDir()))
	ctx := context.Background()
	_, err := a.Capsule()
	refusal(t, err, capsule.CodeNoCapsule)
	if _, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"finish the billing move","working_state":{"next_action":"swap the callsites"}}`), false); err != nil {
		t.Fatal(err)
	}
	ans, err := a.Seal(ctx, a.g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ans.Capsule.Sealed || ans.Capsule.Capsule.Goal != "finish the billing move" {
		t.Fatalf("sealed capsule %+v", ans.Capsule)
	}
	ans, err = a.Seal(ctx, a.g, []byte(`{"goal":"a goal of the caller's","do_not":"delete the shim"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := ans.Capsule.Capsule; c.Goal != "a goal of the caller's" || c.DoNot != "delete the shim" {
		t.Fatalf("seal with overrides: %+v", c)
	}
	seq := ans.Seq
	for body, code := range map[string]string{
		`{"goal":"use ` + secretToken + `"}`: capsule.CodeSecretDetected,
		`{"goal":1}`:                         capsule.CodeInvalidCapsule,
		`{"goal":"a","goal":"b"}`:            capsule.CodeInvalidJSON,
		`{"mood":"fine"}`:                    capsule.CodeInvalidCapsule,
	} {
		_, err := a.Seal(ctx, a.g, []byte(body))
		refusal(t, err, code)
	}
	_, err = a.PutCapsule(ctx, a.g, []byte(`{"version":"1","goal":"put `+secretToken+`"}`))
	refusal(t, err, capsule.CodeSecretDetected)
	if rec, _ := a.Capsule(); rec.Seq != seq || rec.Capsule.Goal != "a goal of the caller's" {
		t.Fatalf("a refused write changed the capsule: %+v", rec)
	}
	put, err := a.PutCapsule(ctx, a.g, []byte(`{"version":"1","goal":"put by the agent"}`))
	if err != nil || put.Capsule.Sealed || put.Capsule.Capsule.Goal != "put by the agent" {
		t.Fatalf("put: %+v (%v)", put, err)
	}
}

// TestCompactionSignalSealsACapsule: a signal is stored and answered with
// the context as it now stands; a compaction about to happen makes the
// agent's policy seal a capsule of the state, automatically.
func TestCompactionSignalSealsACapsule(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.Capture.Policy = policy.DefaultConfig() // seal_on_compaction
	a := startAgent(t, o)
	ctx := context.Background()
	if _, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"keep going after the compaction"}`), false); err != nil {
		t.Fatal(err)
	}
	sig, err := a.Signal(ctx, a.g, []byte(`{"kind":"context","used_fraction":0.42}`))
	if err != nil || sig.Context.UsedFraction == nil || *sig.Context.UsedFraction != 0.42 {
		t.Fatalf("signal answer %+v (%v)", sig, err)
	}
	_, err = a.Signal(ctx, a.g, []byte(`{"kind":"context","used_fraction":"most"}`))
	refusal(t, err, capsule.CodeInvalidSignal)
	if _, err := a.Signal(ctx, a.g, []byte(`{"kind":"compaction","phase":"pre","trigger":"auto"}`)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, func() string { return fmt.Sprintf("capsule %+v", a.Store().Capsule()) }, func() bool {
		rec := a.Store().Capsule()
		return rec != nil && rec.Sealed
	})
	if rec := a.Store().Capsule(); rec.Capsule.Goal != "keep going after the compaction" {
		t.Fatalf("sealed capsule %+v: want the focus as its goal", rec)
	}
}

// TestWaitBoundsAndWakes: a wait length out of 1..90 is INVALID_QUERY
// naming max_seconds; with the cursor of an earlier answer, a wait returns
// at once with what happened since.
func TestWaitBoundsAndWakes(t *testing.T) {
	a := startAgent(t, testOptions(t, t.TempDir()))
	ctx := context.Background()
	for _, s := range []int{-1, WaitMax + 1} {
		_, err := a.Wait(ctx, s, nil)
		if ce := refusal(t, err, capsule.CodeInvalidQuery); ce.Field != "max_seconds" {
			t.Fatalf("wait %d: field %q", s, ce.Field)
		}
	}
	quiet, err := a.Wait(ctx, 1, nil)
	if err != nil || quiet.Woke != "timeout" || len(quiet.Events) != 0 {
		t.Fatalf("a wait with nothing happening: %+v (%v)", quiet, err)
	}
	ans, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"wake the waiter"}`), false)
	if err != nil {
		t.Fatal(err)
	}
	woke, err := a.Wait(ctx, WaitMax, &quiet.Cursor)
	if err != nil || woke.Woke != "event" || len(woke.Events) == 0 || woke.Events[0].Seq != ans.Seq || woke.Missed != 0 {
		t.Fatalf("a wait after the checkpoint: %+v (%v)", woke, err)
	}
}

// TestSnapshotsOffSayWhy: with no snapshot store, the snapshot calls are
// refused SNAPSHOTS_UNAVAILABLE saying why: snapshots are off, or the
// agent has no workdir.
func TestSnapshotsOffSayWhy(t *testing.T) {
	o := testOptions(t, t.TempDir())
	a := startAgent(t, o)
	_, err := a.SnapshotList(context.Background())
	if ce := refusal(t, err, capsule.CodeSnapshotsOff); !strings.Contains(ce.Message, "has no workdir") {
		t.Fatalf("no workdir: %q", ce.Message)
	}
	o = testOptions(t, t.TempDir())
	o.Config.Workdir = t.TempDir()
	b := startAgent(t, o)
	_, err = b.SnapshotDiff(context.Background(), Latest, "", 0)
	if ce := refusal(t, err, capsule.CodeSnapshotsOff); !strings.Contains(ce.Message, "enabled = false") {
		t.Fatalf("snapshots off: %q", ce.Message)
	}
	_, err = b.SnapshotRestore(context.Background(), "abc", []byte(`{"paths":"all"}`))
	refusal(t, err, capsule.CodeInvalidField)
}

// TestOpenRefusesAnotherWorkdirsState: an agent is its place: its state
// directory, made for one workdir, is not opened for another; the last
// resume is left on disk when it stops, for the hooks.
func TestOpenRefusesAnotherWorkdirsState(t *testing.T) {
	state := t.TempDir()
	o := testOptions(t, state)
	o.Config.Workdir = t.TempDir()
	a, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.Start(ctx)
	if _, err := a.Checkpoint(ctx, o.Guard, []byte(`{"focus":"left for the hooks"}`), false); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(o.Dir, statefiles.LastResumeName))
	if err != nil {
		t.Fatal(err)
	}
	var last statefiles.LastResume
	if err := json.Unmarshal(raw, &last); err != nil || last.Workdir != o.Config.Workdir || !strings.Contains(last.Markdown, "left for the hooks") {
		t.Fatalf("last resume %s (%v)", raw, err)
	}

	moved := testOptions(t, state)
	moved.Config.Workdir = t.TempDir()
	if b, err := Open(moved); !errors.As(err, new(*place.MovedError)) {
		if b != nil {
			b.Stop()
		}
		t.Fatalf("opened for another workdir: %v", err)
	}
}
