package layout

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// wiredOnly are the packages only the wiring may import: the daemon's top
// package, which builds each upstream from the config, and the commands.
// Everything else speaks to them through interfaces its users own (the
// fleet through daemon/agent.Fleet, with capsule's types), so the fleet's
// implementation can change without the agent, the API or the snapshots
// knowing. Tests may import them (fleetsnap's tests run against a real
// NATS server through the real client).
var wiredOnly = []string{"upstream/nats"}

// wiring are the packages allowed to import wiredOnly.
func isWiring(rel string) bool { return rel == "daemon" || strings.HasPrefix(rel, "cmd/") }

// wiringViolations lists "pkg imports dep" for every package outside the
// wiring that imports a wiredOnly package (or one under it).
func wiringViolations(pkgs []listed) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok || isWiring(rel) {
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			for _, w := range wiredOnly {
				if (dep == w || strings.HasPrefix(dep, w+"/")) && rel != w && !strings.HasPrefix(rel, w+"/") {
					out = append(out, rel+" imports "+dep)
				}
			}
		}
	}
	return out
}

func TestOnlyTheWiringNamesNATS(t *testing.T) {
	for _, v := range wiringViolations(modulePackages(t)) {
		t.Errorf("%s: only the wiring (package daemon, cmd/*) may; use the interface its users own (daemon/agent.Fleet) and capsule's fleet types", v)
	}
}

// The check itself can fail: a made-up import from the agent is caught,
// the wiring's and the package's own are not.
func TestWiringViolations(t *testing.T) {
	nats := module + "/upstream/nats"
	got := wiringViolations([]listed{
		{ImportPath: module + "/daemon/agent", Imports: []string{nats, module + "/capsule"}},
		{ImportPath: module + "/daemon/api", Imports: []string{nats + "/sub"}},
		{ImportPath: module + "/daemon", Imports: []string{nats}},
		{ImportPath: module + "/cmd/continuityd", Imports: []string{nats}},
		{ImportPath: nats + "/sub", Imports: []string{nats}},
		{ImportPath: module + "/config", Imports: []string{module + "/internal/natsrules"}},
	})
	want := []string{"daemon/agent imports upstream/nats", "daemon/api imports upstream/nats/sub"}
	if !slices.Equal(got, want) {
		t.Errorf("wiringViolations = %q, want %q", got, want)
	}
}

// daemonWiring are the production files of the daemon's top package, each
// with why it is wiring: starting, reloading and stopping the parts, the
// options each part takes from the configuration, the metrics. A
// subsystem, with state and a loop of its own, lives in a package of its
// own (or in the package that owns its concern), so that the daemon reads
// as the assembly of the parts and each concern has one home.
var daemonWiring = map[string]string{
	"daemon.go":       "Run: the state directory, the agents, the listeners and the loops started in order; shutdown",
	"reload.go":       "Reload: the running configuration rebuilt, agents and upstreams carried over or swapped; the upstreams built",
	"runtime.go":      "the API's Runtime: the running configuration's agents, guard and status",
	"agentoptions.go": "each part's options built from the checked configuration",
	"metrics.go":      "the metrics registered, and the gauges read from the running agents",
	"budget.go":       "the open-file limit shared between the daemon's own files and its doors",
	"nofile_unix.go":  "the open-file limit raised and read, for the budget",
	"nofile_other.go": "the open-file limit where it is not known",
	"restmem.go":      "start-up's garbage returned once start-up is done",
	"owners.go":       "a root daemon's agents given their owner's worker",
	"fleet.go":        "the fleet upstream built (the one place outside cmd/ that names it), its conflicts relayed, the fleet listed",
	"perworkdir.go":   "what the agents on one workdir share, made once and handed to each",
	"watches.go":      "the workdirs' shared watchers, held over a reload, counted for the metrics",
	"apitoken.go":     "the loopback listener's token held, read again at each reload",
	"spool.go":        "the spool's events handed to the agent they name, from the users it admits",
	"page.go":         "the web page built, and served beside the API on the configured loopback listener",
	"opening.go":      "the agents of a build opened and started side by side, bounded, those of one workdir in order",
	"places.go":       "the places sessions adopt (package place) served as agents of the running configuration: adopting and watching asked of Run, idle ones unwatched, in status",
}

// TestDaemonHoldsOnlyWiring: every production file of package daemon is
// in daemonWiring, and every file named there exists.
func TestDaemonHoldsOnlyWiring(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(root, "daemon"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		seen[name] = true
		if _, ok := daemonWiring[name]; !ok {
			t.Errorf("daemon/%s is not among the wiring's files: a subsystem goes into a package of its own; wiring is named in daemonWiring with why", name)
		}
	}
	for name := range daemonWiring {
		if !seen[name] {
			t.Errorf("daemonWiring names daemon/%s, which does not exist", name)
		}
	}
}
