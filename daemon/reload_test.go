package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/continuityd/continuityd/config"
)

// reloadRig is a daemon whose config lives in a real file.
type reloadRig struct {
	*testDaemon
	path string
}

func writeConfig(t *testing.T, path, stateDir, socket string, agents ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[outbox]\nmin_backoff = \"10ms\"\nmax_backoff = \"100ms\"\n", stateDir, socket)
	for _, a := range agents {
		fmt.Fprintf(&b, "\n[[agent]]\nname = %q\n", a)
	}
	// Write then rename, as editors do, so a watcher never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func startReloadRig(t *testing.T, agents ...string) *reloadRig {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "continuityd.toml")
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "d.sock")
	writeConfig(t, path, state, sock, agents...)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	td := startDaemonWith(t, cfg, Options{Load: func() (*config.Config, error) { return config.Load(path) }})
	return &reloadRig{testDaemon: td, path: path}
}

func agentNames(td *testDaemon) []string {
	var out []string
	for _, a := range td.expectOK("GET", "/v1/status", nil)["agents"].([]any) {
		out = append(out, a.(map[string]any)["name"].(string))
	}
	return out
}

func TestReloadAddsAndRemovesAgentsKeepingState(t *testing.T) {
	r := startReloadRig(t, "alpha")
	r.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "alpha's work"})
	cfg := r.d.snap().cfg
	writeConfig(t, r.path, cfg.Daemon.StateDir, cfg.Daemon.Socket, "alpha", "beta")
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := agentNames(r.testDaemon); strings.Join(got, ",") != "alpha,beta" {
		t.Fatalf("agents after adding beta: %v", got)
	}
	r.expectOK("POST", "/v1/continuity/checkpoint?agent=beta", map[string]any{"focus": "beta's work"})
	// alpha was carried over untouched.
	if f := r.resume("?agent=alpha&peek=1")["focus"]; f != "alpha's work" {
		t.Fatalf("alpha after reload: %v", f)
	}
	writeConfig(t, r.path, cfg.Daemon.StateDir, cfg.Daemon.Socket, "beta")
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	r.expectError("GET", "/v1/continuity?agent=alpha", nil, 404, "UNKNOWN_AGENT")
	// Removing an agent keeps its state: adding it back finds it.
	writeConfig(t, r.path, cfg.Daemon.StateDir, cfg.Daemon.Socket, "beta", "alpha")
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if f := r.resume("?agent=alpha&peek=1")["focus"]; f != "alpha's work" {
		t.Fatalf("alpha after coming back: %v", f)
	}
}

func TestReloadRefusesABadConfigAndKeepsRunning(t *testing.T) {
	r := startReloadRig(t, "alpha")
	os.WriteFile(r.path, []byte("[daemon]\nsocket = 7\n"), 0o600)
	err := r.d.Reload()
	if err == nil || !strings.Contains(err.Error(), "daemon.socket") {
		t.Fatalf("bad config reload: %v", err)
	}
	r.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "still serving"})
	if got := agentNames(r.testDaemon); len(got) != 1 || got[0] != "alpha" {
		t.Fatalf("agents: %v", got)
	}
}

func TestConfigFileChangeReloads(t *testing.T) {
	r := startReloadRig(t, "alpha")
	cfg := r.d.snap().cfg
	writeConfig(t, r.path, cfg.Daemon.StateDir, cfg.Daemon.Socket, "alpha", "gamma")
	waitFor(t, 60*time.Second, func() bool { return len(agentNames(r.testDaemon)) == 2 })
}

func TestMetricsScrapeParses(t *testing.T) {
	td := startDaemon(t, testConfig(t))
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "measured"})
	td.expectOK("POST", "/v1/signals", map[string]any{"kind": "context", "used_fraction": 0.5})
	td.do("POST", "/v1/continuity/checkpoint", map[string]any{"decide": map[string]any{"chosen": "x", "because": "short"}})
	waitFor(t, 60*time.Second, func() bool {
		return td.resume("?peek=1")["upstreams"].([]any)[0].(map[string]any)["pending"].(float64) == 0
	})
	status, raw := td.doRaw("GET", "/metrics", nil)
	if status != 200 {
		t.Fatalf("metrics: %d", status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("not Prometheus text format: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		f, ok := fams[name]
		if !ok {
			t.Fatalf("metric %s missing", name)
		}
	next:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("metric %s%v missing", name, labels)
		return 0
	}
	if v := value("continuityd_writes_accepted_total", map[string]string{"agent": "builder", "kind": "checkpoint"}); v != 1 {
		t.Fatalf("accepted = %v", v)
	}
	// Two writes were committed (the checkpoint and the signal), each in
	// its own commit, since they came one after the other.
	if c, w := value("continuityd_commits_total", map[string]string{"agent": "builder"}), value("continuityd_committed_writes_total", map[string]string{"agent": "builder"}); c < 2 || w < c {
		t.Fatalf("commits = %v, committed writes = %v", c, w)
	}
	if v := value("continuityd_writes_refused_total", map[string]string{"code": "MOTIVE_REQUIRED"}); v != 1 {
		t.Fatalf("refused = %v", v)
	}
	if v := value("continuityd_signals_total", map[string]string{"kind": "context"}); v != 1 {
		t.Fatalf("signals = %v", v)
	}
	if v := value("continuityd_deliveries_total", map[string]string{"upstream": "local", "outcome": "ok"}); v < 1 {
		t.Fatalf("deliveries = %v", v)
	}
	if v := value("continuityd_spool_depth", map[string]string{"agent": "builder", "upstream": "local"}); v != 0 {
		t.Fatalf("spool depth = %v", v)
	}
	value("continuityd_request_seconds", map[string]string{"route": "/v1/continuity/checkpoint"})
}

// A reload that changes only [guard] reaches the agents' capture too (it
// checks what the daemon derives from the workdir), not just the API; a
// reload that changes nothing keeps the running agents.
func TestReloadOfTheGuardReachesCapture(t *testing.T) {
	r := startReloadRig(t, "alpha")
	r.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "kept"})
	cfg := r.d.snap().cfg
	before := r.d.snap().agents["alpha"]
	writeConfig(t, r.path, cfg.Daemon.StateDir, cfg.Daemon.Socket, "alpha")
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if r.d.snap().agents["alpha"] != before {
		t.Fatal("a reload that changed nothing reopened the agent")
	}
	raw, err := os.ReadFile(r.path)
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw, "\n[guard]\nallowed_link_domains = [\"example.org\"]\n"...)
	if err := os.WriteFile(r.path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	st := r.d.snap()
	if got := st.guard.LinkDomains(); len(got) != 1 || got[0] != "example.org" {
		t.Fatalf("guard after reload: %v", got)
	}
	if st.agents["alpha"].Capture().Guard() != st.guard {
		t.Fatal("the agent's capture still checks with the old guard")
	}
	if f := r.resume("?peek=1")["focus"]; f != "kept" {
		t.Fatalf("state after the agent reopened: %v", f)
	}
}

// A reload that changes what an agent's capture runs with ([policy],
// [watch], [transcripts]) or who may use it reopens the agent, so the
// change applies as the README says; its state is kept.
func TestReloadOfAgentSettingsReopensTheAgent(t *testing.T) {
	r := startReloadRig(t, "alpha")
	r.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "kept"})
	for _, change := range []string{
		"\n[policy]\nquiet = \"7s\"\n",
		"\n[watch]\nhandoff_file = \"NOTES.md\"\n",
		"\n[transcripts]\nrescan = \"9s\"\n",
	} {
		before := r.d.snap().agents["alpha"]
		raw, err := os.ReadFile(r.path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(r.path, append(raw, change...), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := r.d.Reload(); err != nil {
			t.Fatalf("reload with %q: %v", change, err)
		}
		if r.d.snap().agents["alpha"] == before {
			t.Fatalf("a reload adding %q kept the agent as it was opened", change)
		}
		if f := r.resume("?peek=1")["focus"]; f != "kept" {
			t.Fatalf("state after the agent reopened: %v", f)
		}
	}
}
