package agentfiles

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/front/agentconf"
)

// Inspect tells a file with nothing of ours, one with all of it, and one
// a user took a hook out of, and writes nothing.
func TestInspect(t *testing.T) {
	home := t.TempDir()
	targets, err := Targets("claude-code", "user", env(home, t.TempDir(), nil))
	if err != nil {
		t.Fatal(err)
	}
	settings := targets[0]
	if in, err := Inspect(settings); err != nil || in.Exists || in.Ours || len(in.Missing) == 0 || len(in.Commands) > 0 {
		t.Fatalf("no file: %+v, %v", in, err)
	}
	if _, err := os.Stat(settings.Path); !os.IsNotExist(err) {
		t.Fatal("Inspect wrote the file")
	}
	apply(t, targets, true, time.Now())
	in, err := Inspect(settings)
	if err != nil || !in.Exists || !in.Ours || len(in.Missing) > 0 || !slices.Equal(in.Commands, []string{agentconf.HookCommand, agentconf.StatuslineCommand}) {
		t.Fatalf("installed: %+v, %v", in, err)
	}
	// A user renames the Stop hooks' event: that is what is missing.
	b, _ := os.ReadFile(settings.Path)
	os.WriteFile(settings.Path, []byte(strings.Replace(string(b), `"Stop": [`, `"NotStop": [`, 1)), 0o600)
	if in, err := Inspect(settings); err != nil || !in.Ours || !slices.Equal(in.Missing, []string{"hooks for Stop"}) {
		t.Fatalf("a hook taken out: %+v, %v", in, err)
	}
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte("{,"), 0o600)
	if _, err := Inspect(settings); err == nil {
		t.Fatal("a file that does not parse: no error")
	}
}
