package capture

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/policy"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/testkit/guardtest"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testOptions are a capture of agent "builder" whose workdir and state
// directory are fresh temp directories: the workdir watched with the
// default handoff files, a policy that checkpoints soon after activity,
// transcripts off.
func testOptions(t *testing.T) Options {
	t.Helper()
	g, err := guardtest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	pc := policy.DefaultConfig()
	pc.Quiet, pc.MinInterval = 20*time.Millisecond, 20*time.Millisecond
	pc.PublicStatus = false
	return Options{
		Agent: "builder", Dir: t.TempDir(), Workdir: t.TempDir(), Guard: g, Logger: slog.New(slog.DiscardHandler),
		Policy: pc,
		Watch: WatchOptions{Enabled: true, Quiet: 20 * time.Millisecond,
			HandoffFile: "HANDOFF.md", CapsuleFile: filepath.Join(".continuity", "capsule.json")},
	}
}

// running is a capture over a real residency, run until the test ends.
type running struct {
	*Capture
	store *residency.Store
	stop  func() // stops the capture and closes the store; idempotent
}

// logReader is the upstream whose cursor the tests read the residency's
// log with (nothing ships to it).
const logReader = "reader"

// newCapture opens the residency in o.Dir and the capture over it (not
// started); the store is closed when the test ends.
func newCapture(t *testing.T, o Options) *running {
	t.Helper()
	store, err := residency.Open(residency.Options{Agent: o.Agent, Dir: o.Dir, Upstreams: []string{logReader}})
	if err != nil {
		t.Fatal(err)
	}
	o.Store = store
	r := &running{Capture: New(o), store: store}
	r.stop = func() {
		if err := store.Close(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { r.stop() })
	return r
}

// startCapture opens and starts a capture; it stops when the test ends
// (or at r.stop).
func startCapture(t *testing.T, o Options) *running {
	t.Helper()
	r := newCapture(t, o)
	startCaptureOf(t, r)
	return r
}

// startCaptureOf starts r; it stops when the test ends (or at r.stop).
func startCaptureOf(t *testing.T, r *running) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	r.Start(ctx, &wg)
	closeStore := r.stop
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			closeStore()
		})
	}
}

// waitResume polls the agent's resume until ok accepts it, and fails
// with the last one seen (what) after testwait.Limit.
func waitResume(t *testing.T, store *residency.Store, what string, ok func(capsule.Resume) bool) capsule.Resume {
	t.Helper()
	var r capsule.Resume
	testwait.Until(t, func() string {
		return fmt.Sprintf("%s; resume has focus %q, refused %+v, since_last_visit %+v, context %+v",
			what, r.Focus, r.Refused, r.SinceLastVisit, r.Context)
	}, func() bool { r = store.Resume(); return ok(r) })
	return r
}

// refusalOf is the refusal shown for source, or nil.
func refusalOf(r capsule.Resume, source string) *capsule.Refusal {
	for i := range r.Refused {
		if r.Refused[i].Source == source {
			return &r.Refused[i]
		}
	}
	return nil
}

// writeFile writes a file of the test's, failing the test on error.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// gitIn runs real git in dir, isolated from the user's and the system's
// configuration; the test is skipped without git.
func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
}

// startWithSnapshots opens a snapshot store for o's workdir in o.Dir and
// starts a capture that takes its snapshots; both end with the test.
func startWithSnapshots(t *testing.T, o Options) (*running, *snapshot.Store) {
	t.Helper()
	st, err := snapshot.Open(context.Background(), snapshot.Options{Dir: filepath.Join(o.Dir, "snapshots.git"), Workdir: o.Workdir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := newCapture(t, o)
	r.UseSnapshots(st, nil)
	startCaptureOf(t, r)
	return r, st
}
