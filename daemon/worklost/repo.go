package worklost

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/continuityd/continuityd/internal/daemonside/gitpipe"
	"github.com/continuityd/continuityd/internal/gittool"
)

// Repo reads the agent's repository: the commit its HEAD names, and the
// object of a path at a commit. Every snapshot's check asks both, and a
// git process started per question cost about 6 ms of CPU each, more than
// the rest of the check; so they are asked of one long-lived `git cat-file
// --batch`, started at the first question, stopped after repoIdle without
// one, replaced after repoMaxAge (it keeps open the packs it read, which a
// `git gc` of the agent's repository may since have deleted), and at
// Close. A path is looked up in its directory's tree, which gives what
// `git ls-tree` would (a submodule's commit too); `git ls-tree` itself is
// asked for a path cat-file cannot be asked about (a newline in it) or a
// directory over maxTreeBytes. Every run is built by internal/gittool (a
// read that takes no lock, with nothing of the repository's config able
// to start a program or fetch), and git finds the repository from the
// workdir itself, so its check that the repository belongs to the user
// running git stays in force. A Repo is safe for concurrent use; each
// question holds it.
type Repo struct {
	git *gittool.Tool // nil: git is not available
	dir string

	mu     sync.Mutex
	p      *gitpipe.Pipe // nil when none runs
	idle   *time.Timer   // stops p after repoIdle; nil when none runs
	closed bool

	// dirs holds directories read at a commit, which never changes: the
	// check after each snapshot asks about the same directories at the
	// same HEAD, burst after burst, until a commit.
	dirsMu  sync.Mutex
	dirs    map[string]map[string]string // commit + ":" + directory → name → object (files, links, submodules)
	dirsLen int                          // entries in dirs, at most maxCachedEntries
}

const (
	repoIdle   = 30 * time.Second
	repoMaxAge = 5 * time.Minute
	// maxTreeBytes bounds a directory's tree read through cat-file (about
	// 400,000 entries); a larger one is listed by ls-tree.
	maxTreeBytes = 16 << 20
	// maxCommitBytes bounds the HEAD commit read (and thrown away) to
	// learn its id; git's own limit on a commit is far above any real one.
	maxCommitBytes = 64 << 20
	// maxCachedEntries bounds the directory entries a Repo keeps.
	maxCachedEntries = 64 << 10
)

// cachedDir returns directory dir at commit as read before, if it was.
func (r *Repo) cachedDir(commit, dir string) (map[string]string, bool) {
	r.dirsMu.Lock()
	defer r.dirsMu.Unlock()
	entries, ok := r.dirs[commit+":"+dir]
	return entries, ok
}

// cacheDir keeps directory dir at commit (the whole cache starts over
// when it would pass maxCachedEntries).
func (r *Repo) cacheDir(commit, dir string, entries map[string]string) {
	r.dirsMu.Lock()
	defer r.dirsMu.Unlock()
	if r.dirs == nil || r.dirsLen+len(entries) > maxCachedEntries {
		r.dirs, r.dirsLen = map[string]map[string]string{}, 0
	}
	if len(entries) <= maxCachedEntries {
		r.dirs[commit+":"+dir] = entries
		r.dirsLen += len(entries)
	}
}

// pick sets out[path] to the object of each name of want (name → path)
// that entries (name → object, one directory's) holds.
func pick(out, want, entries map[string]string) {
	for name, p := range want {
		if id, ok := entries[name]; ok {
			out[p] = id
		}
	}
}

// NewRepo reads the repository workdir is in with git (nil: git is not
// available, and every question fails saying so). Nothing starts until
// the first question.
func NewRepo(git *gittool.Tool, workdir string) *Repo { return &Repo{git: git, dir: workdir} }

// Close stops the git process, if one runs; later questions fail.
func (r *Repo) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.stopLocked()
}

func (r *Repo) stopLocked() {
	if r.p != nil {
		r.p.Stop()
		r.p = nil
	}
	if r.idle != nil {
		r.idle.Stop()
		r.idle = nil
	}
}

func (r *Repo) stopIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

// errNoRepo is a workdir in no repository.
var errNoRepo = errors.New("not in a git repository")

// Head returns the commit HEAD names, "" when the repository has no commit
// yet or the workdir is in no repository (then every file a snapshot
// holds is uncommitted work).
func (r *Repo) Head(ctx context.Context) (string, error) {
	var head string
	err := r.ask(ctx, []string{"HEAD^{commit}"}, maxCommitBytes, func(_ int, o gitpipe.Object, err error) error {
		if errors.Is(err, gitpipe.ErrMissing) {
			return nil // no commit yet
		}
		head = o.ID
		return err
	})
	if errors.Is(err, errNoRepo) {
		return "", nil
	}
	return head, err
}

// objects returns the object of each path at commit ("" for a path the
// commit lacks, or holds a directory at; every path lacks one when commit
// is ""), as `git ls-tree -r commit -- paths` in the workdir lists them.
func (r *Repo) objects(ctx context.Context, commit string, paths []string) (map[string]string, error) {
	out := map[string]string{}
	if commit == "" {
		return out, nil
	}
	if strings.ContainsRune(commit, '\n') || slices.ContainsFunc(paths, func(p string) bool { return strings.ContainsRune(p, '\n') }) {
		return r.listed(ctx, commit, paths) // cat-file reads one name a line
	}
	byDir := map[string]map[string]string{} // directory → name in it → path
	var dirs []string
	for _, p := range paths {
		dir, name := path.Split(p)
		if byDir[dir] == nil {
			byDir[dir] = map[string]string{}
			dirs = append(dirs, dir)
		}
		byDir[dir][name] = p
	}
	var asked []string // the directories not read at commit before
	for _, d := range dirs {
		if entries, ok := r.cachedDir(commit, d); ok {
			pick(out, byDir[d], entries)
		} else {
			asked = append(asked, d)
		}
	}
	names := make([]string, len(asked))
	for i, d := range asked {
		names[i] = commit + ":./" + d // "./": from the workdir, which may be below the repository's top
	}
	if len(names) == 0 {
		return out, nil
	}
	tooLarge := false
	err := r.ask(ctx, names, maxTreeBytes, func(i int, o gitpipe.Object, err error) error {
		switch {
		case errors.Is(err, gitpipe.ErrTooLarge):
			tooLarge = true
			return nil
		case errors.Is(err, gitpipe.ErrMissing):
			r.cacheDir(commit, asked[i], nil)
			return nil // no such directory at commit: none of its paths
		case err != nil:
			return err
		case o.Type != "tree":
			r.cacheDir(commit, asked[i], nil)
			return nil // a file or a submodule where the directory would be
		}
		entries := map[string]string{}
		err = gitpipe.EachTreeEntry(o.Data, len(commit)/2, func(mode uint32, name, id []byte) {
			if mode != 0o40000 { // ls-tree -r lists a directory's files, not it
				entries[string(name)] = hex.EncodeToString(id)
			}
		})
		if err != nil {
			return err
		}
		r.cacheDir(commit, asked[i], entries)
		pick(out, byDir[asked[i]], entries)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if tooLarge {
		return r.listed(ctx, commit, paths)
	}
	return out, nil
}

// ask writes each of names to the long-lived cat-file and hands its
// answer to fn, in order: the object, or ErrMissing or ErrTooLarge (over
// limit). A process that fails is stopped; a question put to one that had
// answered before (it may have been killed meanwhile: a context that
// ended, a gc) is put once more to a new one.
func (r *Repo) ask(ctx context.Context, names []string, limit int, fn func(i int, o gitpipe.Object, err error) error) error {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("worklost: the reader of the agent's repository is closed")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.p != nil && time.Since(r.p.Started) > repoMaxAge {
		r.stopLocked()
	}
	for i := 0; i < len(names); {
		fresh := r.p == nil
		if fresh {
			if err := r.mayRun(); err != nil {
				return err
			}
			// The process outlives this question: the idle timer and
			// Close stop it, not ctx.
			p, err := gitpipe.Start(r.command(context.Background(), "cat-file", "--batch"))
			if err != nil {
				return fmt.Errorf("worklost: git cat-file in the workdir: %w", err)
			}
			r.p = p
		}
		if r.idle == nil {
			r.idle = time.AfterFunc(repoIdle, r.stopIdle)
		} else {
			r.idle.Reset(repoIdle)
		}
		p := r.p
		stop := context.AfterFunc(ctx, p.Kill)
		var o gitpipe.Object
		_, err := io.WriteString(p.In, names[i]+"\n")
		if err == nil {
			o, err = gitpipe.ReadObject(p.Out, limit)
		}
		stop()
		if err == nil || errors.Is(err, gitpipe.ErrMissing) || errors.Is(err, gitpipe.ErrTooLarge) {
			if ferr := fn(i, o, err); ferr != nil {
				return ferr
			}
			i++
			continue
		}
		r.p = nil
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		err = p.Failed("worklost: git cat-file in the workdir", err)
		switch {
		case ctx.Err() != nil:
			return err
		case strings.Contains(p.Stderr(), "not a git repository"):
			return errNoRepo
		case fresh:
			return refusal(p.Stderr(), err)
		}
		// an old process that failed: ask a new one
	}
	return nil
}

// listed is objects from `git ls-tree`, a process of its own.
func (r *Repo) listed(ctx context.Context, commit string, paths []string) (map[string]string, error) {
	args := []string{"ls-tree", "-r", "-z", commit}
	if len(paths) <= maxPathspecs {
		args = append(append(args, "--"), paths...)
	}
	b, err := r.run(ctx, args...)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	out := map[string]string{}
	for entry := range bytes.SplitSeq(b, []byte{0}) {
		// "<mode> SP <type> SP <hash> TAB <path>"
		meta, path, ok := bytes.Cut(entry, []byte{'\t'})
		if !ok || !want[string(path)] {
			continue
		}
		if f := strings.Fields(string(meta)); len(f) == 3 {
			out[string(path)] = f[2]
		}
	}
	return out, nil
}

// maxPathspecs is how many paths are named to ls-tree; with more, the
// whole tree is listed and filtered.
const maxPathspecs = 256

// gitTimeout bounds each read of the agent's repository.
const gitTimeout = 30 * time.Second

// command is a read of the agent's repository, from the workdir.
func (r *Repo) command(ctx context.Context, args ...string) *exec.Cmd {
	return r.git.Command(ctx, gittool.Run{Args: args, Dir: r.dir, Reading: true, Env: []string{"GIT_LITERAL_PATHSPECS=1"}})
}

// ErrUnavailable is a question put with no git to ask.
var ErrUnavailable = errors.New("worklost: git is not available: install git to have uncommitted work that vanishes found")

// mayRun says why git must not be started on the agent's repository, nil
// when it may: no git, or a partial clone that this git cannot be kept
// from fetching into (gittool.Tool.Refuses). The repository is the one
// git finds from the workdir, found without running git.
func (r *Repo) mayRun() error {
	if r.git == nil {
		return ErrUnavailable
	}
	if r.git.Version.HonoursNoLazyFetch() {
		return nil
	}
	gitDir, common, ok := gittool.Discover(r.git.Opener(), r.dir)
	if !ok {
		return nil // no repository: git says so itself
	}
	if err := r.git.Refuses(gitDir, common); err != nil {
		return fmt.Errorf("worklost: %w", err)
	}
	return nil
}

// ErrDubiousOwnership is git refusing to read a repository that belongs
// to another user than the one running it: the daemon runs as another
// user than the workdir's owner.
var ErrDubiousOwnership = errors.New("git refuses to read the workdir's repository as the daemon's user, which does not own it (\"dubious ownership\")")

// refusal is err, or ErrDubiousOwnership with what git said when that is
// why git failed.
func refusal(stderr string, err error) error {
	if strings.Contains(stderr, "dubious ownership") {
		line, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(stderr), "fatal:")), "\n")
		return fmt.Errorf("worklost: %w: %s", ErrDubiousOwnership, strings.TrimSpace(line))
	}
	return err
}

// run runs git once in the workdir and returns its stdout.
func (r *Repo) run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	if err := r.mayRun(); err != nil {
		return nil, err
	}
	cmd := r.command(ctx, args...)
	stderr := gitpipe.Tail{Max: 512}
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, refusal(stderr.String(), fmt.Errorf("worklost: git %s in the workdir: %w: %s", args[0], err, strings.TrimSpace(stderr.String())))
	}
	return out, nil
}
