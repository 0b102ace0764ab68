package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// Defaults of Options, the same as the configuration's ([snapshots]); a
// test of the wiring (daemon/capture) keeps the two equal.
const (
	DefaultMaxFileBytes = 8 << 20   // a larger file is skipped and listed
	DefaultKeepCount    = 200       // snapshots kept per agent
	DefaultKeepBytes    = 512 << 20 // store size kept per agent, after GC
)

// Options configure a Store.
type Options struct {
	// Dir is the store, a bare git repository private to the daemon, e.g.
	// STATE/agents/NAME/snapshots.git. It is made (mode 0700) when missing.
	Dir string `json:"dir"`
	// Workdir is the agent's work tree. It is read, and written only by
	// Restore.
	Workdir string `json:"workdir"`
	// Ignore holds gitignore-style patterns relative to the workdir
	// ([watch] ignore), applied besides the workdir's own .gitignore files.
	Ignore []string `json:"ignore,omitempty"`
	// IgnoreDirs are directory names left out at any depth ([watch]
	// ignore_dirs): node_modules, .venv, …
	IgnoreDirs []string `json:"ignore_dirs,omitempty"`
	// Exclude holds absolute paths left out when they lie in the workdir:
	// the daemon's state directory. Dir is always left out.
	Exclude []string `json:"exclude,omitempty"`
	// MaxFileBytes skips (and lists) regular files larger than this.
	// 0 means DefaultMaxFileBytes; negative means no limit.
	MaxFileBytes int64 `json:"max_file_bytes,omitempty"`
	// KeepCount and KeepBytes bound what GC keeps: the newest KeepCount
	// snapshots, fewer if the store would be larger than KeepBytes (the
	// newest is always kept). 0 means the default.
	KeepCount int   `json:"keep_count,omitempty"`
	KeepBytes int64 `json:"keep_bytes,omitempty"`
	// Git is the git binary; "" looks up "git" on PATH.
	Git string `json:"git,omitempty"`
	// Logger receives what the store does on its own (stale locks cleared,
	// snapshots dropped). nil means slog.Default().
	Logger *slog.Logger `json:"-"`
	// Now is the clock for snapshot times; nil means time.Now.
	Now func() time.Time `json:"-"`
}

// Snapshot is one snapshot of the work tree.
type Snapshot struct {
	ID       string    `json:"id"` // the commit's hash in the store
	Time     time.Time `json:"at"`
	Trigger  string    `json:"trigger"`          // what caused it: "quiet", "threshold", "restore", …
	Seq      uint64    `json:"seq"`              // the residency seq it belongs to
	Parent   string    `json:"parent,omitempty"` // the snapshot before it, "" for the first
	Added    int       `json:"added"`            // files, against Parent
	Modified int       `json:"modified"`
	Deleted  int       `json:"deleted"`
	Skipped  int       `json:"skipped"` // files left out for their size or unreadable
	// Conversation is where the agent's conversation stood when the
	// snapshot was taken (SetConversation); nil when no transcript was
	// followed, and for snapshots taken before it was recorded.
	Conversation *Conversation `json:"conversation,omitempty"`
	// Took is how long the Take that made it spent, phase by phase; zero
	// on snapshots read back by List or Show.
	Took Timings `json:"-"`

	tree   string // the tree's hash
	n      uint64 // its number in the store: refs/snapshots/<n>
	commit string // the commit in this store when it is not ID: an imported copy with files withheld
}

// Files is the number of files the snapshot changed against its parent.
func (s Snapshot) Files() int { return s.Added + s.Modified + s.Deleted }

// Timings are the phases of one Take.
type Timings struct {
	Walk   time.Duration `json:"walk"`   // the size walk of the workdir (or of the changed paths)
	Add    time.Duration `json:"add"`    // the files stored: git add -A into the private index, or read and written in process
	Tree   time.Duration `json:"tree"`   // the trees: git write-tree and the diff against the parent, or written in process
	Commit time.Duration `json:"commit"` // the commit and its ref
	Total  time.Duration `json:"total"`
	// Files is how many files the walk found in the workdir (a snapshot
	// stores them all, less those skipped); in a Take from what changed,
	// in the changed paths only.
	Files int64 `json:"files"`
	// Incremental is set when the Take looked at the changed paths only
	// (NoteChanged), Paths of them.
	Incremental bool `json:"incremental,omitempty"`
	Paths       int  `json:"paths,omitempty"`
}

// Store is one agent's snapshot store. Take, Restore and GC run one at a
// time; List, Show and Diff run concurrently with them and each other.
type Store struct {
	opt    Options
	repo   *repo.Repo
	git    *repo.Git // repo's
	log    *slog.Logger
	now    func() time.Time
	work   string // Workdir, absolute and clean
	realWk string // Workdir with symbolic links resolved
	// workID is the directory Open found at Workdir (workdir.go).
	workID fs.FileInfo

	ignoreDirs []string // sorted, for the size walk
	excludeAbs []string // absolute paths the size walk leaves out

	closed atomic.Bool
	// conversation says where the conversation stands (SetConversation).
	conversation atomic.Pointer[func() Conversation]
	holds        atomic.Int32 // HoldObjects callers: GC keeps unreferenced objects
	gc           *collector   // the background GC
	// compactHook, when set (by tests), runs as a GC starts to pack: it
	// holds a GC there.
	compactHook func()

	// What a Take under way is doing, for Progress (read from any
	// goroutine): its step ("" when none) and the files the walk found.
	step      atomic.Pointer[string]
	stepFiles atomic.Int64
	// stepHook, when set (by this package's tests), runs as each step
	// begins, so a test can look at Progress mid-Take.
	stepHook func(step string)
	// pointHook, when set (by this package's tests), runs at each point
	// where a Take changes the store in process (pointBlobs…), so a test
	// can kill the process there.
	pointHook func(point string)
	// restoreHook, when set (by tests: HoldRestoreEnv), runs at each
	// point of a restore (hold), so a test can kill the process there.
	restoreHook func(point string)
	// interrupted is the interrupted restore reported (journal.go);
	// interruptedPaths the files of the one Open found.
	interrupted      atomic.Pointer[InterruptedRestore]
	interruptedPaths []string

	mu          sync.Mutex // one writer: Take, Restore, GC, Close
	newest      Snapshot   // newest.n == 0: no snapshot yet
	newestModes string     // its mode lines (modeLines)
	// newestDetail is Show's answer for the newest snapshot when its Take
	// counted the lines already (a snapshot from what changed); nil
	// otherwise. Show reads it without the mutex.
	newestDetail atomic.Pointer[Detail]
	oversized    map[string]int64 // skipped for their size at the last Take
	bigIgnored   map[string]int64 // over the size but ignored anyway
	fixIgnored   bool             // check the index for tracked files that became ignored
	firstByGit   bool             // tests: a first snapshot is staged by git add, as before first.go
	// firstPackObjects bounds a first snapshot's packs (first.go).
	firstPackObjects int
	walkState        *treeState // what the last Take's walk found; nil before the first
	// indexBehind is the tree the last Take from what changed staged in
	// process, which the private index does not hold yet ("" when it
	// holds what was staged): syncIndex.
	indexBehind string
	trees       treeCache                  // parsed trees on the changed paths (fast.go)
	pack        *takePack                  // the objects of the Take from what changed under way
	zw          repo.Compressors           // reused for the objects a Take writes (loose or in its pack)
	pipes       *repo.Pipes                // long-lived git processes
	listed      atomic.Pointer[listedRefs] // the snapshots as last read from the refs (list)
	lastChanges atomic.Pointer[changeSet]  // the newest Take's changes against its parent, when it listed them

	notesMu     sync.Mutex  // guards notes and followed, which the watcher's side writes while a Take runs
	notes       changeNotes // paths changed since the last Take (changed.go)
	followed    bool        // a watcher reports the changes (Follow)
	count       int         // snapshots held
	takesSinceG int         // snapshots made since the last GC (the collector reads it)
}

// ErrGitUnavailable is wrapped by Open's error when git is missing or too
// old: the daemon keeps running and marks the agent degraded ["snapshots"]
// with the error's text as the reason.
var ErrGitUnavailable = repo.ErrGitUnavailable

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("snapshot store closed")

var triggerRE = lazyregexp.New(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// Open opens (or makes) the store of one agent. An error wrapping
// ErrGitUnavailable means git is missing or too old; any error leaves the
// daemon running with the agent degraded ["snapshots"] and the error as
// the reason.
func Open(ctx context.Context, opt Options) (*Store, error) {
	if opt.Dir == "" || !filepath.IsAbs(opt.Dir) {
		return nil, fmt.Errorf("snapshot store: Dir %q must be an absolute path", opt.Dir)
	}
	if opt.Workdir == "" || !filepath.IsAbs(opt.Workdir) {
		return nil, fmt.Errorf("snapshot store: workdir %q must be an absolute path", opt.Workdir)
	}
	opt.Dir, opt.Workdir = filepath.Clean(opt.Dir), filepath.Clean(opt.Workdir)
	workID, err := os.Stat(opt.Workdir)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: workdir: %w", err)
	} else if !workID.IsDir() {
		return nil, fmt.Errorf("snapshot store: workdir %s is not a directory", opt.Workdir)
	}
	if opt.MaxFileBytes == 0 {
		opt.MaxFileBytes = DefaultMaxFileBytes
	}
	if opt.KeepCount <= 0 {
		opt.KeepCount = DefaultKeepCount
	}
	if opt.KeepBytes <= 0 {
		opt.KeepBytes = DefaultKeepBytes
	}
	for i, p := range opt.Ignore {
		if strings.ContainsAny(p, "\r\n\x00") {
			return nil, fmt.Errorf("snapshot store: ignore pattern %d holds a line break or NUL; give one pattern per entry", i)
		}
	}
	for i, d := range opt.IgnoreDirs {
		if d == "" || strings.ContainsAny(d, "/\r\n\x00") {
			return nil, fmt.Errorf("snapshot store: ignore_dirs entry %d (%q) must be a plain directory name", i, d)
		}
	}
	tool, err := repo.CheckGit(ctx, opt.Git)
	if err != nil {
		return nil, err
	}
	realWk, err := filepath.EvalSymlinks(opt.Workdir)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: workdir: %w", err)
	}
	s := &Store{
		opt:              opt,
		log:              opt.Logger,
		now:              opt.Now,
		work:             opt.Workdir,
		realWk:           realWk,
		workID:           workID,
		oversized:        map[string]int64{},
		bigIgnored:       map[string]int64{},
		fixIgnored:       true, // the ignore rules may have changed since the last run
		firstPackObjects: firstPackObjects,
		notes:            changeNotes{unknown: true},
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("store", opt.Dir)
	if s.now == nil {
		s.now = time.Now
	}
	s.ignoreDirs = slices.Clone(opt.IgnoreDirs)
	slices.Sort(s.ignoreDirs)
	exclude, excludeAbs := repo.BaseExclude(s.work, opt.Dir, opt.Ignore, s.ignoreDirs, opt.Exclude)
	s.excludeAbs = excludeAbs
	if s.repo, err = repo.Open(ctx, opt.Dir, opt.Workdir, tool, s.log, exclude); err != nil {
		return nil, err
	}
	s.git = s.repo.Git()
	s.pipes = repo.NewPipes(s.repo, s.stopIdlePipes)
	all, err := s.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot store %s: %w", opt.Dir, err)
	}
	if len(all) > 0 {
		s.newest = all[0]
		if s.newestModes, err = s.modesOf(ctx, s.newest.ID); err != nil {
			return nil, fmt.Errorf("snapshot store %s: %w", opt.Dir, err)
		}
	}
	s.count = len(all)
	s.restoreHook = holdFromEnv()
	s.startCollector()
	// A restore a kill, a crash or a full disk interrupted is finished
	// before the store is used (journal.go).
	s.finishInterrupted(ctx)
	s.gcKick(-1) // the bounds may have changed while the daemon was away
	return s, nil
}

// Close stops the background GC and marks the store closed after the
// running Take or Restore ends.
func (s *Store) Close() error {
	s.stopCollector()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed.Store(true)
	s.stopPipes()
	return nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.opt.Dir }

// Tool is the git the store runs, for a caller that reads the agent's
// own repository beside it (worklost).
func (s *Store) Tool() *gittool.Tool { return s.git.Tool() }

// Newest is the newest snapshot; ok is false before the first.
func (s *Store) Newest() (snap Snapshot, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newest, s.newest.n > 0
}

// ---- metadata --------------------------------------------------------

// The commit message's first line holds the metadata List needs, so one
// `git for-each-ref` answers a List; the body lists the skipped files:
//
//	continuityd-snapshot v=1 n=7 trigger=quiet seq=42 time=2026-…Z parent=<id>|- added=3 modified=1 deleted=0 skipped=1 [session=<id>] [message=<id>]
//
//	skipped size=12582912 path="data/big.bin"
//
// session and message (the Conversation) come last and only when known,
// their values escaped as in a URL query (subjectValue); a snapshot taken
// before they were recorded has neither, and reads back with no
// Conversation. A reader ignores keys it does not know, so an older daemon
// lists newer snapshots. testdata/subject.golden holds one line of each
// kind (TestSubjectGolden).
const subjectTag = "continuityd-snapshot"

// maxListedSkipped bounds the skipped files named in one snapshot.
const maxListedSkipped = 1000

func (s *Store) message(snap Snapshot, skipped []Skipped, modes string) string {
	parent := snap.Parent
	if parent == "" {
		parent = "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s v=1 n=%d trigger=%s seq=%d time=%s parent=%s added=%d modified=%d deleted=%d skipped=%d",
		subjectTag, snap.n, snap.Trigger, snap.Seq, snap.Time.UTC().Format(time.RFC3339Nano), parent,
		snap.Added, snap.Modified, snap.Deleted, snap.Skipped)
	if c := snap.Conversation; c != nil && c.Session != "" {
		b.WriteString(" session=" + subjectValue(c.Session))
	}
	if c := snap.Conversation; c != nil && c.Message != "" {
		b.WriteString(" message=" + subjectValue(c.Message))
	}
	b.WriteString("\n")
	if len(skipped) > 0 {
		b.WriteString("\n")
		for i, k := range skipped {
			if i == maxListedSkipped {
				fmt.Fprintf(&b, "skipped-more %d\n", len(skipped)-i)
				break
			}
			fmt.Fprintf(&b, "skipped reason=%s size=%d path=%s\n", k.Reason, k.Size, strconv.Quote(k.Path))
		}
	}
	if modes != "" {
		b.WriteString("\n" + modes)
	}
	return b.String()
}

// parseSubject reads the metadata line back.
func parseSubject(id, tree, subject string) (Snapshot, bool) {
	f := strings.Fields(subject)
	if len(f) < 2 || f[0] != subjectTag {
		return Snapshot{}, false
	}
	snap := Snapshot{ID: id, tree: tree}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "n":
			snap.n, err = strconv.ParseUint(v, 10, 64)
		case "trigger":
			snap.Trigger = v
		case "seq":
			snap.Seq, err = strconv.ParseUint(v, 10, 64)
		case "time":
			snap.Time, err = time.Parse(time.RFC3339Nano, v)
		case "parent":
			if v != "-" {
				snap.Parent = v
			}
		case "added":
			snap.Added, err = strconv.Atoi(v)
		case "modified":
			snap.Modified, err = strconv.Atoi(v)
		case "deleted":
			snap.Deleted, err = strconv.Atoi(v)
		case "skipped":
			snap.Skipped, err = strconv.Atoi(v)
		case "session", "message":
			var val string
			if val, err = parseSubjectValue(v); err == nil {
				if snap.Conversation == nil {
					snap.Conversation = &Conversation{}
				}
				if k == "session" {
					snap.Conversation.Session = val
				} else {
					snap.Conversation.Message = val
				}
			}
		}
		if err != nil {
			return Snapshot{}, false
		}
	}
	return snap, snap.n > 0
}

// modesOf returns the mode lines (modeLines) of snapshot id's message, as
// they were written.
func (s *Store) modesOf(ctx context.Context, id string) (string, error) {
	msg, err := s.git.Run(ctx, repo.Call{Args: []string{"cat-file", "commit", id}})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for line := range strings.SplitSeq(string(msg), "\n") {
		if strings.HasPrefix(line, "mode ") || strings.HasPrefix(line, "modes-more ") {
			b.WriteString(line + "\n")
		}
	}
	return b.String(), nil
}

// parseSkipped reads the skipped files from a commit message body.
func parseSkipped(msg string) (list []Skipped, more int) {
	for line := range strings.SplitSeq(msg, "\n") {
		if rest, ok := strings.CutPrefix(line, "skipped-more "); ok {
			more, _ = strconv.Atoi(rest)
			continue
		}
		rest, ok := strings.CutPrefix(line, "skipped reason=")
		if !ok {
			continue
		}
		reason, rest, _ := strings.Cut(rest, " size=")
		size, rest, _ := strings.Cut(rest, " path=")
		p, err := strconv.Unquote(rest)
		if err != nil {
			continue
		}
		n, _ := strconv.ParseInt(size, 10, 64)
		list = append(list, Skipped{Path: p, Size: n, Reason: reason})
	}
	return list, more
}

// list reads every snapshot the refs reach, newest first. Objects a killed
// Take wrote without its ref are never listed: the ref is made last, with
// a lock file and a rename.
func (s *Store) list(ctx context.Context) ([]Snapshot, error) {
	// The work record of every burst, status and the API list the
	// snapshots: a git run each (several per burst) is kept for when the
	// refs changed by another hand than a Take's (listTaken).
	stamp, stamped := s.refsStamp()
	if c := s.listed.Load(); stamped && c != nil && c.stamp == stamp {
		return slices.Clone(c.snaps), nil
	}
	all, err := s.refsUnder(ctx, repo.RefPrefix, true)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b Snapshot) int {
		switch {
		case a.n > b.n:
			return -1
		case a.n < b.n:
			return 1
		}
		return 0
	})
	if stamped {
		s.listed.Store(&listedRefs{snaps: slices.Clone(all), stamp: stamp})
	}
	return all, nil
}

// listedRefs is the last list of the snapshots read from the refs, and
// what the refs looked like before it was read.
type listedRefs struct {
	snaps []Snapshot
	stamp refsStamp
}

// refsStamp is what changes when a snapshot ref is made, moved or
// deleted, by the store or by anyone else: the refs directory's and the
// packed refs file's times and sizes. The store also forgets the list at
// each change it makes itself (forgetList), in case two changes fall in
// one tick of the file system's clock.
type refsStamp struct {
	dirTime, packedTime time.Time
	dirSize, packedSize int64
}

func (s *Store) refsStamp() (refsStamp, bool) {
	var st refsStamp
	dir, err := os.Stat(filepath.Join(s.opt.Dir, filepath.FromSlash(strings.TrimSuffix(repo.RefPrefix, "/"))))
	if err != nil {
		return st, false
	}
	st.dirTime, st.dirSize = dir.ModTime(), dir.Size()
	if packed, err := os.Stat(filepath.Join(s.opt.Dir, "packed-refs")); err == nil {
		st.packedTime, st.packedSize = packed.ModTime(), packed.Size()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return st, false
	}
	return st, true
}

// forgetList drops the cached list: the store changed a snapshot ref.
func (s *Store) forgetList() { s.listed.Store(nil) }

// listTaken puts the snapshot whose ref a Take just made (id, its tree
// and commit message) at the head of the cached list, as the refs would
// list it, when that list was current just before the ref (before is what
// the refs looked like then): the list a burst's work record reads next
// then needs no git run. Otherwise the list is forgotten, to be read
// again. A list read meanwhile (List takes no lock) that already holds the
// snapshot is kept as it is, under the new stamp.
func (s *Store) listTaken(id, tree, message string, before refsStamp, stamped bool) {
	c := s.listed.Load()
	after, ok := s.refsStamp()
	subject, _, _ := strings.Cut(message, "\n")
	snap, parsed := parseSubject(id, tree, subject)
	if c == nil || !stamped || !ok || !parsed || c.stamp != before {
		s.forgetList()
		return
	}
	snaps := c.snaps
	if len(snaps) == 0 || snaps[0].n < snap.n {
		snaps = append([]Snapshot{snap}, snaps...)
	}
	if !s.listed.CompareAndSwap(c, &listedRefs{snaps: snaps, stamp: after}) {
		s.forgetList()
	}
}

// refsUnder reads the snapshots the refs under prefix reach; a ref whose
// commit is not a snapshot is skipped (and said, when warn is set).
func (s *Store) refsUnder(ctx context.Context, prefix string, warn bool) ([]Snapshot, error) {
	out, err := s.git.Run(ctx, repo.Call{Args: []string{"for-each-ref",
		"--format=%(refname)%00%(objectname)%00%(tree)%00%(contents:subject)", prefix}})
	if err != nil {
		return nil, err
	}
	var all []Snapshot
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.SplitN(line, "\x00", 4)
		if len(f) != 4 {
			continue
		}
		// An imported snapshot is named by its ref: its commit may be a
		// copy with files withheld (Import).
		id := f[1]
		if name, ok := strings.CutPrefix(f[0], importPrefix); ok && objectIDRE.MatchString(name) {
			id = name
		}
		snap, ok := parseSubject(id, f[2], f[3])
		if id != f[1] {
			snap.commit = f[1]
		}
		if !ok {
			if warn {
				s.log.Warn("snapshot store: a ref that is not a snapshot", "commit", f[0])
			}
			continue
		}
		all = append(all, snap)
	}
	return all, nil
}

// ---- errors for the API ------------------------------------------------

var idRE = lazyregexp.New(`^[0-9a-f]{7,40}$`)

// CheckID normalizes a snapshot id a person typed (a full id or a prefix
// of 7+ characters) and refuses, naming field, one that cannot be.
func CheckID(id, field string) (string, error) {
	id = strings.ToLower(strings.TrimSpace(id))
	if !idRE.MatchString(id) {
		return "", capsule.Refuse(capsule.CodeInvalidField, field,
			"a snapshot id is 7 to 40 hexadecimal characters, as `continuityd snapshot list` shows")
	}
	return id, nil
}

// resolve finds the snapshot an id (or a unique prefix of 7+ characters)
// names. The id is never handed to git as a revision.
func (s *Store) resolve(ctx context.Context, id, field string) (Snapshot, []Snapshot, error) {
	id, err := CheckID(id, field)
	if err != nil {
		return Snapshot{}, nil, err
	}
	all, err := s.list(ctx)
	if err != nil {
		return Snapshot{}, nil, err
	}
	var found []Snapshot
	for _, snap := range all {
		if strings.HasPrefix(snap.ID, id) {
			found = append(found, snap)
		}
	}
	if len(found) == 0 {
		// A snapshot fetched from another machine (Import) is found by
		// its id too.
		imp, err := s.imported(ctx)
		if err != nil {
			return Snapshot{}, nil, err
		}
		for _, snap := range imp {
			if strings.HasPrefix(snap.ID, id) {
				found = append(found, snap)
			}
		}
		all = append(all, imp...)
	}
	switch len(found) {
	case 0:
		return Snapshot{}, all, capsule.Refuse(capsule.CodeNotFound, field,
			"no snapshot %s: it never existed or retention dropped it; `continuityd snapshot list` shows those kept", id)
	case 1:
		return found[0], all, nil
	default:
		return Snapshot{}, all, capsule.Refuse(capsule.CodeInvalidField, field,
			"%s names %d snapshots; give more of the id", id, len(found))
	}
}
