// Package gitwatch turns the movements of a git repository into receipts:
// a commit becomes "<repo>@<short-sha> <subject>", a branch switch
// "<repo>: switched to <branch>", other local branches moving are noted.
//
// It reads the repository's files itself — HEAD, loose refs, packed-refs
// and loose (zlib-compressed) commit objects — and runs no git process for
// the common case, so a Check is cheap enough to run on every change the
// work-directory watcher reports (watch.Options.OnGitEvent): nothing polls.
// A commit object that is packed (after git gc, a fetch, a clone) is read
// with `git cat-file commit <sha>` when git is installed, with a 2-second
// timeout, built by internal/gittool: it takes no lock in the agent's
// repository, and nothing of that repository's config can make it start a
// program or fetch the commit from a promisor remote. Without git, or on
// a partial clone that this git is too old to be kept from fetching into
// (Refused says so; git is then not run on it at all), the change is still
// reported, with no subject. Nothing else needs git: HEAD, every ref and
// packed-refs are read as files.
//
// Linked worktrees and submodules (a ".git" file naming the git directory)
// are supported. The reftable ref format (git 2.45+, opt-in) is not: Open
// fails with ErrReftable.
//
// Subjects are returned raw, as committed. They can hold anything an agent
// typed, secrets included: the daemon must pass Change.Subject through its
// secret guard (redaction) before calling Receipt or storing a Change.
package gitwatch

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/safefile"
)

// Change kinds.
const (
	KindCommit       = "commit"        // HEAD moved to a new commit on top of the previous one (or amended it)
	KindBranchSwitch = "branch_switch" // HEAD now names another branch (or detached)
	KindRefMoved     = "ref_moved"     // HEAD moved otherwise (reset, rebase, pull), or another local branch moved, appeared or went
)

// ErrReftable is returned by Open for repositories using the reftable ref
// storage, which this package does not read.
var ErrReftable = errors.New("gitwatch: reftable ref storage is not supported")

// gitTimeout bounds the git fallback for packed objects.
const gitTimeout = 2 * time.Second

// maxWalk is how many first-parent steps Check walks back to find the
// previous HEAD: that many commits made between two Checks are reported
// one by one.
const maxWalk = 10

// Change is one movement seen by Check.
type Change struct {
	Kind       string // KindCommit, KindBranchSwitch, KindRefMoved
	Repo       string // base name of the worktree root
	Branch     string // the branch concerned (short name); "" for a detached HEAD
	PrevBranch string // branch_switch: the branch before ("" if detached)
	SHA        string // the commit now ("" when a branch was deleted or is unborn)
	PrevSHA    string // the commit before ("" when new)
	Subject    string // SHA's subject, raw: redact before use
}

// Receipt formats the change: "<repo>@<short-sha> <subject>" for a commit,
// "<repo>: switched to <branch>" for a branch switch. It uses Subject as it
// is: redact Subject first.
func (c Change) Receipt() string {
	at := c.Repo + "@" + short(c.SHA)
	if c.Subject != "" {
		at += " " + c.Subject
	}
	switch c.Kind {
	case KindBranchSwitch:
		if c.Branch == "" {
			return fmt.Sprintf("%s: switched to detached HEAD at %s", c.Repo, short(c.SHA))
		}
		return fmt.Sprintf("%s: switched to %s", c.Repo, c.Branch)
	case KindRefMoved:
		what := c.Branch
		if what == "" {
			what = "HEAD"
		}
		switch {
		case c.SHA == "":
			return fmt.Sprintf("%s: branch %s deleted", c.Repo, what)
		case c.PrevSHA == "":
			return fmt.Sprintf("%s (branch %s created)", at, what)
		default:
			return fmt.Sprintf("%s (%s moved from %s)", at, what, short(c.PrevSHA))
		}
	default:
		return at
	}
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// Repo is one worktree of a repository. Its methods are safe for
// concurrent use.
type Repo struct {
	root      string // worktree root
	name      string
	gitDir    string // HEAD lives here
	commonDir string // refs/, packed-refs, objects/
	git       *gittool.Tool
	files     files

	mu    sync.Mutex
	seen  bool
	state state
	since int64 // CheckNew: commits older than this (unix seconds) are not new

	refused string // why git is not run on the repository ("": it is); under mu
}

type state struct {
	symref string            // what HEAD names ("refs/heads/main"); "" when detached
	head   string            // HEAD's commit; "" when unborn
	heads  map[string]string // local branches: short name → commit
}

func (s state) branch() string { return strings.TrimPrefix(s.symref, "refs/heads/") }

// Open finds the worktree that contains dir; git (nil: none) reads its
// packed commits.
func Open(dir string, git *gittool.Tool) (*Repo, error) { return OpenWith(dir, git, nil) }

// OpenWith is Open reading the repository's files through op (nil: this
// process opens them, safefile.Here), its configuration too (git's
// Refuses). A daemon running as root over another user's repository
// reads them as that user.
func OpenWith(dir string, git *gittool.Tool, op safefile.Opener) (*Repo, error) {
	fsys := files{op: op}
	if fsys.op == nil {
		fsys.op = safefile.Here
	}
	if git != nil {
		git = git.ReadsWith(fsys.op)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	for d := abs; ; d = filepath.Dir(d) {
		dotgit := filepath.Join(d, ".git")
		fi, err := fsys.stat(dotgit)
		if err == nil {
			r := &Repo{root: d, name: filepath.Base(d), gitDir: dotgit, commonDir: dotgit, git: git, files: fsys}
			if !fi.IsDir() {
				if r.gitDir, err = readGitFile(fsys, dotgit); err != nil {
					return nil, err
				}
				r.commonDir = r.gitDir
			}
			if b, err := fsys.read(filepath.Join(r.gitDir, "commondir")); err == nil {
				c := strings.TrimSpace(string(b))
				if !filepath.IsAbs(c) {
					c = filepath.Join(r.gitDir, c)
				}
				r.commonDir = filepath.Clean(c)
			}
			if _, err := fsys.stat(filepath.Join(r.gitDir, "HEAD")); err != nil {
				return nil, fmt.Errorf("gitwatch: %s is not a git directory: %w", r.gitDir, err)
			}
			if fi, err := fsys.stat(filepath.Join(r.commonDir, "reftable")); err == nil && fi.IsDir() {
				return nil, ErrReftable
			}
			r.refused = r.mayRunGit()
			return r, nil
		}
		if d == filepath.Dir(d) {
			return nil, fmt.Errorf("gitwatch: %s is not inside a git worktree", abs)
		}
	}
}

// readGitFile reads a ".git" file: "gitdir: <path>".
func readGitFile(fsys files, dotgit string) (string, error) {
	b, err := fsys.read(dotgit)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	p, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", fmt.Errorf("gitwatch: %s: no gitdir line", dotgit)
	}
	p = strings.TrimSpace(p)
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(dotgit), p)
	}
	return filepath.Clean(p), nil
}

// Refused says why git is not run on the repository ("" when it is, or
// there is no git): its packed commits are then reported without their
// subject. It is as of the last time git would have run.
func (r *Repo) Refused() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// mayRunGit is why git must not run on the repository, "" when it may.
func (r *Repo) mayRunGit() string {
	if r.git == nil {
		return ""
	}
	if err := r.git.Refuses(r.gitDir, r.commonDir); err != nil {
		return err.Error()
	}
	return ""
}

// Root is the worktree root; Name its base name.
func (r *Repo) Root() string { return r.root }
func (r *Repo) Name() string { return r.name }

// Branch is the branch HEAD named at the last Check ("" if detached or
// before the first Check).
func (r *Repo) Branch() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.branch()
}

// Check compares the repository with the state seen by the previous Check
// and returns what moved: commits on HEAD (oldest first), a branch switch,
// other local branches moving. The first call records the state and
// returns nothing.
func (r *Repo) Check() ([]Change, error) { return r.check(false, time.Time{}) }

// CheckNew is Check for a repository that appeared while its directory was
// watched (git init, git clone, a repository moved in): its first call
// compares with the repository as it was created instead of taking where it
// stands as the starting point, so commits made before that first call are
// reported. Which commits are new: those on HEAD's first-parent line after
// the cloned commit (HEAD's reflog begins "clone: from …" after a clone)
// and committed at or after since (the watching's start), at most maxWalk;
// an existing history is never taken for new work. Once the repository has
// been checked, CheckNew is Check.
func (r *Repo) CheckNew(since time.Time) ([]Change, error) { return r.check(true, since) }

// Head is where HEAD stood: what it named and its commit. A caller keeps
// it across runs to hand to CheckFrom.
type Head struct {
	Symref string `json:"symref"` // "refs/heads/main"; "" when detached
	SHA    string `json:"sha"`    // "" when unborn
}

// Head is where HEAD stood at the last Check (zero before the first).
func (r *Repo) Head() Head {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Head{Symref: r.state.symref, SHA: r.state.head}
}

// CheckFrom is the first Check of a repository whose HEAD was last seen at
// h (by an earlier run of the caller): HEAD's moves since then are
// reported (commits on top of h.SHA, a branch switch, a reset) instead of
// being taken as the starting point. Other branches start from where they
// stand. Once the repository has been checked, CheckFrom is Check.
func (r *Repo) CheckFrom(h Head) ([]Change, error) {
	r.mu.Lock()
	if !r.seen {
		st, err := r.read()
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.seen = true
		r.state = state{symref: h.Symref, head: h.SHA, heads: maps.Clone(st.heads)}
		if h.Symref != "" && h.SHA != "" {
			r.state.heads[r.state.branch()] = h.SHA
		}
	}
	r.mu.Unlock()
	return r.check(false, time.Time{})
}

func (r *Repo) check(fresh bool, since time.Time) ([]Change, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := r.read()
	if err != nil {
		return nil, err
	}
	if !r.seen {
		r.seen = true
		if !fresh {
			r.state = st
			return nil, nil
		}
		// As created: HEAD names its branch, unborn, no branches.
		r.state = state{symref: st.symref, heads: map[string]string{}}
		r.since = since.Unix()
	}
	prev := r.state
	r.state = st

	var out []Change
	switch {
	case prev.head == "" && st.head != "" && st.symref != prev.symref && r.clonedAt() == st.head:
		// A clone completing: git init named a default branch first, the
		// clone then set HEAD to the remote's. No switch, nothing new.
	case st.symref != prev.symref:
		c := r.change(KindBranchSwitch, st.branch(), st.head, prev.head)
		c.PrevBranch = prev.branch()
		c.Subject = r.subject(st.head)
		out = append(out, c)
	case st.head != prev.head:
		out = append(out, r.headMoved(st.branch(), prev.head, st.head)...)
	}
	var moved []Change
	for name, sha := range st.heads {
		if name == st.branch() {
			continue // reported above
		}
		if old := prev.heads[name]; old != sha {
			c := r.change(KindRefMoved, name, sha, old)
			c.Subject = r.subject(sha)
			moved = append(moved, c)
		}
	}
	for name, old := range prev.heads {
		if _, ok := st.heads[name]; !ok && name != st.branch() {
			moved = append(moved, r.change(KindRefMoved, name, "", old))
		}
	}
	slices.SortFunc(moved, func(a, b Change) int { return strings.Compare(a.Branch, b.Branch) })
	return append(out, moved...), nil
}

func (r *Repo) change(kind, branch, sha, prev string) Change {
	return Change{Kind: kind, Repo: r.name, Branch: branch, SHA: sha, PrevSHA: prev}
}

// headMoved classifies HEAD moving from prev to cur on the same branch.
func (r *Repo) headMoved(branch, prev, cur string) []Change {
	if cur == "" { // the branch was deleted under HEAD
		return []Change{r.change(KindRefMoved, branch, "", prev)}
	}
	if prev == "" {
		// An unborn HEAD gets commits: a first commit, or a clone, whose
		// history is not new work.
		if o := r.clonedAt(); o != "" {
			if o == cur {
				return nil
			}
			prev = o
		}
	}
	// New commits on top of prev: walk back the first parents.
	var chain []commit
	sha := cur
	for range maxWalk {
		c, ok := r.commit(sha)
		if !ok {
			break
		}
		if prev == "" && r.since != 0 && c.when < r.since {
			// Older than the watching (CheckNew): where the new work starts.
			return r.commits(branch, c.sha, chain)
		}
		chain = append(chain, c)
		if prev == "" && len(c.parents) == 0 { // the first commit of an unborn branch
			return r.commits(branch, prev, chain)
		}
		if slices.Contains(c.parents, prev) {
			return r.commits(branch, prev, chain)
		}
		if len(c.parents) == 0 {
			break
		}
		sha = c.parents[0]
	}
	// An amend: same parents as the commit it replaces.
	if c, ok := r.commit(cur); ok && prev != "" {
		if p, ok := r.commit(prev); ok && slices.Equal(c.parents, p.parents) {
			ch := r.change(KindCommit, branch, cur, prev)
			ch.Subject = c.subject
			return []Change{ch}
		}
	}
	c := r.change(KindRefMoved, branch, cur, prev)
	c.Subject = r.subject(cur)
	return []Change{c}
}

// commits turns a chain (newest first, its last element's parent is prev)
// into commit changes, oldest first.
func (r *Repo) commits(branch, prev string, chain []commit) []Change {
	out := make([]Change, 0, len(chain))
	for i := len(chain) - 1; i >= 0; i-- {
		c := r.change(KindCommit, branch, chain[i].sha, prev)
		c.Subject = chain[i].subject
		out = append(out, c)
		prev = chain[i].sha
	}
	return out
}

func (r *Repo) subject(sha string) string {
	if sha == "" {
		return ""
	}
	c, _ := r.commit(sha)
	return c.subject
}

// read takes the state from disk. Loose refs are read before packed-refs:
// git writes packed-refs before it deletes the loose refs it packed, so a
// ref being packed meanwhile is found in one or the other.
func (r *Repo) read() (state, error) {
	st := state{heads: map[string]string{}}
	b, err := r.files.read(filepath.Join(r.gitDir, "HEAD"))
	if err != nil {
		return st, fmt.Errorf("gitwatch: %w", err)
	}
	head := strings.TrimSpace(string(b))
	var loose refReader
	loose.r = r
	loose.vals = map[string]string{}
	if ref, ok := strings.CutPrefix(head, "ref:"); ok {
		st.symref = strings.TrimSpace(ref)
		if err := loose.load(st.symref); err != nil {
			return st, err
		}
	} else if isSHA(head) {
		st.head = head
	} else {
		return st, fmt.Errorf("gitwatch: unexpected HEAD %q", head)
	}
	base := filepath.Join(r.commonDir, "refs", "heads")
	err = r.files.walk(base, func(rel string) error {
		if strings.HasSuffix(rel, ".lock") {
			return nil
		}
		return loose.load("refs/heads/" + filepath.ToSlash(rel))
	})
	if err != nil {
		return st, fmt.Errorf("gitwatch: %w", err)
	}
	if loose.packed, err = r.packedRefs(); err != nil {
		return st, err
	}

	if st.symref != "" {
		if st.head, err = loose.resolve(st.symref, 0); err != nil {
			return st, err
		}
	}
	for name := range loose.packed {
		if b, ok := strings.CutPrefix(name, "refs/heads/"); ok {
			st.heads[b] = ""
		}
	}
	for name := range loose.vals {
		if b, ok := strings.CutPrefix(name, "refs/heads/"); ok {
			st.heads[b] = ""
		}
	}
	for b := range st.heads {
		sha, err := loose.resolve("refs/heads/"+b, 0)
		if err != nil || sha == "" {
			delete(st.heads, b) // a stray file, or a dangling symbolic ref
			continue
		}
		st.heads[b] = sha
	}
	return st, nil
}

// refReader resolves refs from the loose values read and packed-refs.
type refReader struct {
	r      *Repo
	vals   map[string]string // ref → loose file content (a commit or "ref: ...")
	packed map[string]string // ref → commit
}

// load reads a loose ref file if it exists.
func (l *refReader) load(ref string) error {
	if _, done := l.vals[ref]; done {
		return nil
	}
	dir := l.r.commonDir
	if !strings.HasPrefix(ref, "refs/") || strings.HasPrefix(ref, "refs/bisect/") || strings.HasPrefix(ref, "refs/worktree/") {
		dir = l.r.gitDir // per-worktree refs
	}
	b, err := l.r.files.read(filepath.Join(dir, filepath.FromSlash(ref)))
	switch {
	case err == nil:
		l.vals[ref] = strings.TrimSpace(string(b))
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, safefile.ErrNotRegular), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR):
	default:
		return fmt.Errorf("gitwatch: %w", err)
	}
	return nil
}

// resolve returns the commit a ref names ("" if it does not exist).
func (l *refReader) resolve(ref string, depth int) (string, error) {
	if depth > 5 {
		return "", fmt.Errorf("gitwatch: symbolic ref loop at %s", ref)
	}
	v, ok := l.vals[ref]
	if !ok {
		return l.packed[ref], nil
	}
	if t, ok := strings.CutPrefix(v, "ref:"); ok {
		t = strings.TrimSpace(t)
		if err := l.load(t); err != nil {
			return "", err
		}
		return l.resolve(t, depth+1)
	}
	if !isSHA(v) {
		return "", fmt.Errorf("gitwatch: ref %s holds %q", ref, v)
	}
	return v, nil
}

// packedRefs reads packed-refs: refname → commit.
func (r *Repo) packedRefs() (map[string]string, error) {
	m := map[string]string{}
	f, err := r.files.open(filepath.Join(r.commonDir, "packed-refs"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return m, nil
		}
		return nil, fmt.Errorf("gitwatch: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		sha, name, ok := strings.Cut(line, " ")
		if ok && isSHA(sha) {
			m[name] = sha
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gitwatch: packed-refs: %w", err)
	}
	return m, nil
}

func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

type commit struct {
	sha     string
	parents []string
	subject string
	when    int64 // committer time, unix seconds (0 if unreadable)
}

// maxReflogLine bounds what clonedAt reads of HEAD's reflog.
const maxReflogLine = 64 << 10

// clonedAt is the commit a clone checked out, from the first line of HEAD's
// reflog ("<zero> <sha> <who> <when>\tclone: from <url>"), or "" when the
// repository was not cloned or keeps no reflog.
func (r *Repo) clonedAt() string {
	f, err := r.files.open(filepath.Join(r.gitDir, "logs", "HEAD"))
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _, _ := bytes.Cut(readUpTo(f, maxReflogLine), []byte("\n"))
	head, msg, ok := bytes.Cut(line, []byte("\t"))
	if !ok || !bytes.HasPrefix(msg, []byte("clone: ")) {
		return ""
	}
	fields := strings.Fields(string(head))
	if len(fields) < 2 || !isSHA(fields[1]) {
		return ""
	}
	return fields[1]
}

func readUpTo(rd io.Reader, n int64) []byte {
	b, _ := io.ReadAll(io.LimitReader(rd, n))
	return b
}

// commit reads a commit object: loose first, else through git.
func (r *Repo) commit(sha string) (commit, bool) {
	if !isSHA(sha) {
		return commit{}, false
	}
	raw, err := r.looseObject(sha)
	if err != nil {
		raw, err = r.gitCatFile(sha)
		if err != nil {
			return commit{sha: sha}, false
		}
	}
	return parseCommit(sha, raw), true
}

// looseObject returns the body of a loose commit object.
func (r *Repo) looseObject(sha string) ([]byte, error) {
	f, err := r.files.open(filepath.Join(r.commonDir, "objects", sha[:2], sha[2:]))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, 1<<20))
	if err != nil {
		return nil, err
	}
	hdr, body, ok := bytes.Cut(data, []byte{0})
	if !ok || !bytes.HasPrefix(hdr, []byte("commit ")) {
		return nil, fmt.Errorf("gitwatch: object %s is not a commit", sha)
	}
	return body, nil
}

// gitCatFile reads a (packed) commit with git, if there is one and it may
// run on the repository; the caller holds r.mu.
func (r *Repo) gitCatFile(sha string) ([]byte, error) {
	if r.git == nil {
		return nil, errors.New("gitwatch: git is not installed")
	}
	was := r.refused
	if r.refused = r.mayRunGit(); r.refused != was {
		viewstamp.Changed() // resume names the commits degraded, or no longer
	}
	if r.refused != "" {
		return nil, errors.New(r.refused)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	cmd := r.git.Command(ctx, gittool.Run{Args: []string{"cat-file", "commit", sha}, Dir: r.root, GitDir: r.gitDir, Reading: true})
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("gitwatch: git cat-file %s: %w", sha, err)
	}
	return out, nil
}

// parseCommit reads the parents and the subject (the first paragraph of the
// message, its lines joined by spaces, as git's %s).
func parseCommit(sha string, body []byte) commit {
	c := commit{sha: sha}
	hdrs, msg, _ := bytes.Cut(body, []byte("\n\n"))
	for _, line := range bytes.Split(hdrs, []byte("\n")) {
		if p, ok := bytes.CutPrefix(line, []byte("parent ")); ok {
			c.parents = append(c.parents, string(bytes.TrimSpace(p)))
		}
		if p, ok := bytes.CutPrefix(line, []byte("committer ")); ok {
			// "name <email> <unix seconds> <zone>"
			if f := strings.Fields(string(p)); len(f) >= 2 {
				c.when, _ = strconv.ParseInt(f[len(f)-2], 10, 64)
			}
		}
	}
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(string(msg), "\r\n", "\n"), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			if len(lines) > 0 {
				break // the end of the first paragraph
			}
			continue
		}
		lines = append(lines, l)
	}
	c.subject = strings.Join(lines, " ")
	if !utf8.ValidString(c.subject) {
		c.subject = strings.ToValidUTF8(c.subject, "\uFFFD")
	}
	return c
}
