package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/testkit/testwait"
	"github.com/continuityd/continuityd/upstream/local"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts it
// when the test ends; it skips the test where mounting is not permitted.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cdfull")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		os.Remove(dir)
		t.Skipf("needs a small real tmpfs to fill (mount -t tmpfs -o size=%s): %v (run as root, as CI does)", size, err)
	}
	t.Cleanup(func() {
		// MNT_DETACH: a daemon the test is still tearing down may hold a
		// file open; the mount goes once it lets go.
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

// fillDisk writes a file in dir until the file system refuses with ENOSPC,
// so that not one more page is free; it returns the file's path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", dir, err)
				}
				break
			}
		}
	}
	return path
}

// TestDiskFullRefusesCleanly fills the file system the state directory is
// on, under a real daemon, and writes until the API refuses: every answer
// is 200 (and that write survives a SIGKILL and a restart once space is
// freed) or 507 DISK_FULL (and that write is nowhere), never 500; the
// archive reads back one JSON value per line, as jq would.
func TestDiskFullRefusesCleanly(t *testing.T) {
	w := newWorkspace(t)
	// 16 MiB: the write-ahead log alone is preallocated to 4 MiB, the
	// daemon must start before the disk fills, and once the filler is gone
	// there must be room for the archive to take everything again.
	w.state = mountTmpfs(t, "16m")
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[[agent]]\nname = \"builder\"\nworkdir = %q\n",
		w.state, w.socket, filepath.Join(w.dir, "work"))
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()

	// Large writes fill the log sooner; each focus is unique so the
	// archive tells which writes it holds.
	pad := strings.Repeat("x", 3500)
	focus := func(i int) string { return fmt.Sprintf("write %d %s", i, pad) }
	acked := map[string]uint64{}
	refused := map[string]bool{}
	write := func(i int) (status int, code string) {
		t.Helper()
		f := focus(i)
		status, m, err := post(c, "/v1/continuity/checkpoint", map[string]any{
			"focus":  f,
			"decide": map[string]any{"chosen": fmt.Sprint("choice ", i), "because": "a full disk must refuse a write, never half keep it"},
		})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		e, _ := m["error"].(map[string]any)
		code, _ = e["code"].(string)
		switch {
		case status == 200:
			acked[f] = uint64(m["seq"].(float64))
		case status == 507 && code == "DISK_FULL":
			refused[f] = true
			if msg, _ := e["message"].(string); !strings.Contains(msg, "nothing was saved") || !strings.Contains(msg, "full") {
				t.Errorf("write %d: the DISK_FULL message does not say what happened: %q", i, msg)
			}
		default:
			t.Fatalf("write %d: %d %v (want 200, or 507 DISK_FULL)", i, status, m)
		}
		return status, code
	}
	for i := 0; i < 5; i++ {
		if status, _ := write(i); status != 200 {
			t.Fatalf("write %d before the disk filled: %d", i, status)
		}
	}
	// The archive holds those first writes before the disk fills, so its
	// last page has room for part of the next line: a short write.
	agentDir := filepath.Join(w.state, "agents", "builder")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ws, _ := local.ReadAll(agentDir); len(ws) >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the archive did not take the first writes: %s", p.stderr)
		}
	}
	// The last-resume file is written in the background once the agent
	// starts: it must be there before the disk fills for the test to see
	// that a rewrite that failed kept it whole.
	lastResume := filepath.Join(agentDir, "last-resume.json")
	testwait.Until(t, func() string { return "no " + lastResume + ": " + p.stderr.String() }, func() bool {
		raw, err := os.ReadFile(lastResume)
		return err == nil && json.Valid(raw)
	})
	filler := fillDisk(t, w.state)

	// Write until the API has refused a few in a row: the log is
	// preallocated, so the first writes after the fill still land; bbolt's
	// checkpoints fail until the log has no room left either.
	inARow := 0
	for i := 5; inARow < 3; i++ {
		if i > 5000 {
			t.Fatalf("5000 writes on a full disk and no 507 DISK_FULL (%d acknowledged)", len(acked))
		}
		if status, _ := write(i); status == 507 {
			inARow++
		} else {
			inARow = 0
		}
	}
	t.Logf("%d writes acknowledged, %d refused as DISK_FULL", len(acked), len(refused))
	// The last-resume file the daemon could not rewrite is still the whole
	// old one (an atomic replace that failed keeps it).
	if raw, err := os.ReadFile(lastResume); err != nil || !json.Valid(raw) {
		t.Fatalf("last-resume.json is not whole JSON after the disk filled (%v): %.80q", err, raw)
	}

	// Space comes back while the daemon runs: the archive catches up, and
	// holds whole lines only (no part of a line that did not fit, followed
	// by the whole line when it was sent again).
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitArchived(t, p, agentDir, acked, refused)

	// Killed and restarted, the daemon has every acknowledged write and
	// none of the refused ones.
	c.CloseIdleConnections()
	p.kill()
	p2 := startProc(t, w.socket, nil, "run", "--config", w.config)
	c2 := p2.client()
	defer c2.CloseIdleConnections()
	var maxSeq uint64
	for _, s := range acked {
		maxSeq = max(maxSeq, s)
	}
	if r := get(t, c2, "/v1/continuity?peek=1"); uint64(r["seq"].(float64)) < maxSeq {
		t.Fatalf("resume seq %v < highest acknowledged %d", r["seq"], maxSeq)
	}
	waitArchived(t, p2, agentDir, acked, refused)
	// Atomic writes that failed on the full disk left no temporary files.
	filepath.WalkDir(w.state, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", path)
		}
		return nil
	})
	if code := p2.terminate(t); code != 0 {
		t.Fatalf("SIGTERM exit code %d: %s", code, p2.stderr)
	}
}

// checkArchiveLines reads every archive file line by line and decodes each
// line as one JSON value, as `jq .` would.
func checkArchiveLines(t *testing.T, agentDir string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(agentDir, local.ArchiveDir, "*.jsonl"))
	if len(paths) == 0 {
		t.Fatal("no archive files")
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > 0 && raw[len(raw)-1] != '\n' {
			t.Errorf("%s ends in a partial line: %.80q", p, raw[bytes.LastIndexByte(raw, '\n')+1:])
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for n := 1; sc.Scan(); n++ {
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Errorf("%s line %d is not one JSON value (%v): %.120q", p, n, err, sc.Bytes())
			}
		}
	}
}

// waitArchived waits until the daemon's local upstream has delivered and
// flushed everything the agent's log holds and has nothing pending (so no
// append is in flight: a reader can see the end of a line still being
// written, and a restarted daemon sends again what was not acknowledged),
// then checks that every line is whole JSON, that the archive holds every
// acknowledged write under its seq and no refused one.
func waitArchived(t *testing.T, p *proc, agentDir string, acked map[string]uint64, refused map[string]bool) {
	t.Helper()
	var maxSeq uint64
	for _, s := range acked {
		maxSeq = max(maxSeq, s)
	}
	c := p.client()
	defer c.CloseIdleConnections()
	var seen string
	testwait.Until(t, func() string {
		return fmt.Sprintf("the local upstream did not catch up with seq %d: last seen %s; stderr: %s", maxSeq, seen, p.stderr)
	}, func() bool {
		r := get(t, c, "/v1/continuity?peek=1")
		seq := uint64(r["seq"].(float64))
		ups, _ := r["upstreams"].([]any)
		for _, u := range ups {
			u, _ := u.(map[string]any)
			if u["kind"] != local.Kind {
				continue
			}
			seen = fmt.Sprintf("resume seq %d, upstream %v", seq, u)
			delivered, _ := u["delivered_seq"].(float64)
			pending, _ := u["pending"].(float64)
			return seq >= maxSeq && uint64(delivered) >= seq && pending == 0
		}
		seen = fmt.Sprintf("no local upstream in %v", ups)
		return false
	})
	ws, err := local.ReadAll(agentDir)
	if err != nil {
		t.Fatal(err)
	}
	checkArchiveLines(t, agentDir)
	archived := map[string]uint64{}
	for _, wr := range ws {
		if wr.Checkpoint != nil && wr.Checkpoint.Focus != nil {
			archived[*wr.Checkpoint.Focus] = wr.Seq
		}
	}
	for f := range refused {
		if _, ok := archived[f]; ok {
			t.Errorf("%.12s… was refused as DISK_FULL but is in the archive", f)
		}
	}
	for f, seq := range acked {
		if got, ok := archived[f]; !ok || got != seq {
			t.Errorf("%.12s… acknowledged as seq %d, archived as %d (0: missing)", f, seq, got)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestDiskFullHookSpoolFailsCleanly: with the daemon down and its state
// directory's disk full, `continuityd hook` still exits 0, says the event
// could not be spooled, and leaves no temporary file in the spool.
func TestDiskFullHookSpoolFailsCleanly(t *testing.T) {
	w := newWorkspace(t)
	w.state = mountTmpfs(t, "1m")
	os.MkdirAll(filepath.Join(w.state, "spool"), 0o700)
	fillDisk(t, w.state)
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	pre := `{"session_id":"s1","transcript_path":"/tmp/t.jsonl","cwd":"` + w.dir + `","hook_event_name":"PreCompact","trigger":"auto"}`
	code, out, errs := cli(t, env, pre, "hook")
	if code != 0 || out != "" || !strings.Contains(errs, "could not be spooled") || !strings.Contains(errs, "no space left") {
		t.Fatalf("hook on a full disk: exit %d, out %q, err %q", code, out, errs)
	}
	if left, _ := os.ReadDir(filepath.Join(w.state, "spool")); len(left) != 0 {
		t.Fatalf("the spool holds %v after a spool that failed", left)
	}
}
