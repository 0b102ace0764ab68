package capture

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// secretToken is a token the secret guard recognises (a GitHub personal
// access token's shape).
const secretToken = "ghp_R7x9Qm2LkP4vT8nZ3wY6bJ1cF5hD0sA2eG7k"

// TestHandoffFileBecomesDerivedState: the agent keeps HANDOFF.md in its
// workdir; the watcher sees it change, the capture reads and guards it,
// and the policy checkpoints what it says as automatic state.
func TestHandoffFileBecomesDerivedState(t *testing.T) {
	o := testOptions(t)
	r := startCapture(t, o)
	writeFile(t, filepath.Join(o.Workdir, "HANDOFF.md"),
		"# Goal\nMigrate billing to the new client\n\n## Next\nSwap the callsites\n\n## Blockers\nThe vendor's sandbox\n")
	got := waitResume(t, r.store, "the handoff file's focus", func(res capsule.Resume) bool {
		return res.Focus == "Migrate billing to the new client" && res.WorkingState != nil
	})
	ws := got.WorkingState
	if ws.NextAction != "Swap the callsites" || ws.WaitingFor == nil || *ws.WaitingFor != "The vendor's sandbox" || ws.Origin != capsule.OriginAutomatic {
		t.Fatalf("working state from HANDOFF.md: %+v", ws)
	}
	if len(got.Refused) != 0 {
		t.Fatalf("a good handoff file shown refused: %+v", got.Refused)
	}
}

// TestHandoffFileWithSecretIsRefusedUntilFixed: a HANDOFF.md that holds a
// secret is refused whole (nothing of it reaches the state) and the
// refusal names the rule without repeating the secret; once fixed, the
// refusal goes and the file is applied.
func TestHandoffFileWithSecretIsRefusedUntilFixed(t *testing.T) {
	o := testOptions(t)
	r := startCapture(t, o)
	path := filepath.Join(o.Workdir, "HANDOFF.md")
	writeFile(t, path, "# Goal\ndeploy with "+secretToken+"\n")
	got := waitResume(t, r.store, "HANDOFF.md refused", func(res capsule.Resume) bool { return refusalOf(res, "HANDOFF.md") != nil })
	e := refusalOf(got, "HANDOFF.md").Error
	if e.Code != capsule.CodeSecretDetected || strings.Contains(e.Message, "ghp_") {
		t.Fatalf("refusal %+v: want %s without the secret", e, capsule.CodeSecretDetected)
	}
	if got.Focus != "" {
		t.Fatalf("a refused file changed the state: focus %q", got.Focus)
	}
	writeFile(t, path, "# Goal\ndeploy with the token from the vault\n")
	waitResume(t, r.store, "the fixed file applied and its refusal gone", func(res capsule.Resume) bool {
		return refusalOf(res, "HANDOFF.md") == nil && res.Focus == "deploy with the token from the vault"
	})
}

// checkHandoffsOnce runs one check of the handoff files, failing the test
// when it does not return (a FIFO waited on, say).
func checkHandoffsOnce(t *testing.T, c *Capture) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.checkHandoffs(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(testwait.Limit):
		t.Fatalf("checking the handoff files did not return in %v", testwait.Limit)
	}
}

// TestHandoffFilesAreUntrusted: the workdir may be a cloned repository, so
// its handoff files are refused, never followed or waited on, when they
// lead out of the workdir, are not regular files, are over the size limit
// or fail the guard; a link that stays inside the workdir is read. Each
// refusal is shown with a code and what was found.
func TestHandoffFilesAreUntrusted(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "HANDOFF.md"), "# Goal\nread from outside the workdir\n")
	capsuleFile := filepath.Join(".continuity", "capsule.json")
	for _, tc := range []struct {
		name    string
		file    string // HANDOFF.md or the capsule file
		prepare func(t *testing.T, path string)
		code    string // "" : read and applied
		detail  string // in the refusal's message
	}{
		{"link out of the workdir", "HANDOFF.md", func(t *testing.T, path string) {
			symlink(t, filepath.Join(outside, "HANDOFF.md"), path)
		}, capsule.CodeInvalidField, "leads out of"},
		{"link inside the workdir", "HANDOFF.md", func(t *testing.T, path string) {
			writeFile(t, filepath.Join(filepath.Dir(path), "notes", "handoff.md"), "# Goal\nread through a link inside\n")
			symlink(t, filepath.Join("notes", "handoff.md"), path)
		}, "", ""},
		{"FIFO", capsuleFile, func(t *testing.T, path string) { mkfifo(t, path) }, capsule.CodeInvalidField, "not a regular file"},
		{"directory", "HANDOFF.md", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, capsule.CodeInvalidField, "not a regular file"},
		{"over the size limit", "HANDOFF.md", func(t *testing.T, path string) {
			writeFile(t, path, "# Goal\nbig\n")
			if err := os.Truncate(path, 3<<30); err != nil { // sparse: 3 GB that take no room
				t.Fatal(err)
			}
		}, capsule.CodeBodyTooLarge, "over the limit"},
		{"secret", capsuleFile, func(t *testing.T, path string) {
			writeFile(t, path, `{"version":"1","goal":"ship with `+secretToken+`"}`)
		}, capsule.CodeSecretDetected, ""},
		{"not the capsule schema", capsuleFile, func(t *testing.T, path string) {
			writeFile(t, path, `{"version":"1","goal":"a goal","mood":"fine"}`)
		}, capsule.CodeInvalidCapsule, "not a Continuity Capsule v1 property"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			r := newCapture(t, o)
			path := filepath.Join(o.Workdir, tc.file)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			tc.prepare(t, path)
			checkHandoffsOnce(t, r.Capture)
			got := refusalOf(r.store.Resume(), tc.file)
			if tc.code == "" {
				if got != nil {
					t.Fatalf("refused: %+v", got.Error)
				}
				return
			}
			if got == nil {
				t.Fatalf("%s not refused", tc.file)
			}
			if got.Error.Code != tc.code || !strings.Contains(got.Error.Message, tc.detail) {
				t.Fatalf("refusal %+v: want code %s and %q", got.Error, tc.code, tc.detail)
			}
			if strings.Contains(got.Error.Message, "ghp_") || strings.Contains(got.Error.Message, "outside the workdir") {
				t.Fatalf("the refusal repeats what the file holds: %q", got.Error.Message)
			}
			// Seen again unchanged, it is not refused again (the refusal
			// keeps its time): a burst of activity does not repeat it.
			checkHandoffsOnce(t, r.Capture)
			if again := refusalOf(r.store.Resume(), tc.file); again == nil || !again.At.Equal(got.At) {
				t.Fatalf("the same refusal recorded again: first %+v, then %+v", got, again)
			}
		})
	}
}

// TestHandoffReadThroughTheSizeLimit: a file just under the limit is read,
// one byte over is refused, so the limit is the guard's body limit.
func TestHandoffReadThroughTheSizeLimit(t *testing.T) {
	o := testOptions(t)
	r := newCapture(t, o)
	path := filepath.Join(o.Workdir, "HANDOFF.md")
	head := "# Goal\nkeep the file small\n\n## Done\n"
	writeFile(t, path, head+strings.Repeat("x", guard.MaxBodyBytes-len(head)))
	checkHandoffsOnce(t, r.Capture)
	if rf := refusalOf(r.store.Resume(), "HANDOFF.md"); rf != nil && rf.Error.Code == capsule.CodeBodyTooLarge {
		t.Fatalf("a file of exactly the limit refused: %+v", rf.Error)
	}
	writeFile(t, path, head+strings.Repeat("x", guard.MaxBodyBytes-len(head)+1))
	checkHandoffsOnce(t, r.Capture)
	if rf := refusalOf(r.store.Resume(), "HANDOFF.md"); rf == nil || rf.Error.Code != capsule.CodeBodyTooLarge {
		t.Fatalf("a file one byte over the limit: refusal %+v", rf)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}
