package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// While resumes are being asked, the answer the next one would make is
// made ahead after each commit and delivery; a resume that finds it made
// for what it reads answers with it, byte for byte the whole document's
// encoding, and one that reads anything else makes its own. (The
// package's tests run with CheckViews: every answer served from one made
// ahead is compared with one made afresh.)
func TestResumeAnswerMadeAhead(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.Config.Workdir = t.TempDir()
	ledger := attribution.New(attribution.Options{Since: time.Now().Add(-time.Hour)})
	o.Capture.Attribution = ledger
	a := startAgent(t, o)
	if !a.ready.usable.Load() {
		t.Fatal("an agent with the local archive only makes no answer ahead")
	}
	ctx := context.Background()
	resume := func() []byte { t.Helper(); return resumeBytes(t, a) }
	whole := func() []byte {
		t.Helper()
		r, _ := a.Resume(ctx, ResumeOptions{Local: true})
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	// served waits until a resume is answered with an answer made ahead.
	served := func(what string) []byte {
		t.Helper()
		var raw []byte
		testwait.Until(t, func() string { return what + ": no resume answered with an answer made ahead" }, func() bool {
			before := a.ready.served.Load()
			raw = resume()
			return a.ready.served.Load() > before
		})
		return raw
	}
	if _, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"first"}`), true); err != nil {
		t.Fatal(err)
	}
	resume() // resumes are being asked
	if _, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"second"}`), true); err != nil {
		t.Fatal(err)
	}
	raw := served("after a checkpoint")
	if want := whole(); !bytes.Equal(raw, want) {
		t.Fatalf("the answer made ahead:\n%s\nthe whole document:\n%s", raw, want)
	}
	var doc capsule.Resume
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Focus != "second" {
		t.Fatalf("the answer made ahead after the second checkpoint: focus %q (%v)", doc.Focus, err)
	}

	// Something it shows moves without a commit: the next resume does
	// not take the answer made before.
	before := a.ready.served.Load()
	if _, err := ledger.Burst(attribution.Burst{Paths: []string{"notes.md"}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	raw = resume()
	if a.ready.served.Load() != before || !bytes.Contains(raw, []byte(`"notes.md"`)) {
		t.Fatalf("after someone changed notes.md, resume (served ahead %v): %s", a.ready.served.Load() != before, raw)
	}
	// And the one made after the change has it.
	if _, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"third"}`), true); err != nil {
		t.Fatal(err)
	}
	raw = served("after the change and a checkpoint")
	if !bytes.Contains(raw, []byte(`"notes.md"`)) || !bytes.Contains(raw, []byte(`"focus":"third"`)) {
		t.Fatalf("the answer made ahead after the change: %s", raw)
	}
	if want := whole(); !bytes.Equal(raw, want) {
		t.Fatalf("the answer made ahead:\n%s\nthe whole document:\n%s", raw, want)
	}

	// A write with nothing made ahead since (no resume asked lately): the
	// next resume shows it, not the answer made before it.
	a.ready.asked.Store(0)
	if _, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"fourth"}`), true); err != nil {
		t.Fatal(err)
	}
	if raw = resume(); !bytes.Contains(raw, []byte(`"focus":"fourth"`)) {
		t.Fatalf("resume after a write nothing was made ahead for: %s", raw)
	}
}

// An answer made ahead is for the state it was made from: with no
// upstream to tell a write by its pending count, the next resume after a
// write nothing was made ahead for shows the write.
func TestAnswerMadeAheadIsForItsState(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.Config.Upstreams, o.Upstreams = nil, nil
	a := startAgent(t, o)
	ctx := context.Background()
	checkpoint := func(focus string) {
		t.Helper()
		if _, err := a.Checkpoint(ctx, a.g, []byte(`{"focus":"`+focus+`"}`), true); err != nil {
			t.Fatal(err)
		}
	}
	resume := func() []byte { t.Helper(); return resumeBytes(t, a) }
	checkpoint("first")
	resume()
	checkpoint("second")
	testwait.Until(t, func() string { return "no resume answered with an answer made ahead" }, func() bool {
		before := a.ready.served.Load()
		resume()
		return a.ready.served.Load() > before
	})
	a.ready.asked.Store(0) // nothing is made ahead for the next write
	checkpoint("third")
	if raw := resume(); !bytes.Contains(raw, []byte(`"focus":"third"`)) {
		t.Fatalf("resume after a write nothing was made ahead for: %s", raw)
	}
}

// resumeBytes is a's local resume answer (ResumeJSON).
func resumeBytes(t *testing.T, a *testAgent) []byte {
	t.Helper()
	raw, _, err := a.ResumeJSON(context.Background(), ResumeOptions{Local: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
