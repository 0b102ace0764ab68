// Package gittool builds every git process the daemon starts, so that git
// runs as a tool of the daemon and never as the guest of the repository it
// reads: nothing in that repository's configuration, its attributes or the
// daemon's own environment can make git start another program or reach
// the network.
//
// A repository's .git/config belongs to whoever owns the work tree, who
// may not be the daemon's user (a daemon run as root serves other users'
// workdirs). Git reads that config and acts on it: a promisor remote with
// an ssh:// URL and core.sshCommand turns a `git cat-file` of a missing
// object into a command run as the daemon's user. So every run gets:
//
//   - An environment built from scratch (Env): no variable of the
//     daemon's (it may hold upstream tokens, GIT_DIR, GIT_CONFIG_*,
//     GIT_TRACE*, askpass or ssh settings); PATH only to find git's
//     helpers; HOME and XDG_CONFIG_HOME at /dev/null, where no
//     configuration can live; the system and global configuration not
//     read; lazy fetching off (GIT_NO_LAZY_FETCH); an allow list of
//     transports that names none (GIT_ALLOW_PROTOCOL empty), which beats
//     every protocol.* setting; no terminal prompt, no askpass program,
//     no proxy command, pager "cat" and editor ":" (which git takes for
//     none at all); no replace refs; LC_ALL=C.
//   - Settings on the command line (Config), which git reads after the
//     repository's own and so override them, for every key whose name is
//     fixed that can start a program or reach the network; a program key
//     that has no "off" value is set to /dev/null, which execve refuses
//     (git runs a command without metacharacters directly, not through
//     sh), so nothing starts and the operation that wanted it fails.
//   - --no-pager, and optionally a credential (run as another user, with
//     no supplementary groups) and, on Linux, a parent-death signal.
//
// Some keys name a program under a name the repository chooses, which no
// -c setting can cover: filter.<driver>.clean/smudge/process,
// diff.<driver>.textconv/command and merge.<driver>.driver (the driver
// named by .gitattributes), remote.<name>.uploadpack/receivepack/vcs/
// proxy, url.<base>.insteadOf, credential.<url>.helper, pager.<cmd>,
// difftool/mergetool commands, alias.* ("!" aliases), and, from git 2.54,
// hook.<name>.command. Those features are not used at all:
//
//   - On an agent's repository the daemon runs plumbing only (cat-file
//     without --textconv or --filters, ls-tree), which applies no filter,
//     no diff or merge driver, runs no hook, no alias, no tool, and opens
//     no pager (--no-pager, and its output is a pipe).
//   - The daemon's own snapshot store reads the workdir's .gitattributes,
//     but the store's info/attributes outranks them and unsets filters
//     and conversions, and no configuration git reads there defines a
//     driver (the store's config is the daemon's, the system and global
//     ones are not read); its diffs pass --no-textconv and --no-ext-diff.
//   - Every transport is refused (GIT_ALLOW_PROTOCOL, protocol.allow and
//     each protocol.<name>.allow set to never), so no remote's settings,
//     URL rewriting, credential helper (credential.helper= also empties
//     the list, URL-specific helpers included) or proxy is ever reached.
//     A lazy fetch of a promisor repository would need a transport too;
//     a git too old to honour GIT_NO_LAZY_FETCH is not run on such a
//     repository at all (Refuses).
//
// What a repository's config can still do: include other files (include,
// includeIf), which are read as repository config and so are overridden
// by the same -c settings; they can make git read a file the runner may
// read, never run one. uploadpack.packObjectsHook and safe.directory are
// honoured only from protected configuration (system, global, command
// line), none of which a repository can write and none of which is read
// but ours. An explicit --git-dir skips git's check that the repository
// belongs to the user running git (safe.directory); where the daemon names
// the git directory, it relies on the above instead (and, once runs take
// the workdir owner's credential, on git running with no more rights than
// that owner). Where it lets git find the repository from the workdir
// (work-lost checks), git's check stays: a repository of another user is
// refused with "dubious ownership", which the daemon reports as degraded.
package gittool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/continuityd/continuityd/internal/lazyregexp"
	"github.com/continuityd/continuityd/internal/safefile"
)

// NoProgram is the value of every program-naming key that has no "off"
// value of its own: not a regular file, so execve refuses it.
const NoProgram = "/dev/null"

// Protocols are the transports and remote helpers git knows by name; each
// gets protocol.<name>.allow=never (GIT_ALLOW_PROTOCOL refuses them all
// anyway, and any other helper name too).
var Protocols = []string{"file", "git", "ssh", "http", "https", "ftp", "ftps", "ext", "fd", "testgit"}

// Config is what every run sets with -c, in order: each key that can make
// git start a program or reach the network, to the value that makes it do
// neither.
func Config() []string {
	kv := []string{
		"core.hooksPath=" + NoProgram, // no hook directory: no hook runs
		"core.fsmonitor=false",
		"core.sshCommand=" + NoProgram,
		"core.askPass=", // empty: no askpass program (GIT_ASKPASS= wins anyway)
		"core.pager=cat",
		"core.editor=:",
		"sequence.editor=:",
		"core.alternateRefsCommand=" + NoProgram,
		"core.attributesFile=" + os.DevNull,
		"diff.external=" + NoProgram,
		"interactive.diffFilter=" + NoProgram,
		"credential.helper=", // empty resets the helper list, the repository's URL-specific ones too
		"credential.interactive=false",
		"gpg.program=" + NoProgram,
		"gpg.openpgp.program=" + NoProgram,
		"gpg.x509.program=" + NoProgram,
		"gpg.ssh.program=" + NoProgram,
		"gpg.ssh.defaultKeyCommand=" + NoProgram,
		"commit.gpgSign=false",
		"tag.gpgSign=false",
		"log.showSignature=false",
		"protocol.allow=never",
		"submodule.recurse=false",
		"fetch.recurseSubmodules=false",
		"gc.auto=0",
		"maintenance.auto=false",
	}
	for _, p := range Protocols {
		kv = append(kv, "protocol."+p+".allow=never")
	}
	return kv
}

// env is the environment of every run, before the caller's additions.
func env(gitPath string, reading bool) []string {
	e := []string{
		"PATH=" + searchPath(gitPath),
		"HOME=" + os.DevNull,
		"XDG_CONFIG_HOME=" + os.DevNull,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_SYSTEM=" + os.DevNull,
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_LAZY_FETCH=1",
		"GIT_ALLOW_PROTOCOL=", // set and empty: an allow list that names no transport
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",       // set and empty: core.askPass and SSH_ASKPASS are not consulted
		"GIT_PROXY_COMMAND=", // set and empty: core.gitProxy is not consulted, no proxy
		"GIT_SSH_COMMAND=" + NoProgram,
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EDITOR=:",
		"GIT_SEQUENCE_EDITOR=:",
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C",
	}
	if reading {
		e = append(e, "GIT_OPTIONAL_LOCKS=0")
	}
	return e
}

// searchPath is PATH for git: its own directory (a git installed
// elsewhere keeps its helpers beside it) and the system's directories,
// nothing of the daemon's PATH.
func searchPath(gitPath string) string {
	dirs := []string{"/usr/local/bin", "/usr/bin", "/bin"}
	if gitPath != "" && filepath.IsAbs(gitPath) {
		d := filepath.Dir(gitPath)
		if !slices.Contains(dirs, d) {
			dirs = append([]string{d}, dirs...)
		}
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}

// Version is a git release.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast says whether v is major.minor.patch or later.
func (v Version) AtLeast(major, minor, patch int) bool {
	return slices.Compare([]int{v.Major, v.Minor, v.Patch}, []int{major, minor, patch}) >= 0
}

var versionRE = lazyregexp.New(`^git version (\d+)\.(\d+)(?:\.(\d+))?`)

// ParseVersion reads `git --version`'s answer ("git version 2.39.5",
// "git version 2.45.2.windows.1").
func ParseVersion(s string) (Version, bool) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Version{}, false
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	v.Patch, _ = strconv.Atoi(m[3]) // "" when absent: 0
	return v, true
}

// noLazyFetchSince lists, per release line, the first version whose
// promisor code honours GIT_NO_LAZY_FETCH: it came with the security
// releases of May 2024 (2.39.4, 2.40.2, 2.41.1, 2.42.2, 2.43.4, 2.44.1)
// and is in every release from 2.45.0 on. Earlier lines had no fix.
var noLazyFetchSince = map[[2]int]int{
	{2, 39}: 4, {2, 40}: 2, {2, 41}: 1, {2, 42}: 2, {2, 43}: 4, {2, 44}: 1,
}

// HonoursNoLazyFetch says whether git v can be kept from fetching missing
// objects of a partial clone (GIT_NO_LAZY_FETCH). A distribution's git
// that backported the fix without changing its version counts as too old:
// its promisor repositories are refused, never run.
func (v Version) HonoursNoLazyFetch() bool {
	if v.AtLeast(2, 45, 0) {
		return true
	}
	patch, ok := noLazyFetchSince[[2]int{v.Major, v.Minor}]
	return ok && v.Patch >= patch
}

// ErrUnavailable is wrapped by Find's error when git is missing or does
// not answer as git.
var ErrUnavailable = errors.New("git unavailable")

// Credential is a user to run git as: its uid and gid, with no
// supplementary groups.
type Credential struct{ UID, GID uint32 }

// Tool is a git binary that was found and asked its version. A Tool is
// never changed once made; As makes another.
type Tool struct {
	Path    string  // absolute
	Version Version // as it said
	as      *Credential
	op      safefile.Opener
}

// Find looks name up on the daemon's PATH ("" is "git") and asks it its
// version (with the isolated environment). The error wraps ErrUnavailable
// and says how to get git.
func Find(ctx context.Context, name string) (*Tool, error) {
	if name == "" {
		name = "git"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %q not found (%v): install git (e.g. apt-get install git)", ErrUnavailable, name, err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	fi, statErr := os.Stat(path)
	if statErr == nil {
		if v, ok := versions.get(path, fi); ok {
			return &Tool{Path: path, Version: v}, nil
		}
	}
	t := &Tool{Path: path}
	cmd := t.Command(ctx, Run{Args: []string{"--version"}, Dir: os.TempDir(), noDefaults: true})
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s --version failed: %v", ErrUnavailable, path, err)
	}
	v, ok := ParseVersion(string(out))
	if !ok {
		return nil, fmt.Errorf("%w: %s --version said %q, not a git version", ErrUnavailable, path, strings.TrimSpace(string(out)))
	}
	t.Version = v
	if statErr == nil {
		versions.put(path, fi, v)
	}
	return t, nil
}

// versions are the versions git binaries said, by path and what that file
// was then: every agent finds git as it opens, and fifty places opened
// at start were fifty runs of git --version. A binary replaced since
// (an upgrade: another inode, size or time) is asked again.
var versions versionCache

type versionCache struct {
	mu sync.Mutex
	m  map[string]foundVersion
}

type foundVersion struct {
	file    fs.FileInfo
	version Version
}

func (c *versionCache) get(path string, fi fs.FileInfo) (Version, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[path]
	if !ok || !os.SameFile(f.file, fi) || f.file.Size() != fi.Size() || !f.file.ModTime().Equal(fi.ModTime()) {
		return Version{}, false
	}
	return f.version, true
}

func (c *versionCache) put(path string, fi fs.FileInfo, v Version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]foundVersion{}
	}
	c.m[path] = foundVersion{file: fi, version: v}
}

// As returns the tool running git as c (nil: as the daemon's own user).
func (t *Tool) As(c *Credential) *Tool {
	u := *t
	if c != nil {
		cc := *c
		u.as = &cc
	} else {
		u.as = nil
	}
	return &u
}

// ReadsWith returns the tool reading a repository's files itself (its
// configuration, for Refuses) through op (nil: this process opens them):
// the same rights As gives git, so what git could not read as that user
// is not read for it either.
func (t *Tool) ReadsWith(op safefile.Opener) *Tool {
	u := *t
	u.op = op
	return &u
}

// Opener is what the tool reads a repository's files through.
func (t *Tool) Opener() safefile.Opener {
	if t.op == nil {
		return safefile.Here
	}
	return t.op
}

// Credential is who the tool runs git as; nil is the daemon's own user.
func (t *Tool) Credential() *Credential {
	if t.as == nil {
		return nil
	}
	c := *t.as
	return &c
}

// Run is one git run.
type Run struct {
	// Args are the subcommand and its arguments. They may start with -c
	// settings of the caller's for this run only: never one of Config's
	// keys.
	Args []string
	// Dir is the working directory.
	Dir string
	// GitDir and WorkTree, when set, are given as --git-dir and
	// --work-tree.
	GitDir, WorkTree string
	// Config are the caller's settings (key=value), given with -c before
	// Config's, which therefore win over them.
	Config []string
	// Env is added to the environment (GIT_INDEX_FILE, …); it must not
	// name a variable the environment sets.
	Env []string
	// Reading marks a run that only reads a repository someone else
	// writes: GIT_OPTIONAL_LOCKS=0, so it never takes a lock there (git
	// status would otherwise refresh the index).
	Reading bool

	noDefaults bool // --version: no settings, only the environment
}

// Command makes the command for r, not started: the isolated environment,
// --no-pager, the repository, the caller's settings then Config's, and the
// arguments; the tool's credential and, on Linux, SIGKILL at the daemon's
// death.
func (t *Tool) Command(ctx context.Context, r Run) *exec.Cmd {
	var args []string
	if !r.noDefaults {
		args = append(args, "--no-pager")
		if r.GitDir != "" {
			args = append(args, "--git-dir="+r.GitDir)
		}
		if r.WorkTree != "" {
			args = append(args, "--work-tree="+r.WorkTree)
		}
		for _, kv := range append(slices.Clone(r.Config), Config()...) {
			args = append(args, "-c", kv)
		}
	}
	args = append(args, r.Args...)
	cmd := exec.CommandContext(ctx, t.Path, args...)
	base := env(t.Path, r.Reading)
	cmd.Env = append(base, r.Env...)
	cmd.Dir = r.Dir
	attr, err := sysProcAttr(t.as)
	if err != nil {
		cmd.Err = err
	}
	cmd.SysProcAttr = attr
	for _, kv := range r.Env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.ContainsFunc(base, func(b string) bool { return strings.HasPrefix(b, name+"=") }) {
			// A caller undoing the isolation is a bug: the run fails.
			cmd.Err = fmt.Errorf("gittool: a run may not set %s, which the isolated environment sets", name)
		}
	}
	return cmd
}
