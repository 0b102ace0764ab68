package place

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWhereAdopts: the git top-level of a session's directory, else the
// directory; never /, a home, anything outside the roots or a directory
// that is not there.
func TestWhereAdopts(t *testing.T) {
	top := Canonical(t.TempDir())
	home := filepath.Join(top, "home")
	repo, plain := filepath.Join(home, "repo"), filepath.Join(home, "plain")
	for _, d := range []string{filepath.Join(repo, ".git"), filepath.Join(repo, "src", "deep"), filepath.Join(plain, "sub"), filepath.Join(top, "elsewhere")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := Rules{Adopt: true, Roots: func(h string) []string { return []string{h} }, Home: func(uint32) string { return home }}
	uid := uint32(os.Geteuid())
	for cwd, want := range map[string]string{
		filepath.Join(repo, "src", "deep"): repo,
		repo:                               repo,
		filepath.Join(plain, "sub"):        filepath.Join(plain, "sub"),
	} {
		if got, err := r.Where(cwd, uid); err != nil || got != want {
			t.Errorf("Where(%s) = %q, %v; want %s", cwd, got, err, want)
		}
	}
	for cwd, why := range map[string]string{
		home:                            "home directory itself",
		"/":                             "/ is never a place",
		filepath.Join(top, "elsewhere"): "outside [places] roots",
		filepath.Join(home, "gone"):     "cannot be read",
		"relative/dir":                  "not an absolute path",
	} {
		_, err := r.Where(cwd, uid)
		var np *NoPlaceError
		if !errors.As(err, &np) || !strings.Contains(err.Error(), why) {
			t.Errorf("Where(%s) = %v; want a refusal saying %q", cwd, err, why)
		}
	}
	r.Adopt = false
	if _, err := r.Where(repo, uid); err == nil || !strings.Contains(err.Error(), "adoption is off") {
		t.Errorf("adoption off: %v", err)
	}
}

// TestRegistryNamesStableAndUnique: a place is named after its directory,
// the same again for the same directory, with a number beside another's;
// the registry reads back what it wrote, and a damaged one is set aside.
func TestRegistryNamesStableAndUnique(t *testing.T) {
	state := t.TempDir()
	r, err := OpenRegistry(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a, err := r.Add("/src/api", 1000, nil, now)
	if err != nil || a.Name != "api" {
		t.Fatalf("first: %+v %v", a, err)
	}
	b, err := r.Add("/other/API", 1000, nil, now)
	if err != nil || b.Name != "api-2" {
		t.Fatalf("second of that name: %+v %v", b, err)
	}
	c, err := r.Add("/x/My Project!", 1000, func(n string) bool { return n == "my-project" }, now)
	if err != nil || c.Name != "my-project-2" {
		t.Fatalf("a configured agent's name: %+v %v", c, err)
	}
	if again, _ := r.Add("/src/api", 1000, nil, now); again.Name != "api" {
		t.Fatalf("the same directory again: %+v", again)
	}
	r2, err := OpenRegistry(state, nil)
	if err != nil || len(r2.Places()) != 3 {
		t.Fatalf("read back: %+v %v", r2.Places(), err)
	}
	if e, ok := r2.ByWorkdir("/other/API"); !ok || e.Name != "api-2" {
		t.Fatalf("by workdir: %+v", e)
	}
	os.WriteFile(filepath.Join(state, RegistryFile), []byte(`{"places":[{"name":"../x","workdir":"/a"}]}`), 0o600)
	r3, err := OpenRegistry(state, nil)
	if err != nil || len(r3.Places()) != 0 {
		t.Fatalf("a damaged registry: %+v %v", r3.Places(), err)
	}
	if aside, _ := filepath.Glob(filepath.Join(state, RegistryFile+".damaged-*")); len(aside) != 1 {
		t.Fatalf("the damaged registry is not set aside: %v", aside)
	}
}

// TestInheritMovesThePlaceState: an agent configured with a place's
// workdir takes its state directory whole, the place is forgotten and
// the move remembered; an agent with state of its own keeps it.
func TestInheritMovesThePlaceState(t *testing.T) {
	state := t.TempDir()
	work := Canonical(t.TempDir())
	r, _ := OpenRegistry(state, nil)
	e, err := r.Add(work, 1000, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	placeDir := filepath.Join(r.AgentsDir(), e.Name)
	if err := Check(e.Name, placeDir, work); err != nil {
		t.Fatal(err)
	}
	writeState(t, placeDir, "residency.db", "history")
	none := func(string) bool { return false }
	from, err := r.Inherit("myproject", work, none, time.Now())
	if err != nil || from != e.Name {
		t.Fatalf("Inherit = %q, %v; want from %s", from, err, e.Name)
	}
	if b, err := os.ReadFile(filepath.Join(r.AgentsDir(), "myproject", "residency.db")); err != nil || string(b) != "history" {
		t.Fatalf("the state did not move: %q %v", b, err)
	}
	if _, err := os.Stat(placeDir); err == nil {
		t.Fatal("the place's state directory is left behind")
	}
	if _, ok := r.Get(e.Name); ok {
		t.Fatal("the place is still registered")
	}
	if m := r.Moves(); len(m) != 1 || m[0].From != e.Name || m[0].To != "myproject" || m[0].Workdir != work {
		t.Fatalf("moves: %+v", m)
	}
	// Nothing to take over: its own state stays.
	if from, err := r.Inherit("myproject", work, none, time.Now()); err != nil || from != "" {
		t.Fatalf("again: %q %v", from, err)
	}
}
