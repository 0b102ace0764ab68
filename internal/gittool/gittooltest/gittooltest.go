// Package gittooltest is for tests only: a hostile repository, whose
// configuration and attributes point every git key that can start a
// program at a marker script, and a partial clone whose promisor remote
// is reached through such a script (the way a workdir's owner made a root
// daemon run a command). A test runs the daemon's git on it and asks
// which markers exist: none may.
package gittooltest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Key is one configuration key that can make git start a program.
type Key struct {
	// Key is the setting as the repository's config holds it; its value
	// is the key's marker script unless Value says otherwise.
	Key   string
	Value string
	// Extra are further settings the key needs to take effect
	// ("key=value"; "{script}" in a value is the key's marker script).
	Extra []string
	// Attributes is a line for .gitattributes that names the key's
	// driver.
	Attributes string
	// Overridden is true when the daemon's settings name the key itself:
	// under them `git config --get` must give Neutral, not the script.
	Overridden bool
	Neutral    string
	// Trigger is a git command that runs the key's program when plain git
	// runs it in the repository (nil: none that a test can run here);
	// Stdin is its input, TTY says it needs a terminal (a pager),
	// MinGit the first git release that knows the key.
	Trigger []string
	Stdin   string
	TTY     bool
	MinGit  [2]int
	// Blocked says what keeps the key's program from running when it is
	// not Overridden.
	Blocked string
	// Unused is true when the daemon's settings do not stop Trigger: the
	// key is safe because the daemon never runs such a command.
	Unused bool
}

// Name is the key's marker's file name.
func (k Key) Name() string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, k.Key)
}

// credentialFill asks for a credential for a made-up host: helpers first,
// then askpass.
var credentialFill = []string{"credential", "fill"}

const credentialInput = "protocol=https\nhost=example.invalid\n\n"

// Keys are the keys a hostile repository sets, each with how it is
// triggered and what keeps it from running under the daemon's settings.
func Keys() []Key {
	const (
		blockedDrivers = "a driver named by .gitattributes: the daemon runs no command on an agent's repository that applies drivers (plumbing only), and its store's info/attributes unsets them"
		blockedRemote  = "a remote's setting: every transport is refused (GIT_ALLOW_PROTOCOL empty, protocol.*.allow never)"
		blockedNever   = "a command the daemon never runs"
	)
	return []Key{
		{Key: "core.hooksPath", Overridden: true, Neutral: "/dev/null", Trigger: []string{"update-ref", "refs/heads/hooked", "HEAD"}},
		{Key: "core.fsmonitor", Overridden: true, Neutral: "false", Trigger: []string{"status", "--porcelain"}},
		{Key: "core.sshCommand", Overridden: true, Neutral: "/dev/null", Trigger: []string{"fetch", "ssh://example.invalid/repo"}},
		{Key: "core.gitProxy", Blocked: "GIT_PROXY_COMMAND is set empty (it beats core.gitProxy) and the git transport is refused",
			Trigger: []string{"fetch", "git://example.invalid/repo"}},
		{Key: "core.askPass", Overridden: true, Neutral: "", Trigger: credentialFill, Stdin: credentialInput},
		{Key: "credential.helper", Overridden: true, Neutral: "", Trigger: credentialFill, Stdin: credentialInput},
		{Key: "credential.https://example.invalid.helper", Blocked: "credential.helper= empties the list of helpers, URL-specific ones included",
			Trigger: credentialFill, Stdin: credentialInput},
		{Key: "core.pager", Overridden: true, Neutral: "cat", Trigger: []string{"log", "-1"}, TTY: true},
		{Key: "pager.log", Blocked: "--no-pager, GIT_PAGER=cat, and the daemon's git never writes to a terminal",
			Trigger: []string{"log", "-1"}, TTY: true},
		{Key: "core.editor", Overridden: true, Neutral: ":", Trigger: []string{"commit", "--allow-empty", "-q"}},
		{Key: "sequence.editor", Overridden: true, Neutral: ":", Trigger: []string{"rebase", "-q", "-i", "HEAD"}},
		{Key: "core.alternateRefsCommand", Overridden: true, Neutral: "/dev/null", Extra: []string{"alternates"},
			Trigger: []string{"receive-pack", "."}, Stdin: "0000"},
		{Key: "diff.external", Overridden: true, Neutral: "/dev/null", Extra: []string{"dirty"}, Trigger: []string{"diff"}},
		{Key: "interactive.diffFilter", Overridden: true, Neutral: "/dev/null", Extra: []string{"dirty"},
			Trigger: []string{"add", "-p"}, Stdin: "q\n", TTY: true},
		{Key: "diff.evil.textconv", Unused: true, Attributes: "* diff=evil", Extra: []string{"dirty"}, Trigger: []string{"diff"}, Blocked: blockedDrivers},
		{Key: "diff.evil2.command", Unused: true, Attributes: "* diff=evil2", Extra: []string{"dirty"}, Trigger: []string{"diff"}, Blocked: blockedDrivers},
		{Key: "filter.evil.clean", Unused: true, Attributes: "* filter=evil", Extra: []string{"dirty"}, Trigger: []string{"add", "-A"}, Blocked: blockedDrivers},
		{Key: "filter.evil2.smudge", Unused: true, Attributes: "* filter=evil2", Trigger: []string{"checkout", "-q", "HEAD", "--", "."},
			Extra: []string{"removed"}, Blocked: blockedDrivers},
		{Key: "filter.evil3.process", Unused: true, Attributes: "* filter=evil3", Extra: []string{"dirty"}, Trigger: []string{"add", "-A"}, Blocked: blockedDrivers},
		{Key: "merge.evil.driver", Unused: true, Attributes: "* merge=evil", Extra: []string{"conflict"}, Trigger: []string{"merge", "-q", "--no-edit", "side"},
			Blocked: blockedDrivers},
		{Key: "gpg.program", Overridden: true, Neutral: "/dev/null", Extra: []string{"commit.gpgSign=true"},
			Trigger: []string{"commit", "--allow-empty", "-q", "-m", "signed"}},
		{Key: "gpg.openpgp.program", Overridden: true, Neutral: "/dev/null", Extra: []string{"commit.gpgSign=true"},
			Trigger: []string{"commit", "--allow-empty", "-q", "-m", "signed"}},
		{Key: "gpg.x509.program", Overridden: true, Neutral: "/dev/null", Extra: []string{"commit.gpgSign=true", "gpg.format=x509"},
			Trigger: []string{"commit", "--allow-empty", "-q", "-m", "signed"}},
		{Key: "gpg.ssh.program", Overridden: true, Neutral: "/dev/null",
			Extra:   []string{"commit.gpgSign=true", "gpg.format=ssh", "user.signingKey=key::ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0"},
			Trigger: []string{"commit", "--allow-empty", "-q", "-m", "signed"}},
		{Key: "gpg.ssh.defaultKeyCommand", Overridden: true, Neutral: "/dev/null", Extra: []string{"commit.gpgSign=true", "gpg.format=ssh"},
			Trigger: []string{"commit", "--allow-empty", "-q", "-m", "signed"}},
		{Key: "commit.gpgSign", Value: "true", Overridden: true, Neutral: "false", Extra: []string{"gpg.program={script}"},
			Trigger: []string{"commit", "--allow-empty", "-q", "-m", "signed"}},
		{Key: "tag.gpgSign", Value: "true", Overridden: true, Neutral: "false", Extra: []string{"gpg.program={script}"},
			Trigger: []string{"tag", "-f", "-m", "signed", "v1"}},
		{Key: "log.showSignature", Value: "true", Overridden: true, Neutral: "false", Extra: []string{"gpg.program={script}"}},
		{Key: "protocol.allow", Value: "always", Overridden: true, Neutral: "never",
			Trigger: []string{"fetch", "ext::{script} %S"}},
		{Key: "protocol.ext.allow", Value: "always", Overridden: true, Neutral: "never",
			Trigger: []string{"fetch", "ext::{script} %S"}},
		{Key: "remote.origin.uploadpack", Extra: []string{"remote.origin.url=."}, Trigger: []string{"fetch", "origin"}, Blocked: blockedRemote},
		{Key: "remote.origin2.vcs", Value: "evil", Extra: []string{"remote.origin2.url=x", "helper"}, Trigger: []string{"fetch", "origin2"},
			Blocked: blockedRemote + "; and git-remote-* is looked up on git's PATH only"},
		{Key: "url.ext::{script} %S.insteadOf", Value: "https://example.invalid/", Extra: []string{"protocol.ext.allow=always"},
			Trigger: []string{"fetch", "https://example.invalid/repo"}, Blocked: blockedRemote},
		{Key: "gc.auto", Value: "1", Overridden: true, Neutral: "0"},
		{Key: "maintenance.auto", Value: "true", Overridden: true, Neutral: "false"},
		{Key: "submodule.recurse", Value: "true", Overridden: true, Neutral: "false"},
		{Key: "fetch.recurseSubmodules", Value: "true", Overridden: true, Neutral: "false"},
		{Key: "alias.st", Unused: true, Value: "!{script}", Trigger: []string{"st"}, Blocked: blockedNever + " (aliases: it runs built-in commands only)"},
		{Key: "difftool.evil.cmd", Unused: true, Extra: []string{"diff.tool=evil", "dirty"}, Trigger: []string{"difftool", "-y"}, Blocked: blockedNever},
		{Key: "uploadpack.packObjectsHook", Blocked: "read from protected configuration only (system, global, command line), never a repository's"},
		{Key: "hook.evil.command", Unused: true, Extra: []string{"hook.evil.event=reference-transaction"}, MinGit: [2]int{2, 54},
			Trigger: []string{"update-ref", "refs/heads/hooked", "HEAD"},
			Blocked: "a configured hook (git 2.54+): the daemon runs nothing on an agent's repository that runs hooks"},
	}
}

// Hooks are the hook events githooks(5) lists: each is a marker script
// in the hostile hooks directory.
var Hooks = []string{"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
	"prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge", "pre-push",
	"pre-receive", "update", "proc-receive", "post-receive", "post-update", "reference-transaction",
	"push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate", "fsmonitor-watchman",
	"post-index-change"}

// Repo is a hostile repository.
type Repo struct {
	Dir     string // the work tree
	Markers string // where the marker scripts write
	Bin     string // the marker scripts (and a git-remote-evil)
	Git     string // the git that made it
	// Missing is a commit id no object has: the partial clone's branch
	// "lazy" names it (after MakePartialClone).
	Missing string
	keys    []Key
}

// script is a marker: it notes who ran it, with what, and fails.
const script = "#!/bin/sh\necho \"$(id -u) $0 $*\" >> %q\nexit 1\n"

// New makes a hostile repository at dir (created): two commits on main,
// a branch "side", a tracked file a.txt, and every key of keys (all of
// Keys() when none is given) set to its marker script in .git/config, its
// attributes in .gitattributes (committed) and a hooks directory of
// marker scripts. Plain git made it, as its owner would.
func New(t testing.TB, dir string, keys ...Key) *Repo {
	t.Helper()
	if len(keys) == 0 {
		keys = Keys()
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	side := t.TempDir()
	r := &Repo{Dir: dir, Markers: filepath.Join(side, "markers"), Bin: filepath.Join(side, "bin"), Git: git, keys: keys}
	for _, d := range []string{dir, r.Markers, r.Bin, filepath.Join(r.Bin, "hooks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Whoever git runs as may leave a marker.
	if err := os.Chmod(r.Markers, 0o1777); err != nil {
		t.Fatal(err)
	}
	// Whoever git runs as reaches the scripts (a test's temporary
	// directories are the test's user's alone).
	for _, d := range []string{filepath.Dir(side), side, r.Bin, filepath.Join(r.Bin, "hooks")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range Hooks {
		r.marker(t, filepath.Join("hooks", h), "hook-"+h)
	}
	r.marker(t, "git-remote-evil", "git-remote-evil")

	r.plain(t, "init", "-q", "-b", "main")
	r.plain(t, "config", "user.name", "owner")
	r.plain(t, "config", "user.email", "owner@example.invalid")
	r.write(t, "a.txt", "one\n")
	r.plain(t, "add", "-A")
	r.plain(t, "commit", "-q", "-m", "first")
	r.plain(t, "branch", "side")
	r.plain(t, "checkout", "-q", "side")
	r.write(t, "a.txt", "side\n")
	r.plain(t, "commit", "-q", "-am", "on side")
	r.plain(t, "checkout", "-q", "main")
	r.write(t, "b.txt", "two\n")
	r.plain(t, "add", "-A")
	r.plain(t, "commit", "-q", "-m", "second")

	// What the keys need, made while no hostile setting is in force.
	var attrs, special []string
	for _, k := range keys {
		if k.Attributes != "" {
			attrs = append(attrs, k.Attributes)
		}
		for _, e := range k.Extra {
			if !strings.Contains(e, "=") {
				special = append(special, e)
			}
		}
	}
	if len(attrs) > 0 {
		r.write(t, ".gitattributes", strings.Join(attrs, "\n")+"\n")
		r.plain(t, "add", ".gitattributes")
		r.plain(t, "commit", "-q", "-m", "attributes")
	}
	slices.Sort(special)
	for _, s := range slices.Compact(special) {
		r.special(t, s)
	}
	// The hostile settings, last.
	for _, k := range keys {
		sc := r.marker(t, k.Name(), k.Name())
		value := k.Value
		if value == "" {
			value = sc
		}
		if k.Key == "core.hooksPath" {
			value = filepath.Join(r.Bin, "hooks")
		}
		r.plain(t, "config", "--add", strings.ReplaceAll(k.Key, "{script}", sc), strings.ReplaceAll(value, "{script}", sc))
		for _, e := range k.Extra {
			if kv, v, ok := strings.Cut(e, "="); ok {
				r.plain(t, "config", "--add", kv, strings.ReplaceAll(v, "{script}", sc))
			}
		}
	}
	return r
}

// special makes what an Extra names that is not a setting.
func (r *Repo) special(t testing.TB, what string) {
	t.Helper()
	switch {
	case what == "dirty":
		r.write(t, "a.txt", "changed in the work tree\n")
	case what == "removed":
		if err := os.Remove(filepath.Join(r.Dir, "a.txt")); err != nil {
			t.Fatal(err)
		}
	case what == "conflict":
		r.write(t, "a.txt", "main's\n")
		r.plain(t, "commit", "-q", "--no-verify", "-am", "on main")
	case what == "alternates":
		alt := t.TempDir()
		r.plainIn(t, alt, "init", "-q", "--bare")
		r.write(t, ".git/objects/info/alternates", filepath.Join(alt, "objects")+"\n")
	case what == "helper":
		// git-remote-evil is in Bin: on plain git's PATH only.
	default:
		t.Fatalf("gittooltest: unknown extra %q", what)
	}
}

// marker writes an executable marker script at Bin/rel that leaves
// Markers/name when run; it returns its path.
func (r *Repo) marker(t testing.TB, rel, name string) string {
	t.Helper()
	p := filepath.Join(r.Bin, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, fmt.Appendf(nil, script, filepath.Join(r.Markers, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Tame are the -c settings under which the owner's own git, driven by a
// test, applies none of the repository's filters (which no setting of the
// daemon's can name): the test's own commands then leave no marker.
func Tame() []string {
	var out []string
	for _, k := range Keys() {
		if name, ok := strings.CutPrefix(k.Key, "filter."); ok {
			drv, _, _ := strings.Cut(name, ".")
			out = append(out, "filter."+drv+".clean=", "filter."+drv+".smudge=", "filter."+drv+".process=")
		}
	}
	return out
}

// Script is the marker script of key k.
func (r *Repo) Script(k Key) string { return filepath.Join(r.Bin, k.Name()) }

// Fired lists the markers that exist, each with what its script noted.
func (r *Repo) Fired() []string {
	ents, _ := os.ReadDir(r.Markers)
	var out []string
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(r.Markers, e.Name()))
		out = append(out, e.Name()+": "+strings.TrimSpace(string(b)))
	}
	return out
}

// FiredKey says whether k's marker exists.
func (r *Repo) FiredKey(k Key) bool {
	name := k.Name()
	if k.Key == "core.hooksPath" {
		name = "hook-reference-transaction"
	}
	if k.Key == "remote.origin2.vcs" {
		name = "git-remote-evil"
	}
	_, err := os.Stat(filepath.Join(r.Markers, name))
	return err == nil
}

// Clear removes the markers.
func (r *Repo) Clear(t testing.TB) {
	t.Helper()
	ents, _ := os.ReadDir(r.Markers)
	for _, e := range ents {
		if err := os.Remove(filepath.Join(r.Markers, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// MakePartialClone turns the repository into a partial clone whose
// promisor remote is an ssh:// URL reached through core.sshCommand (a
// marker script), and points branch "lazy" at a commit it lacks: a git
// that reads that commit fetches it, running the script. It returns the
// missing commit's id.
func (r *Repo) MakePartialClone(t testing.TB) string {
	t.Helper()
	ssh := r.marker(t, "ssh-command", "core.sshCommand-promisor")
	r.plain(t, "config", "core.repositoryFormatVersion", "1")
	r.plain(t, "config", "extensions.partialClone", "origin")
	r.plain(t, "config", "remote.origin.url", "ssh://example.invalid/repo.git")
	r.plain(t, "config", "remote.origin.promisor", "true")
	r.plain(t, "config", "remote.origin.partialCloneFilter", "blob:none")
	r.plain(t, "config", "core.sshCommand", ssh)
	r.Missing = "0123456789abcdef0123456789abcdef01234567"
	r.write(t, ".git/refs/heads/lazy", r.Missing+"\n")
	return r.Missing
}

// MarkersOfPartialClone names the marker MakePartialClone's lazy fetch
// leaves.
const MarkersOfPartialClone = "core.sshCommand-promisor"

// Plain runs plain git in the repository, as its owner would (the
// environment of the test, hooks, filters and all): a control that shows
// a hostile setting runs. It may fail; its output is returned.
func (r *Repo) Plain(args ...string) (string, error) {
	cmd := exec.Command(r.Git, args...)
	cmd.Dir = r.Dir
	cmd.Env = r.plainEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *Repo) plainEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=owner", "GIT_AUTHOR_EMAIL=owner@example.invalid", "GIT_COMMITTER_NAME=owner", "GIT_COMMITTER_EMAIL=owner@example.invalid")
}

func (r *Repo) plain(t testing.TB, args ...string) string {
	t.Helper()
	return r.plainIn(t, r.Dir, args...)
}

func (r *Repo) plainIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(r.Git, args...)
	cmd.Dir = dir
	cmd.Env = r.plainEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (r *Repo) write(t testing.TB, rel, content string) {
	t.Helper()
	p := filepath.Join(r.Dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// OldGit writes a git that says it is release version (say "2.39.3", a
// release before GIT_NO_LAZY_FETCH) and runs the real git for everything
// else, in a directory of its own, which it returns: a daemon that finds
// it first on PATH (or is given dir/git) treats git as that old.
func OldGit(t testing.TB, version string) string {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	if real, err = filepath.Abs(real); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'git version %s'; exit 0; fi\nexec %q \"$@\"\n", version, real)
	if err := os.WriteFile(filepath.Join(dir, "git"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
