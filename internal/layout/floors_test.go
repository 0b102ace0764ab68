package layout

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/continuityd/continuityd"

// floors orders the packages from the ground up. A package may import
// packages on lower floors only; packages that share a floor may import
// each other only when the floor says so (small helpers, sibling sources).
// A pattern ending in "/*" matches the folder's subpackages; a package a
// pattern names exactly is on that pattern's floor (internal/front/cli is not
// among internal/*'s small helpers).
var floors = []struct {
	patterns []string
	siblings bool // packages of this floor may import each other
}{
	{[]string{"internal/termsafe"}, false}, // imports nothing of the module: the domain's text goes through it too
	{[]string{"capsule"}, false},
	{[]string{"capsule/guard", "capsule/schema", "internal/*"}, true},
	{[]string{"config"}, false},
	{[]string{"upstream"}, false},
	{[]string{"upstream/*"}, false},
	// The snapshot store's parts, below the store that composes them
	// (daemon/snapshot): the store on disk and the workdir first, then the
	// jobs over them.
	{[]string{"daemon/snapshot/repo", "daemon/snapshot/workdir"}, false},
	{[]string{"daemon/snapshot/*"}, false},
	{[]string{"daemon/snapshot/restore"}, false}, // over take (its safety snapshot) and verify
	{[]string{"daemon/events", "daemon/policy", "daemon/sources/*", "daemon/place", "daemon/snapshot", "daemon/asowner", "daemon/fleetsnap", "daemon/residency/storage", "daemon/attribution", "daemon/attribution/ledgers", "daemon/worklost", "daemon/apitoken"}, true},
	{[]string{"daemon/residency"}, false},
	{[]string{"daemon/outbox"}, false},
	{[]string{"daemon/capture"}, false},
	{[]string{"daemon/agent"}, false},
	// The command line's light part, which the continuityd front links
	// (the hook): on this floor it cannot reach the daemon, the MCP server
	// or the upstreams' clients.
	{[]string{"internal/front/cli"}, false},
	{[]string{"daemon/mcpserver"}, false},
	{[]string{"daemon/api"}, false},
	{[]string{"daemon/ui"}, false}, // the web page: calls the operations through the API's handler
	{[]string{"daemon"}, false},
	{[]string{"packaging"}, false},
	{[]string{"internal/daemonside/daemoncmd"}, false}, // the daemon-side commands: continuityd-daemon only
	{[]string{"cmd/*", "packaging/*"}, false},
}

// floorOf returns the floor of a package path relative to the module, or
// -1 when no floor names it.
func floorOf(rel string) int {
	for i, f := range floors {
		if slices.Contains(f.patterns, rel) {
			return i
		}
	}
	for i, f := range floors {
		for _, p := range f.patterns {
			if dir, ok := strings.CutSuffix(p, "/*"); ok && strings.HasPrefix(rel, dir+"/") {
				return i
			}
		}
	}
	return -1
}

type listed struct {
	ImportPath string
	Imports    []string
}

// modulePackages lists the module's packages with their (non-test) imports.
func modulePackages(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestImportsPointDown(t *testing.T) {
	for _, p := range modulePackages(t) {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok || rel == "internal/layout" {
			continue
		}
		from := floorOf(rel)
		if from < 0 {
			t.Errorf("%s is on no floor: add it to floors (and to the Layout in docs/ARCHITECTURE.md)", rel)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			to := floorOf(dep)
			switch {
			case to < 0:
				t.Errorf("%s imports %s, which is on no floor", rel, dep)
			case to > from:
				t.Errorf("%s imports %s, a higher floor: imports must point down", rel, dep)
			case to == from && !floors[from].siblings:
				t.Errorf("%s imports %s on its own floor", rel, dep)
			}
		}
	}
}

// The floors themselves must be able to fail: a made-up upward import is
// caught.
func TestFloorOf(t *testing.T) {
	for rel, want := range map[string]int{
		"internal/termsafe": 0, "capsule": 1, "capsule/guard": 2, "capsule/schema": 2, "internal/client": 2, "config": 3, "upstream": 4,
		"upstream/qday": 5, "daemon/sources/watch": 9, "daemon/residency": 10, "daemon/residency/storage": 9, "internal/ops": 2, "internal/front/cli": 14, "daemon/api": 16, "daemon/ui": 17, "daemon": 18,
		"packaging": 19, "internal/daemonside/daemoncmd": 20, "cmd/continuityd": 21, "packaging/gen": 21, "daemon/snapshot/repo": 6, "daemon/snapshot/workdir": 6, "daemon/snapshot/gc": 7, "daemon/snapshot/restore": 8, "daemon/snapshot": 9, "daemon/nosuch": -1,
	} {
		if got := floorOf(rel); got != want {
			t.Errorf("floorOf(%s) = %d, want %d", rel, got, want)
		}
	}
}
