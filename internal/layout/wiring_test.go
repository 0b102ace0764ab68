package layout

import (
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
