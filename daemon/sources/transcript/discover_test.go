package transcript

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEncodeClaudeProject(t *testing.T) {
	// Launch directories and the project folders Claude Code made for
	// them, as seen in the fixtures' transcript_path values.
	for dir, want := range map[string]string{
		"/Users/thekryptodragon":                            "-Users-thekryptodragon",
		"/Users/thekryptodragon/Development/sirsi-pantheon": "-Users-thekryptodragon-Development-sirsi-pantheon",
		"/tmp/shp-schemas-tx.blIf90/work":                   "-tmp-shp-schemas-tx-blIf90-work",
		"/tmp/shp-hooks-base-dwqg6d95":                      "-tmp-shp-hooks-base-dwqg6d95",
		"/Users/ryoppippi/ghq/github.com/ryoppippi/ccusage": "-Users-ryoppippi-ghq-github-com-ryoppippi-ccusage",
		`C:\Users\Techn\AppData\Local\Temp\w50d-probe`:      "C--Users-Techn-AppData-Local-Temp-w50d-probe",
		"/home/me/my project_v2/é/😀":                        "-home-me-my-project-v2-----",
	} {
		if got := EncodeClaudeProject(dir); got != want {
			t.Errorf("EncodeClaudeProject(%q) = %q, want %q", dir, got, want)
		}
	}
	got := ClaudeProjectDir("/home/u/.claude", "/tmp/shp-schemas-tx.blIf90/work")
	if want := filepath.Join("/home/u", ".claude", "projects", "-tmp-shp-schemas-tx-blIf90-work"); got != want {
		t.Errorf("ClaudeProjectDir = %q, want %q", got, want)
	}
}

// Long launch directories: Claude Code cuts the folder name at 200 and adds
// a hash. The expected names were made by Claude Code's own sanitizePath
// run under Node.js (node 18, the function copied as published), which is
// the name used when no folder exists yet.
func TestClaudeProjectDirLongNames(t *testing.T) {
	long := "/home/me/" + strings.Repeat("work/", 40) + "repo"
	unicode := "/srv/😀/" + strings.Repeat("ünïcode-dir/", 20) + "x"
	exactly := "/a/" + strings.Repeat("b", 197) // 200 when encoded: not cut
	// home is the Claude home (~/.claude).
	home := t.TempDir()
	projects := filepath.Join(home, "projects")
	for dir, want := range map[string]string{
		long:    "-home-me-" + strings.Repeat("work-", 38) + "w-4rgovs",
		unicode: "-srv-----n-code-dir" + strings.Repeat("--n-code-dir", 15) + "--juymp",
		exactly: "-a-" + strings.Repeat("b", 197),
	} {
		if got := ClaudeProjectDir(home, dir); got != filepath.Join(projects, want) {
			t.Errorf("ClaudeProjectDir(%q) =\n %q, want\n %q", dir, filepath.Base(got), want)
		}
	}

	// The CLI on Bun names it with another hash: the existing folder with
	// the cut name wins, the most recent of several; other folders and
	// files do not match.
	cut := EncodeClaudeProject(long)[:200]
	base := time.Now().Add(-time.Hour)
	for i, name := range []string{cut + "-1x9bunold", cut + "-2bunnewer", cut + "x-notadash"} {
		d := filepath.Join(projects, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Minute)
		if name == cut+"x-notadash" {
			mt = base.Add(time.Hour)
		}
		if err := os.Chtimes(d, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	writeAt(t, filepath.Join(projects, cut+"-file"), "x", base.Add(2*time.Hour))
	if got, want := ClaudeProjectDir(home, long), filepath.Join(projects, cut+"-2bunnewer"); got != want {
		t.Errorf("with folders present: %q, want %q", filepath.Base(got), filepath.Base(want))
	}
}

func writeAt(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestLatestClaudeTranscript(t *testing.T) {
	home := t.TempDir()
	proj := ClaudeProjectDir(home, "/work/repo")
	if _, err := LatestClaudeTranscript(proj); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing folder: %v", err)
	}
	base := time.Now().Add(-time.Hour)
	writeAt(t, filepath.Join(proj, "old.jsonl"), "{}\n", base)
	writeAt(t, filepath.Join(proj, "new.jsonl"), "{}\n", base.Add(2*time.Minute))
	// Newer, but not session transcripts.
	writeAt(t, filepath.Join(proj, "agent-af1ff21.jsonl"), "{}\n", base.Add(5*time.Minute))
	writeAt(t, filepath.Join(proj, "notes.txt"), "x", base.Add(5*time.Minute))
	writeAt(t, filepath.Join(proj, "new", "subagents", "agent-acompact-1.jsonl"), "{}\n", base.Add(6*time.Minute))
	if err := os.Mkdir(filepath.Join(proj, "dir.jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := LatestClaudeTranscript(proj)
	if err != nil || got != filepath.Join(proj, "new.jsonl") {
		t.Fatalf("got %q %v", got, err)
	}

	empty := filepath.Join(home, "empty")
	os.Mkdir(empty, 0o700)
	writeAt(t, filepath.Join(empty, "agent-x.jsonl"), "{}\n", base)
	if _, err := LatestClaudeTranscript(empty); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("only side chains: %v", err)
	}
}

func TestLatestCodexRollout(t *testing.T) {
	root := t.TempDir()
	meta := func(id, cwd string) string {
		return `{"timestamp":"2026-05-11T08:27:17.490Z","type":"session_meta","payload":{"id":"` + id + `","cwd":"` + cwd + `","cli_version":"0.125.0"}}` + "\n" +
			`{"type":"event_msg","payload":{"type":"task_started","model_context_window":258400}}` + "\n"
	}
	base := time.Now().Add(-24 * time.Hour)
	a := filepath.Join(root, "2026", "05", "10", "rollout-2026-05-10T09-00-00-a.jsonl")
	b := filepath.Join(root, "2026", "05", "11", "rollout-2026-05-11T09-00-00-b.jsonl")
	c := filepath.Join(root, "2026", "05", "11", "rollout-2026-05-11T10-00-00-c.jsonl")
	writeAt(t, a, meta("a", "/work/repo"), base)
	writeAt(t, b, meta("b", "/work/repo"), base.Add(time.Hour))
	writeAt(t, c, meta("c", "/work/other"), base.Add(2*time.Hour))
	// Noise: not rollouts, or no session_meta first.
	writeAt(t, filepath.Join(root, "2026", "05", "11", "history.jsonl"), meta("h", "/work/repo"), base.Add(3*time.Hour))
	writeAt(t, filepath.Join(root, "2026", "05", "11", "rollout-broken.jsonl"), "{not json\n", base.Add(3*time.Hour))
	writeAt(t, filepath.Join(root, "2026", "05", "11", "rollout-nometa.jsonl"), `{"type":"event_msg","payload":{"cwd":"/work/repo"}}`+"\n", base.Add(3*time.Hour))

	got, err := LatestCodexRollout(root, "/work/repo/")
	if err != nil || got != b {
		t.Fatalf("got %q %v, want %q", got, err, b)
	}
	// A resumed session appends to its older-dated file: newest by
	// modification time wins over the folder date.
	if err := os.Chtimes(a, base.Add(4*time.Hour), base.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := LatestCodexRollout(root, "/work/repo"); err != nil || got != a {
		t.Fatalf("after resume: got %q %v, want %q", got, err, a)
	}
	if _, err := LatestCodexRollout(root, "/nowhere"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no match: %v", err)
	}
	if _, err := LatestCodexRollout(filepath.Join(root, "missing"), "/work/repo"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing root: %v", err)
	}

	// The real 0.125 rollout's first line (a 20 kB session_meta) is read.
	real := filepath.Join(root, "2026", "05", "12", "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl")
	data, err := os.ReadFile(filepath.Join("testdata", codex125))
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, real, string(data), base.Add(5*time.Hour))
	if got, err := LatestCodexRollout(root, "/Users/Sample_User/repos/codemie-ai/codemie-code"); err != nil || got != real {
		t.Fatalf("real rollout: got %q %v", got, err)
	}
}
