package statefiles

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// Spool leaves one whole file per event, private unless the spool is a
// shared (setgid) one, whose group then reads it.
func TestSpool(t *testing.T) {
	state := t.TempDir()
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	ev := SpooledEvent{Agent: "builder", Cwd: "/w", At: at, Signal: capsule.Signal{Kind: "context"}}
	for range 2 { // the same nanosecond twice: two files
		if err := Spool(state, ev); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(SpoolDir(state))
	if err != nil || len(entries) != 2 {
		t.Fatalf("spool holds %v (%v), want two files", entries, err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			t.Errorf("spool file %q", e.Name())
		}
		info, _ := e.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600 in a private spool", e.Name(), info.Mode().Perm())
		}
		raw, err := os.ReadFile(filepath.Join(SpoolDir(state), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var got SpooledEvent
		if err := json.Unmarshal(raw, &got); err != nil || got.Agent != "builder" || got.Cwd != "/w" || !got.At.Equal(at) || got.Signal.Kind != "context" {
			t.Errorf("spooled %s (%v), want the event back", raw, err)
		}
	}

	shared := t.TempDir()
	if err := Prepare(shared, ModesFor(0o660)); err != nil {
		t.Fatal(err)
	}
	if err := Spool(shared, ev); err != nil {
		t.Fatal(err)
	}
	entries, _ = os.ReadDir(SpoolDir(shared))
	if len(entries) != 1 {
		t.Fatalf("shared spool holds %v", entries)
	}
	if info, _ := entries[0].Info(); info.Mode().Perm() != 0o640 {
		t.Errorf("a shared spool's file is mode %v, want 0640 (the daemon's group reads it)", info.Mode().Perm())
	}
}

func writeLastResume(t *testing.T, state string, lr LastResume) {
	t.Helper()
	path := LastResumePath(state, lr.Agent)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(lr)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReadLastResume(t *testing.T) {
	state := t.TempDir()
	writeLastResume(t, state, LastResume{Agent: "outer", Workdir: "/w", Markdown: "outer md"})
	writeLastResume(t, state, LastResume{Agent: "inner", Workdir: "/w/sub", Markdown: "inner md"})
	for _, c := range []struct{ agent, cwd, want string }{
		{"", "/w/sub/pkg", "inner"}, // the longest workdir holding cwd wins
		{"", "/w/sub", "inner"},
		{"", "/w/other", "outer"},
		{"", "/w", "outer"},
		{"outer", "/w/sub", "outer"}, // a name wins over cwd
	} {
		lr, err := ReadLastResume(state, c.agent, c.cwd)
		if err != nil || lr.Agent != c.want {
			t.Errorf("agent %q cwd %q: %+v, %v; want %s", c.agent, c.cwd, lr, err, c.want)
		}
	}
	if lr, err := ReadLastResume(state, "", "/elsewhere"); err == nil {
		t.Errorf("two agents and a cwd in neither: %+v, want an error", lr)
	} else if !strings.Contains(err.Error(), "/elsewhere") {
		t.Errorf("the error names the cwd: %v", err)
	}
	if _, err := ReadLastResume(state, "nobody", ""); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an agent with no file: %v, want not exist", err)
	}

	// A damaged file is skipped when searching, and named when asked for.
	if err := os.WriteFile(LastResumePath(state, "inner"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLastResume(state, "inner", ""); err == nil || !strings.Contains(err.Error(), LastResumePath(state, "inner")) {
		t.Errorf("a damaged file: %v, want an error naming it", err)
	}
	// Only one readable agent left: it answers where it works, or for a
	// hook that does not say where it runs, never for another place.
	if lr, err := ReadLastResume(state, "", "/w/x"); err != nil || lr.Agent != "outer" {
		t.Errorf("the only agent, in its workdir: %+v, %v", lr, err)
	}
	if lr, err := ReadLastResume(state, "", ""); err != nil || lr.Agent != "outer" {
		t.Errorf("the only agent, no cwd: %+v, %v", lr, err)
	}
	if lr, err := ReadLastResume(state, "", "/elsewhere"); err == nil {
		t.Errorf("the only agent answered for another place: %+v", lr)
	}
	if _, err := ReadLastResume(t.TempDir(), "", "/w"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no agents directory: %v, want not exist", err)
	}
}

func TestAgentByCwd(t *testing.T) {
	wds := map[string]string{"outer": "/w", "inner": "/w/sub/", "none": "", "sibling": "/wx"}
	for cwd, want := range map[string]string{
		"/w/sub/a": "inner", "/w/sub": "inner", "/w/subx": "outer", "/w/./sub/../a": "outer",
		"/wx/y": "sibling", "/wxy": "", "/": "", "": "",
	} {
		if got := AgentByCwd(wds, cwd); got != want {
			t.Errorf("cwd %q: %q, want %q", cwd, got, want)
		}
	}
}

func TestModesFor(t *testing.T) {
	private := Modes{Dir: 0o700, Agents: 0o700, Spool: 0o700, LastResume: 0o600}
	shared := Modes{Dir: 0o710, Agents: 0o750, Spool: fs.ModeSetgid | fs.ModeSticky | 0o770, LastResume: 0o640}
	for perm, want := range map[fs.FileMode]Modes{0o600: private, 0o640: private, 0o620: private, 0o660: shared, 0o666: shared} {
		if got := ModesFor(perm); got != want {
			t.Errorf("socket %v: %+v, want %+v", perm, got, want)
		}
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky)
}

// Prepare gives the directories their modes whatever the umask. The umask
// is the process's: this test does not run in parallel.
func TestPrepareModesWhateverTheUmask(t *testing.T) {
	for _, umask := range []int{0o077, 0o022, 0o000} {
		old := syscall.Umask(umask)
		func() {
			defer syscall.Umask(old)
			state := filepath.Join(t.TempDir(), "state")
			sh := ModesFor(0o660)
			if err := Prepare(state, sh); err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]fs.FileMode{state: sh.Dir, filepath.Join(state, "agents"): sh.Agents, SpoolDir(state): sh.Spool} {
				if got := mode(t, path); got != want {
					t.Errorf("umask %04o, shared: %s is %v, want %v", umask, path, got, want)
				}
			}
			// No longer shared: the daemon's own directories close again; the
			// state directory, once made, keeps its mode.
			pr := ModesFor(0o600)
			if err := Prepare(state, pr); err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]fs.FileMode{state: sh.Dir, filepath.Join(state, "agents"): pr.Agents, SpoolDir(state): pr.Spool} {
				if got := mode(t, path); got != want {
					t.Errorf("umask %04o, private again: %s is %v, want %v", umask, path, got, want)
				}
			}
			fresh := filepath.Join(t.TempDir(), "fresh")
			if err := Prepare(fresh, pr); err != nil {
				t.Fatal(err)
			}
			if got := mode(t, fresh); got != 0o700 {
				t.Errorf("umask %04o: a new private state directory is %v, want 0700", umask, got)
			}
		}()
	}
}
