package place

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeState(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRecordsThenRefusesAnotherWorkdir(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "agents", "builder")
	a, b := filepath.Join(top, "a"), filepath.Join(top, "b")
	os.Mkdir(a, 0o755)
	os.Mkdir(b, 0o755)
	if err := Check("builder", dir, a); err != nil {
		t.Fatalf("new state: %v", err)
	}
	if rec, err := Recorded(dir); err != nil || rec != a {
		t.Fatalf("recorded %q, %v; want %s", rec, err, a)
	}
	if err := Check("builder", dir, a+"/"); err != nil {
		t.Fatalf("the same workdir: %v", err)
	}
	err := Check("builder", dir, b)
	var moved *MovedError
	if !errors.As(err, &moved) || moved.Recorded != a || moved.Workdir != b {
		t.Fatalf("another workdir: %v, want a MovedError from %s to %s", err, a, b)
	}
	for _, want := range []string{a, b, filepath.Join(dir, MarkerFile)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %s: %v", want, err)
		}
	}
	// Moving on purpose: the new workdir written into the marker.
	writeState(t, dir, MarkerFile, b+"\n")
	if err := Check("builder", dir, b); err != nil {
		t.Fatalf("after the marker was removed: %v", err)
	}
}

func TestCheckFollowsSymlinkedWorkdir(t *testing.T) {
	top := t.TempDir()
	real := filepath.Join(top, "real")
	os.Mkdir(real, 0o755)
	link := filepath.Join(top, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "state")
	if err := Check("a", dir, link); err != nil {
		t.Fatal(err)
	}
	if err := Check("a", dir, real); err != nil {
		t.Fatalf("the same directory by another name: %v", err)
	}
}

func TestRecordedFromLastResumeAndBadMarker(t *testing.T) {
	dir := t.TempDir()
	writeState(t, dir, lastResumeFile, `{"agent":"default","workdir":"/old/place","markdown":"x"}`)
	if rec, err := Recorded(dir); err != nil || rec != "/old/place" {
		t.Fatalf("state from before markers: %q, %v", rec, err)
	}
	writeState(t, dir, MarkerFile, "relative/path\n")
	if _, err := Recorded(dir); err == nil || !strings.Contains(err.Error(), MarkerFile) {
		t.Fatalf("a marker that is not an absolute path: %v, want an error naming it", err)
	}
}

func TestSwitchParksAndBringsBack(t *testing.T) {
	top := t.TempDir()
	dir, park := filepath.Join(top, "agents", "default"), filepath.Join(top, "places")
	a, b := filepath.Join(top, "a"), filepath.Join(top, "b")
	os.Mkdir(a, 0o755)
	os.Mkdir(b, 0o755)

	// First run in a: nothing to park.
	if sw, err := Switch(dir, park, a); err != nil || sw.Parked != "" {
		t.Fatalf("first run: %+v, %v", sw, err)
	}
	if err := Check("default", dir, a); err != nil {
		t.Fatal(err)
	}
	writeState(t, dir, "residency.db", "a's state")

	// Then in b: a's state is parked, and b starts empty.
	sw, err := Switch(dir, park, b)
	if err != nil || sw.ParkedFrom != a || sw.Restored != "" {
		t.Fatalf("switch to b: %+v, %v", sw, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a's state still in the agent's directory: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(sw.ParkedTo, "residency.db")); string(got) != "a's state" {
		t.Fatalf("parked state: %q", got)
	}
	if err := Check("default", dir, b); err != nil {
		t.Fatal(err)
	}
	writeState(t, dir, "residency.db", "b's state")

	// Back in a: b's is parked, a's comes back.
	sw, err = Switch(dir, park, a)
	if err != nil || sw.ParkedFrom != b || sw.Restored == "" {
		t.Fatalf("switch back to a: %+v, %v", sw, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "residency.db")); string(got) != "a's state" {
		t.Fatalf("a's state after coming back: %q", got)
	}
	if err := Check("default", dir, a); err != nil {
		t.Fatalf("a's state is a's: %v", err)
	}
	// And b's waits, parked, for b.
	if sw, err := Switch(dir, park, b); err != nil || sw.Restored == "" {
		t.Fatalf("b again: %+v, %v", sw, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "residency.db")); string(got) != "b's state" {
		t.Fatalf("b's state after coming back: %q", got)
	}
}

func TestParkName(t *testing.T) {
	n1, n2 := ParkName("/home/u/proj"), ParkName("/srv/proj")
	if n1 == n2 || !strings.HasPrefix(n1, "proj-") {
		t.Fatalf("park names %q %q: want distinct, named after the directory", n1, n2)
	}
	if n := ParkName("/x/a b\x1b[31m"); strings.ContainsAny(n, " \x1b[") {
		t.Fatalf("park name keeps odd bytes: %q", n)
	}
}
