package layout

import (
	"strings"
	"testing"
)

// audiences says who may link each of internal/'s rooms: the tree is sorted
// by who its helpers serve (internal/ itself: both processes), so a
// helper's place says where it may be used, and a test kit or the command
// line's editing code never ends up in the engine.
var audiences = []struct {
	room string
	// mayLink reports whether a non-test package (module-relative) may
	// import a package of the room.
	mayLink func(rel string) bool
	why     string
}{
	{"internal/testkit/", func(rel string) bool {
		return strings.HasPrefix(rel, "internal/testkit/") || strings.HasSuffix(rel, "test") // a fake or kit of its own (upstream/qdaytest)
	}, "test kits are for tests and benchmarks only: import them from _test.go files"},
	{"internal/front/", func(rel string) bool {
		return strings.HasPrefix(rel, "internal/front/") || strings.HasPrefix(rel, "cmd/") ||
			rel == "packaging" || strings.HasPrefix(rel, "packaging/") || rel == "internal/daemonside/daemoncmd"
	}, "the command line's helpers serve the commands: the engine must not need them (move what both need up to internal/)"},
	{"internal/daemonside/", func(rel string) bool {
		return !strings.HasPrefix(rel, "internal/front/") && rel != "cmd/continuityd" && !strings.HasPrefix(rel, "capsule")
	}, "the daemon's helpers stay out of the light front (move what both need up to internal/)"},
}

// roomOf is the audience room a package is in, or "" for internal/'s top
// (both processes) and everything outside internal/.
func roomOf(rel string) (room string, i int) {
	for i, a := range audiences {
		if strings.HasPrefix(rel, a.room) {
			return a.room, i
		}
	}
	return "", -1
}

func TestInternalSortedByAudience(t *testing.T) {
	for _, p := range modulePackages(t) {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			room, i := roomOf(dep)
			if own, _ := roomOf(rel); room == "" || own == room {
				continue
			}
			if !audiences[i].mayLink(rel) {
				t.Errorf("%s imports %s: %s", rel, dep, audiences[i].why)
			}
		}
	}
}

// The rules must be able to fail: the imports the rooms exist to stop.
func TestAudiencesRefuse(t *testing.T) {
	for _, c := range []struct{ from, dep string }{
		{"daemon/snapshot", "internal/testkit/testwait"},
		{"daemon/api", "internal/front/cli"},
		{"config", "internal/front/agentconf"},
		{"cmd/continuityd", "internal/daemonside/pacer"},
		{"internal/front/cli", "internal/daemonside/beneath"},
	} {
		_, i := roomOf(c.dep)
		if i < 0 || audiences[i].mayLink(c.from) {
			t.Errorf("%s importing %s is let through", c.from, c.dep)
		}
	}
}
