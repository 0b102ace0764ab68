package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/time/rate"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/statefiles"
	"github.com/continuityd/continuityd/internal/testkit/guardtest"
	"github.com/continuityd/continuityd/upstream/local"
	"github.com/continuityd/continuityd/upstream/qday"
	"github.com/continuityd/continuityd/upstream/qdaytest"
)

func TestMain(m *testing.M) {
	CheckViews() // a resume's kept view that a change did not replace fails the test that made it
	goleak.VerifyTestMain(m)
}

// testAgent is a real agent, "builder", over a real residency in a temp
// state directory, shipping to the local archive and, when asked, to a
// Q-Day fake that enforces the documented API.
type testAgent struct {
	*Agent
	g *guard.Guard
}

type noObserver struct{}

func (noObserver) Delivery(string, string, time.Duration) {}
func (noObserver) Accepted(string, string)                {}
func (noObserver) Signal(string, string)                  {}

// testOptions are the options of agent "builder" in state directory
// state, shipping to the local archive, its policy off.
func testOptions(t *testing.T, state string) Options {
	t.Helper()
	g, err := guardtest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	agentDir := func(name string) string { return filepath.Join(state, "agents", name) }
	archive := local.New("local", agentDir)
	t.Cleanup(func() { archive.Close() })
	return Options{
		Config: config.Agent{Name: "builder", Upstreams: []string{"local"}},
		Dir:    agentDir("builder"), Modes: statefiles.ModesFor(0o600),
		Upstreams:     map[string]*Upstream{"local": {Client: archive, Limiter: rate.NewLimiter(rate.Inf, 1)}},
		ResumeTimeout: 10 * time.Second,
		Guard:         g, Logger: slog.New(slog.DiscardHandler), Observer: noObserver{},
	}
}

// withQDay adds a Q-Day upstream, "qday", served by a fake.
func withQDay(t *testing.T, o *Options) *qdaytest.Server {
	t.Helper()
	srv := qdaytest.New(qdaytest.Options{Token: "t0ken"})
	t.Cleanup(srv.Close)
	c, err := qday.New(qday.Options{Name: "qday", URL: srv.URL(), Token: func() (string, error) { return "t0ken", nil }})
	if err != nil {
		t.Fatal(err)
	}
	o.Config.Upstreams = append(o.Config.Upstreams, "qday")
	o.Upstreams["qday"] = &Upstream{Client: c, Limiter: rate.NewLimiter(rate.Inf, 1)}
	return srv
}

// startAgent opens and starts the agent o describes; it stops when the
// test ends.
func startAgent(t *testing.T, o Options) *testAgent {
	t.Helper()
	a, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.Start(ctx)
	t.Cleanup(func() {
		cancel()
		if err := a.Stop(); err != nil {
			t.Error(err)
		}
	})
	return &testAgent{Agent: a, g: o.Guard}
}

// refusal is err's refusal, failing the test when err is not one with
// the code want.
func refusal(t *testing.T, err error, want string) *capsule.Error {
	t.Helper()
	var ce *capsule.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T): want a refusal %s", err, err, want)
	}
	if ce.Code != want {
		t.Fatalf("refusal %s (%s: %s): want %s", ce.Code, ce.Field, ce.Message, want)
	}
	return ce
}

// snapshotOptions are testOptions with work snapshots on, in a workdir
// holding one file, main.go (file); the test is skipped without git.
func snapshotOptions(t *testing.T) (o Options, file string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	o = testOptions(t, t.TempDir())
	o.Config.Workdir = t.TempDir()
	file = filepath.Join(o.Config.Workdir, "main.go")
	if err := os.WriteFile(file, []byte("package main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.Snapshots = &snapshot.Options{}
	return o, file
}
