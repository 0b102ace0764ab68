package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cmdline "github.com/continuityd/continuityd/internal/front/cli"
)

// The completion scripts name every command of the table and its
// subcommands; bash's is valid bash and completes commands, subcommands
// and flags when bash runs it (zsh's and fish's are checked by their
// shells when those are installed).
func TestCompletionScripts(t *testing.T) {
	env := mannersEnv(t)
	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errs := cli(t, env, "", "completion", sh)
		if code != exitOK || errs != "" {
			t.Fatalf("completion %s: exit %d: %s", sh, code, errs)
		}
		for _, c := range cmdline.Commands() {
			words := append([]string{c.Name}, c.Subs...)
			for _, w := range words {
				if !strings.Contains(out, w) {
					t.Errorf("completion %s does not name %s (of %s)", sh, w, c.Name)
				}
			}
		}
		path := filepath.Join(t.TempDir(), "continuityd."+sh)
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		scripts[sh] = path
	}
	if b, err := exec.Command("bash", "-n", scripts["bash"]).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, b)
	}
	for sh, check := range map[string][]string{"zsh": {"zsh", "-n"}, "fish": {"fish", "--no-execute"}} {
		if _, err := exec.LookPath(check[0]); err != nil {
			if os.Getenv("CI") != "" { // .ci/run installs it
				t.Errorf("%s is not installed: its script cannot be checked", sh)
			}
			t.Logf("%s is not installed: its script is not parsed", sh)
			continue
		}
		if b, err := exec.Command(check[0], append(check[1:], scripts[sh])...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(check, " "), err, b)
		}
	}
	// fish's and zsh's load without a word on stderr; fish offers what
	// bash does.
	if _, err := exec.LookPath("fish"); err == nil {
		for line, want := range map[string]string{"continuityd snapshot re": "restore", "continuityd status --j": "--json"} {
			out, err := exec.Command("fish", "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, scripts["fish"], line).CombinedOutput()
			if err != nil || strings.Fields(string(out))[0] != want {
				t.Errorf("fish completes %q with %q (%v), want %s first", line, out, err, want)
			}
		}
	}
	if _, err := exec.LookPath("zsh"); err == nil {
		out, err := exec.Command("zsh", "-f", "-c", `autoload -U compinit && compinit -u -D && source $1 && print -r -- $_comps[continuityd]`, "zsh", scripts["zsh"]).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "_continuityd" {
			t.Errorf("zsh: the script does not load as continuityd's completion: %v\n%s", err, out)
		}
	}
	// What bash offers: COMP_WORDS as a user's line, COMPREPLY as bash
	// would show it.
	for line, want := range map[string]string{
		"continuityd sna":              "snapshot",
		"continuityd stat":             "status statusline",
		"continuityd snapshot re":      "restore",
		"continuityd status --j":       "--json",
		"continuityd install co":       "codex",
		"continuityd doctor --":        "--agent --config --json --socket --help",
		"continuityd completion ":      "bash zsh fish",
		"continuityd service --u":      "--user",
		"continuityd checkpoint --dro": "--drop",
	} {
		script := `source "$1"; COMP_WORDS=(` + line + `); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
[[ "$2" == *" " ]] && { COMP_WORDS+=(""); COMP_CWORD=${#COMP_WORDS[@]}-1; }
_continuityd; echo "${COMPREPLY[*]}"`
		out, err := exec.Command("bash", "-c", script, "bash", scripts["bash"], line).CombinedOutput()
		if got := strings.Fields(string(out)); err != nil || !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(strings.Fields(want)))) {
			t.Errorf("bash completes %q with %q (%v), want %q", line, strings.TrimSpace(string(out)), err, want)
		}
	}
}

// `continuityd man` prints the page the packages install, which
// describes every command of the table.
func TestManPage(t *testing.T) {
	code, out, errs := cli(t, mannersEnv(t), "", "man")
	if code != exitOK || errs != "" || !strings.HasPrefix(out, ".TH CONTINUITYD 1") {
		t.Fatalf("man: exit %d, stderr %q, starts %.40q", code, errs, out)
	}
	for _, c := range cmdline.Commands() {
		if !strings.Contains(out, "\n.TP\n\\fB"+c.Name+"\\fR") && !strings.Contains(out, "\n.TP\n\\fB"+c.Name+" ") {
			t.Errorf("the man page has no entry for %s", c.Name)
		}
	}
	if _, err := exec.LookPath("man"); err == nil {
		page := filepath.Join(t.TempDir(), "continuityd.1")
		os.WriteFile(page, []byte(out), 0o644)
		cmd := exec.Command("man", "-l", "-Tutf8", page)
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "MAN_KEEP_FORMATTING=")
		if b, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(b), "warning") {
			t.Errorf("man -l: %v\n%s", err, b)
		}
	}
}
