package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/continuityd/continuityd/internal/gitpipe"
	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// minGit is the oldest git the store is known to work with: every command
// and option it uses exists there (Ubuntu 20.04 ships 2.25).
var minGit = [2]int{2, 25}

// emptyTree is the hash of the empty tree, which git knows without having
// it stored: the "parent" of a first snapshot.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// gitRunner runs the git CLI on the store, isolated by its environment
// and command line from everything but the store and the work tree.
type gitRunner struct {
	bin   string // absolute path of git
	dir   string // the bare store: --git-dir
	work  string // the agent's workdir: --work-tree
	index string // the store's private index
	env   []string
	pre   []string // --git-dir, --work-tree and -c settings, before the subcommand
	// failed is set when a run fails (it may have left a lock file):
	// the next Take clears the store's locks (clearStaleLocks).
	failed atomic.Bool
}

// isolatedConfig are the settings passed with -c on every run. The user's
// and the system's git configuration are not read at all (see env); these
// also override anything in the store's own config, and switch off every
// feature that could run a program (hooks, fsmonitor, signing), write
// outside the store, convert content, or start background work.
func isolatedConfig(excludesFile string) []string {
	kv := []string{
		"core.hooksPath=/dev/null",
		"core.fsmonitor=false",
		"core.untrackedCache=false",
		"core.splitIndex=false",
		"core.sparseCheckout=false",
		"core.autocrlf=false",
		"core.safecrlf=false",
		"core.eol=lf",
		"core.symlinks=true",
		"core.fileMode=true",
		"core.ignoreCase=false",
		"core.precomposeUnicode=false",
		"core.quotePath=false",
		"core.logAllRefUpdates=false",
		"core.attributesFile=/dev/null",
		"core.excludesFile=" + excludesFile,
		"index.sparse=false",
		"feature.manyFiles=false",
		"gc.auto=0",
		"gc.writeCommitGraph=false",
		"maintenance.auto=false",
		"commit.gpgsign=false",
		"submodule.recurse=false",
		"protocol.allow=never",
		"credential.helper=",
		"advice.addEmbeddedRepo=false",
		"advice.addIgnoredFile=false",
		"advice.detachedHead=false",
		"color.ui=false",
		"diff.noprefix=false",
		"diff.mnemonicPrefix=false",
		"diff.renames=false",
		"diff.external=",
		"pack.threads=1",
	}
	args := make([]string, 0, 2*len(kv))
	for _, s := range kv {
		args = append(args, "-c", s)
	}
	return args
}

// isolatedEnv builds git's environment from scratch: nothing of the
// daemon's environment reaches git (no GIT_DIR, GIT_WORK_TREE,
// GIT_INDEX_FILE, GIT_CONFIG_*, GIT_TRACE*, askpass or ssh settings), only
// a PATH to find git's helpers. HOME and XDG_CONFIG_HOME point into the
// store, where no configuration lives.
func isolatedEnv(dir, index string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{
		"PATH=" + path,
		"HOME=" + dir,
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "no-config"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_SYSTEM=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_INDEX_FILE=" + index,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_LITERAL_PATHSPECS=1",
		"GIT_AUTHOR_NAME=continuityd",
		"GIT_AUTHOR_EMAIL=continuityd@localhost",
		"GIT_COMMITTER_NAME=continuityd",
		"GIT_COMMITTER_EMAIL=continuityd@localhost",
		"LC_ALL=C",
		"LANG=C",
		"TZ=UTC",
	}
}

func newGitRunner(bin, dir, work string) *gitRunner {
	index := filepath.Join(dir, "index")
	g := &gitRunner{bin: bin, dir: dir, work: work, index: index, env: isolatedEnv(dir, index)}
	g.pre = append([]string{"--git-dir=" + dir, "--work-tree=" + work}, isolatedConfig(filepath.Join(dir, oversizedFile))...)
	return g
}

// GitError is a git run that failed: the subcommand, how it ended and
// what git said (its last lines).
type GitError struct {
	Args   string // the subcommand and its arguments, e.g. "add -A"
	Err    error  // how the process ended
	Stderr string // what git wrote to stderr, trimmed
}

func (e *GitError) Error() string {
	if e.Stderr != "" {
		return fmt.Sprintf("git %s: %v: %s", e.Args, e.Err, e.Stderr)
	}
	return fmt.Sprintf("git %s: %v", e.Args, e.Err)
}

func (e *GitError) Unwrap() error { return e.Err }

// call describes one git run.
type call struct {
	args   []string
	stdin  io.Reader
	stdout io.Writer // nil: collected and returned
	env    []string  // added to the isolated environment
	inWork bool      // run in the work tree (else in the store)
	// warnings, when set, receives what git wrote to stderr on success.
	warnings *string
	noRepo   bool // no --git-dir and --work-tree (git init)
}

func (g *gitRunner) command(ctx context.Context, c call) *exec.Cmd {
	pre := g.pre
	if c.noRepo {
		pre = pre[2:] // the -c settings only
	}
	cmd := exec.CommandContext(ctx, g.bin, append(append([]string(nil), pre...), c.args...)...)
	cmd.Env = append(append([]string(nil), g.env...), c.env...)
	cmd.Dir = g.dir
	if c.noRepo {
		cmd.Dir = filepath.Dir(g.dir)
	}
	if c.inWork {
		cmd.Dir = g.work
	}
	cmd.Stdin = c.stdin
	cmd.SysProcAttr = sysProcAttr()
	return cmd
}

// run runs git and returns its stdout (unless c.stdout takes it). A
// non-zero exit is a *GitError carrying stderr. A run that could not
// create an object's temporary file because the collector's repack or
// prune removed its (empty) object directory at that moment is run once
// more: git makes the directory again and retries only once itself.
func (g *gitRunner) run(ctx context.Context, c call) (out []byte, err error) {
	defer func() {
		if err != nil {
			g.failed.Store(true)
		}
	}()
	out, err = g.runOnce(ctx, c)
	var ge *GitError
	if errors.As(err, &ge) && strings.Contains(ge.Stderr, "unable to create temporary file") && ctx.Err() == nil && c.stdout == nil {
		if c.stdin == nil {
			return g.runOnce(ctx, c)
		}
		if sk, ok := c.stdin.(io.Seeker); ok {
			if _, serr := sk.Seek(0, io.SeekStart); serr == nil {
				return g.runOnce(ctx, c)
			}
		}
	}
	return out, err
}

// runOnce is one run of run.
func (g *gitRunner) runOnce(ctx context.Context, c call) ([]byte, error) {
	cmd := g.command(ctx, c)
	var out bytes.Buffer
	errb := gitpipe.Tail{Max: 8 << 10}
	if c.stdout != nil {
		cmd.Stdout = c.stdout
	} else {
		cmd.Stdout = &out
	}
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return out.Bytes(), &GitError{Args: summarize(c.args), Err: err, Stderr: strings.TrimSpace(errb.String())}
	}
	if c.warnings != nil {
		*c.warnings = errb.String()
	}
	return out.Bytes(), nil
}

// text runs git and returns its stdout trimmed of the final newline.
func (g *gitRunner) text(ctx context.Context, args ...string) (string, error) {
	out, err := g.run(ctx, call{args: args})
	return strings.TrimRight(string(out), "\n"), err
}

// summarize shortens a command line for an error message.
func summarize(args []string) string {
	s := strings.Join(args, " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

var gitVersionRE = lazyregexp.New(`^git version (\d+)\.(\d+)`)

// checkGit finds git and checks its version. The error says what is
// missing and how to get it: the daemon shows it as the reason the agent's
// snapshots are degraded.
func checkGit(ctx context.Context, bin string) (string, error) {
	if bin == "" {
		bin = "git"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%w: %q not found (%v): install git %d.%d or later (e.g. apt-get install git)",
			ErrGitUnavailable, bin, err, minGit[0], minGit[1])
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", fmt.Errorf("%w: %v", ErrGitUnavailable, err)
	}
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = isolatedEnv(os.TempDir(), os.DevNull)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s --version failed: %v", ErrGitUnavailable, path, err)
	}
	version := strings.TrimSpace(string(out))
	m := gitVersionRE.FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("%w: %s --version said %q, not a git version", ErrGitUnavailable, path, version)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major < minGit[0] || major == minGit[0] && minor < minGit[1] {
		return "", fmt.Errorf("%w: %s is %s; snapshots need git %d.%d or later",
			ErrGitUnavailable, path, version, minGit[0], minGit[1])
	}
	return path, nil
}

// ErrGitUnavailable is wrapped by Open's error when git is missing or too
// old: the daemon keeps running and marks the agent degraded ["snapshots"]
// with the error's text as the reason.
var ErrGitUnavailable = errors.New("work snapshots unavailable: git")
