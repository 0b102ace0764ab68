package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/continuityd/continuityd/internal/daemonside/gitpipe"
	"github.com/continuityd/continuityd/internal/gittool"
)

// minGit is the oldest git the store is known to work with: every command
// and option it uses exists there (Ubuntu 20.04 ships 2.25).
var minGit = [2]int{2, 25}

// EmptyTree is the hash of the empty tree, which git knows without having
// it stored: the "parent" of a first snapshot.
const EmptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// Git runs the git CLI on the store, isolated by its environment and
// command line from everything but the store and the work tree
// (internal/gittool builds every run; these add the store's own).
type Git struct {
	tool  *gittool.Tool
	dir   string // the bare store: --git-dir
	work  string // the agent's workdir: --work-tree
	index string // the store's private index
	env   []string
	cfg   []string // the store's -c settings, before gittool's
	// failed is set when a run fails (it may have left a lock file):
	// the next Take clears the store's locks (ClearStaleLocks).
	failed atomic.Bool
}

// isolatedConfig are the store's own settings on every run, beside
// gittool's (which switch off every feature that could run a program or
// reach the network: hooks, fsmonitor, signing, transports, background
// gc): they keep git from writing outside the store or converting
// content, and fix what would otherwise follow a configuration.
func isolatedConfig(excludesFile string) []string {
	return []string{
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
		"core.excludesFile=" + excludesFile,
		"index.sparse=false",
		"feature.manyFiles=false",
		"gc.writeCommitGraph=false",
		"advice.addEmbeddedRepo=false",
		"advice.addIgnoredFile=false",
		"advice.detachedHead=false",
		"color.ui=false",
		"diff.noprefix=false",
		"diff.mnemonicPrefix=false",
		"diff.renames=false",
		"pack.threads=1",
	}
}

// isolatedEnv is the store's part of git's environment (gittool builds
// the rest from scratch: nothing of the daemon's reaches git): the
// private index, literal pathspecs, and the identity and time zone of
// the commits git writes.
func isolatedEnv(index string) []string {
	return []string{
		"GIT_INDEX_FILE=" + index,
		"GIT_LITERAL_PATHSPECS=1",
		"GIT_AUTHOR_NAME=continuityd",
		"GIT_AUTHOR_EMAIL=continuityd@localhost",
		"GIT_COMMITTER_NAME=continuityd",
		"GIT_COMMITTER_EMAIL=continuityd@localhost",
		"LANG=C",
		"TZ=UTC",
	}
}

// NewGit runs tool on the store dir and the work tree work.
func NewGit(tool *gittool.Tool, dir, work string) *Git {
	index := filepath.Join(dir, "index")
	return &Git{tool: tool, dir: dir, work: work, index: index, env: isolatedEnv(index),
		cfg: isolatedConfig(filepath.Join(dir, OversizedFile))}
}

// Tool is the git the store runs.
func (g *Git) Tool() *gittool.Tool { return g.tool }

// Index is the store's private index.
func (g *Git) Index() string { return g.index }

// Failed reports whether a run failed since Failed last reported one (it
// may have left a lock file behind).
func (g *Git) Failed() bool { return g.failed.Swap(false) }

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

// Call describes one git run.
type Call struct {
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer // nil: collected and returned
	Env    []string  // added to the isolated environment
	InWork bool      // run in the work tree (else in the store)
	// Warnings, when set, receives what git wrote to stderr on success.
	Warnings *string
	NoRepo   bool // no --git-dir and --work-tree (git init)
}

// Command is the command of run c, for a caller that talks to git over
// pipes.
func (g *Git) Command(ctx context.Context, c Call) *exec.Cmd {
	r := gittool.Run{Args: c.Args, Dir: g.dir, GitDir: g.dir, WorkTree: g.work, Config: g.cfg,
		Env: append(slices.Clone(g.env), c.Env...)}
	if c.NoRepo {
		r.GitDir, r.WorkTree, r.Dir = "", "", filepath.Dir(g.dir)
	}
	if c.InWork {
		r.Dir = g.work
	}
	cmd := g.tool.Command(ctx, r)
	cmd.Stdin = c.Stdin
	return cmd
}

// Run runs git and returns its stdout (unless c.Stdout takes it). A
// non-zero exit is a *GitError carrying stderr. A run that could not
// create an object's temporary file because the collector's repack or
// prune removed its (empty) object directory at that moment is run once
// more: git makes the directory again and retries only once itself.
func (g *Git) Run(ctx context.Context, c Call) (out []byte, err error) {
	defer func() {
		if err != nil {
			g.failed.Store(true)
		}
	}()
	out, err = g.runOnce(ctx, c)
	var ge *GitError
	if errors.As(err, &ge) && strings.Contains(ge.Stderr, "unable to create temporary file") && ctx.Err() == nil && c.Stdout == nil {
		if c.Stdin == nil {
			return g.runOnce(ctx, c)
		}
		if sk, ok := c.Stdin.(io.Seeker); ok {
			if _, serr := sk.Seek(0, io.SeekStart); serr == nil {
				return g.runOnce(ctx, c)
			}
		}
	}
	return out, err
}

// runOnce is one run of Run.
func (g *Git) runOnce(ctx context.Context, c Call) ([]byte, error) {
	cmd := g.Command(ctx, c)
	var out bytes.Buffer
	errb := gitpipe.Tail{Max: 8 << 10}
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	} else {
		cmd.Stdout = &out
	}
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return out.Bytes(), &GitError{Args: Summarize(c.Args), Err: err, Stderr: strings.TrimSpace(errb.String())}
	}
	if c.Warnings != nil {
		*c.Warnings = errb.String()
	}
	return out.Bytes(), nil
}

// Text runs git and returns its stdout trimmed of the final newline.
func (g *Git) Text(ctx context.Context, args ...string) (string, error) {
	out, err := g.Run(ctx, Call{Args: args})
	return strings.TrimRight(string(out), "\n"), err
}

// Summarize shortens a command line for an error message.
func Summarize(args []string) string {
	s := strings.Join(args, " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// CheckGit finds git and checks its version. The error says what is
// missing and how to get it: the daemon shows it as the reason the agent's
// snapshots are degraded.
func CheckGit(ctx context.Context, bin string) (*gittool.Tool, error) {
	tool, err := gittool.Find(ctx, bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (git %d.%d or later)", ErrGitUnavailable, err, minGit[0], minGit[1])
	}
	if !tool.Version.AtLeast(minGit[0], minGit[1], 0) {
		return nil, fmt.Errorf("%w: %s is git %s; snapshots need git %d.%d or later",
			ErrGitUnavailable, tool.Path, tool.Version, minGit[0], minGit[1])
	}
	return tool, nil
}

// ErrGitUnavailable is wrapped by CheckGit's error when git is missing or too
// old: the daemon keeps running and marks the agent degraded ["snapshots"]
// with the error's text as the reason.
var ErrGitUnavailable = errors.New("work snapshots unavailable: git")
