package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// cli runs the built binary and returns its exit code, stdout and stderr.
func cli(t *testing.T, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runBinary(t, binary, env, stdin, args...)
}

// runBinary runs the program at path as cli runs the built binary.
func runBinary(t *testing.T, path string, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// golden compares got with testdata/golden/NAME, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestUsageAndVersionExitCodes(t *testing.T) {
	if code, _, _ := cli(t, nil, "", "version"); code != exitOK {
		t.Fatalf("version: %d", code)
	}
	if code, _, _ := cli(t, nil, ""); code != exitUsage {
		t.Fatalf("no command: %d", code)
	}
	if code, _, errs := cli(t, nil, "", "frobnicate"); code != exitUsage || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: %d %s", code, errs)
	}
	if code, _, errs := cli(t, nil, "", "snapshot", "lst"); code != exitUsage || !strings.HasPrefix(errs, `continuityd snapshot: unknown action "lst"`) {
		t.Fatalf("unknown snapshot action: %d %s", code, errs)
	}
	if code, _, _ := cli(t, nil, "", "checkpoint", "--no-such-flag"); code != exitUsage {
		t.Fatalf("bad flag: %d", code)
	}
	sock := filepath.Join(t.TempDir(), "nobody.sock")
	// One sentence: where, why and how to start it; none of the HTTP
	// client's wrapping (Get "http://continuityd/…": dial unix …).
	if code, _, errs := cli(t, nil, "", "resume", "--socket", sock); code != exitUnreachable ||
		errs != "continuityd: the daemon is not reachable at "+sock+": no socket there (is the daemon running?); start it with `continuityd run` in your project (or `continuityd service start --user` for an installed service), or name its socket with --socket\n" {
		t.Fatalf("no daemon: %d %s", code, errs)
	}
	if code, _, _ := cli(t, []string{"CONTINUITYD_SOCKET=" + sock}, "", "status"); code != exitUnreachable {
		t.Fatalf("no daemon via env: %d", code)
	}
}

func TestConfigDefaultAndCheck(t *testing.T) {
	code, def, _ := cli(t, nil, "", "config", "default")
	if code != exitOK || !strings.Contains(def, "[daemon]") {
		t.Fatalf("config default: %d", code)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte(def), 0o600)
	if code, out, errs := cli(t, []string{"HOME=/home/u", "XDG_RUNTIME_DIR=/run/user/1000"}, "", "config", "check", good); code != exitOK || !strings.Contains(out, "is valid") {
		t.Fatalf("config check of the default: %d %s %s", code, out, errs)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte(`[daemon]
socket = "relative.sock"
colour = "blue"

[[agent]]
name = "Builder!"
upstreams = ["qday"]

[upstream.qday]
url = "https://qday.example"
rate = 0
`), 0o600)
	code, _, errs := cli(t, []string{"HOME=/home/u"}, "", "config", "check", bad)
	if code != exitUsage {
		t.Fatalf("config check of a bad file: exit %d", code)
	}
	golden(t, "config-check-bad.txt", strings.ReplaceAll(errs, dir, "DIR"))
	os.WriteFile(bad, []byte("[[agent]]\nname = \"builder\"\n\n[upstream.qday]\nrate = \"fast\"\nburst = 1.5\n"), 0o600)
	code, _, errs = cli(t, []string{"HOME=/home/u"}, "", "config", "check", bad)
	if code != exitUsage {
		t.Fatalf("config check of a mistyped file: exit %d", code)
	}
	golden(t, "config-check-types.txt", strings.ReplaceAll(errs, dir, "DIR"))
}

// TestClientCommandsEndToEnd drives a real daemon with the CLI as a person
// would, checking outputs and exit codes; the resume markdown is a golden
// file.
func TestClientCommandsEndToEnd(t *testing.T) {
	w := newWorkspace(t)
	startProc(t, w.socket, nil, "run", "--config", w.config)
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	run := func(stdin string, args ...string) (int, string, string) { return cli(t, env, stdin, args...) }

	if code, out, errs := run("", "checkpoint", "--focus", "Migrate the billing module to the new client",
		"--next", "Swap the callsites in checkout", "--last-result", "Adapters written, unit tests green",
		"--waiting-for", "the staging secret", "--open", "ship the parser fix"); code != 0 || out != "checkpoint saved (seq 1)\nopened c_1: ship the parser fix\n" {
		t.Fatalf("checkpoint: %d %q %q", code, out, errs)
	}
	// A commitment closed without evidence: the refusal says how a local
	// user closes it, by dropping it with a reason.
	if code, _, errs := run("", "checkpoint", "--close", "c_1=done"); code != exitFailed || !strings.Contains(errs, "EVIDENCE_REQUIRED") || !strings.Contains(errs, "--drop ID=REASON") {
		t.Fatalf("close without evidence: %d %q", code, errs)
	}
	if code, _, errs := run("", "checkpoint", "--decide", "retry", "--because", "too short"); code != exitFailed || !strings.Contains(errs, "MOTIVE_REQUIRED (decide.because)") {
		t.Fatalf("refused checkpoint: %d %q", code, errs)
	}
	if code, out, _ := run(`{"decide":{"chosen":"retry with backoff","because":"the upstream drops bursts over sixty a minute"}}`, "checkpoint", "--json", "-", "--sync"); code != 0 || !strings.Contains(out, "local: delivered") {
		t.Fatalf("checkpoint --json - --sync: %d %q", code, out)
	}
	if code, _, errs := run("", "checkpoint", "--json", "-", "--focus", "x"); code != exitUsage || !strings.Contains(errs, "do not mix") {
		t.Fatalf("mixed --json: %d %q", code, errs)
	}
	if code, out, _ := run("", "signal", "context", "used_fraction=0.83"); code != 0 || !strings.Contains(out, "recorded") {
		t.Fatalf("signal: %d %q", code, out)
	}
	if code, _, errs := run("", "signal", "weather", "sunny=yes"); code != exitFailed || !strings.Contains(errs, "INVALID_SIGNAL") {
		t.Fatalf("bad signal: %d %q", code, errs)
	}
	capsuleFile := filepath.Join(w.dir, "capsule.json")
	os.WriteFile(capsuleFile, []byte(`{"version":"1","do_not":"Do not delete the shim before the callsites move","refuted":"Batching the migration fails: the old client is not idempotent"}`), 0o600)
	if code, out, errs := run("", "capsule", "validate", capsuleFile); code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("validate: %d %q %q", code, out, errs)
	}
	if code, out, _ := run("", "capsule", "put", capsuleFile); code != 0 || !strings.Contains(out, "capsule stored") {
		t.Fatalf("put: %d %q", code, out)
	}
	badCapsule := filepath.Join(w.dir, "bad.json")
	os.WriteFile(badCapsule, []byte(`{"version":"2"}`), 0o600)
	if code, _, errs := run("", "capsule", "validate", badCapsule); code != exitFailed || !strings.Contains(errs, "INVALID_CAPSULE") {
		t.Fatalf("validate bad: %d %q", code, errs)
	}
	if code, out, _ := run("", "capsule", "seal"); code != 0 || !strings.Contains(out, "capsule sealed") {
		t.Fatalf("seal: %d %q", code, out)
	}
	code, out, _ := run("", "capsule", "show")
	if code != 0 || !strings.Contains(out, `"goal": "Migrate the billing module to the new client"`) || !strings.Contains(out, `"do_not"`) {
		t.Fatalf("show: %d %q", code, out)
	}
	if code, out, _ := run("", "status"); code != 0 || !strings.Contains(out, "builder") || !strings.Contains(out, "local") {
		t.Fatalf("status: %d %q", code, out)
	}
	if code, out, _ := run("", "deadletter", "list"); code != 0 || out != "no dead letters\n" {
		t.Fatalf("deadletter list: %d %q", code, out)
	}
	// The archive takes writes in batches; the golden resume shows it caught up.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, js, _ := run("", "status", "--json")
		if strings.Contains(js, `"pending":0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the archive did not catch up: %s", js)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, md, _ := run("", "resume", "--peek")
	if code != 0 {
		t.Fatalf("resume: %d", code)
	}
	// The open commitment's id and ages vary; the rest is fixed.
	golden(t, "resume.md", md)
	if code, js, _ := run("", "resume", "--json"); code != 0 || !strings.HasPrefix(js, "{") {
		t.Fatalf("resume --json: %d", code)
	}
}
