package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSnapshotRestoreOwnPathsCLI: a real daemon; a person edits a file
// after the start snapshot. `snapshot restore ID` (no --path, no --all)
// restores only what this agent changed, here nothing, and names the
// person's file it left alone, with whose change it is; --all restores
// it. The attribution ledger outlasts a SIGKILL and a restart; when its
// file is damaged, it is set aside with a warning, and then who changed
// what since that snapshot is not known: a restore without --path or
// --all, and its dry run, are refused with WHOSE_UNKNOWN naming the way
// out, and change nothing; --all still restores.
func TestSnapshotRestoreOwnPathsCLI(t *testing.T) {
	t.Parallel()
	w, work := snapshotWorkspace(t, "")
	writeFile(t, work, "a.go", "a1\n")
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	var ids []string
	waitUntil(t, func() string { return fmt.Sprintf("no start snapshot (%v); log:\n%s", ids, p.stderr) },
		func() bool { ids = listedSnapshots(t, p); return len(ids) >= 1 })
	start := ids[len(ids)-1]

	writeFile(t, work, "a.go", "a2\n") // the person's edit
	code, out, errOut := cli(t, env, "", "snapshot", "restore", start)
	if code != 0 || !strings.Contains(out, "left alone a.go: changed by outside") || !strings.Contains(out, "only the files this agent changed") {
		t.Fatalf("restore without --all (exit %d): %s%s", code, out, errOut)
	}
	if got := readFile(t, work, "a.go"); got != "a2\n" {
		t.Fatalf("a restore of the agent's own files put back the person's a.go: %q", got)
	}
	if code, _, errOut := cli(t, env, "", "snapshot", "restore", start, "--all", "--path", "a.go"); code != 2 || !strings.Contains(errOut, "give one of them") {
		t.Fatalf("--all with --path (exit %d): %s", code, errOut)
	}
	code, out, errOut = cli(t, env, "", "snapshot", "restore", start, "--all")
	if code != 0 || !strings.Contains(out, "restore a.go") || strings.Contains(out, "left alone") || !strings.Contains(out, "--all\n") {
		t.Fatalf("restore --all (exit %d): %s%s", code, out, errOut)
	}
	if got := readFile(t, work, "a.go"); got != "a1\n" {
		t.Fatalf("after restore --all a.go is %q", got)
	}

	// The ledger is kept on disk (its file, and its journal of what
	// changed since): once it holds the person's edit, a SIGKILL and a new
	// daemon still know whose a.go is.
	ledgerFile := func() string {
		files, _ := filepath.Glob(filepath.Join(w.state, "attribution", "*.json"))
		if len(files) != 1 {
			return ""
		}
		return files[0]
	}
	waitUntil(t, func() string {
		return fmt.Sprintf("no attribution ledger with a.go in %s", filepath.Join(w.state, "attribution"))
	},
		func() bool {
			f := ledgerFile()
			b, _ := os.ReadFile(f)
			j, _ := os.ReadFile(f + ".journal")
			return f != "" && (strings.Contains(string(b), `"a.go"`) || strings.Contains(string(j), `"a.go"`))
		})
	p.kill()
	p = startProc(t, w.socket, nil, "run", "--config", w.config)
	writeFile(t, work, "a.go", "a3\n")
	code, out, errOut = cli(t, env, "", "snapshot", "restore", start)
	if code != 0 || !strings.Contains(out, "left alone a.go: changed by outside") {
		t.Fatalf("restore without --all after a restart (exit %d): want the ledger kept, a.go left alone\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if got := readFile(t, work, "a.go"); got != "a3\n" {
		t.Fatalf("after a restart a restore of the agent's own files put back the person's a.go: %q", got)
	}

	// A ledger that cannot be believed is set aside, loudly: then who
	// changed what before this start is not known, and a restore without
	// --path or --all (and its dry run) is refused with WHOSE_UNKNOWN,
	// naming the way out, changing nothing; --all still restores.
	p.kill()
	damaged := ledgerFile()
	if err := os.WriteFile(damaged, []byte(`{"workdir": `), 0o600); err != nil {
		t.Fatal(err)
	}
	p = startProc(t, w.socket, nil, "run", "--config", w.config)
	waitUntil(t, func() string { return "no warning naming the damaged ledger; log:\n" + p.stderr.String() },
		func() bool {
			return strings.Contains(p.stderr.String(), "cannot be believed") && strings.Contains(p.stderr.String(), damaged)
		})
	if _, err := os.Stat(damaged); err == nil {
		if b, _ := os.ReadFile(damaged); string(b) == `{"workdir": ` {
			t.Fatalf("the damaged ledger %s was left in place", damaged)
		}
	}
	if aside, _ := filepath.Glob(damaged + ".damaged-*"); len(aside) != 1 {
		t.Fatalf("the damaged ledger was not set aside as %s.damaged-TIME: %v", damaged, aside)
	}
	for _, args := range [][]string{{"snapshot", "restore", start}, {"snapshot", "restore", start, "--dry-run"}} {
		code, out, errOut := cli(t, env, "", args...)
		if code != 1 || !strings.Contains(errOut, "WHOSE_UNKNOWN") || !strings.Contains(errOut, "--all") || !strings.Contains(errOut, "--path") ||
			!strings.Contains(errOut, "before the daemon began") {
			t.Fatalf("%s after a damaged ledger (exit %d): want 1 and WHOSE_UNKNOWN naming --path and --all\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
		if got := readFile(t, work, "a.go"); got != "a3\n" {
			t.Fatalf("a refused restore changed a.go: %q", got)
		}
	}
	if code, out, errOut := cli(t, env, "", "snapshot", "restore", start, "--all"); code != 0 || readFile(t, work, "a.go") != "a1\n" {
		t.Fatalf("restore --all after a damaged ledger (exit %d): %s%s; a.go %q", code, out, errOut, readFile(t, work, "a.go"))
	}
}
