package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/gc"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/restore"
	"github.com/continuityd/continuityd/daemon/snapshot/take"
	"github.com/continuityd/continuityd/daemon/snapshot/transfer"
	"github.com/continuityd/continuityd/daemon/snapshot/verify"
	"github.com/continuityd/continuityd/daemon/snapshot/workdir"
	"github.com/continuityd/continuityd/internal/gittool"
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
	// Journal configures the version journal (off when not Enabled).
	Journal JournalOptions `json:"journal,omitzero"`
	// Git is the git binary; "" looks up "git" on PATH.
	Git string `json:"git,omitempty"`
	// Logger receives what the store does on its own (stale locks cleared,
	// snapshots dropped). nil means slog.Default().
	Logger *slog.Logger `json:"-"`
	// Now is the clock for snapshot times; nil means time.Now.
	Now func() time.Time `json:"-"`
}

// Store is one agent's snapshot store. Take, Restore and GC run one at a
// time; List, Show and Diff run concurrently with them and each other.
// It composes the store's parts (see the package's comment).
type Store struct {
	opt  Options
	repo *repo.Repo
	git  *repo.Git // repo's
	log  *slog.Logger
	now  func() time.Time
	work string // Workdir, absolute and clean
	// workdir is the directory Open found at Workdir.
	workdir *workdir.Workdir
	lock    *repo.WriteLock    // one writer: Take, Restore, an object received, GC's refs, Close
	take    *take.Taker        // taking snapshots
	notes   *take.Notes        // what the watcher says changed, for the Taker
	restore *restore.Restorer  // restoring them
	verify  *verify.Checker    // a snapshot's tree, before a restore writes it
	gc      *gc.Collector      // retention and GC, in the background
	xfer    *transfer.Transfer // snapshots to and from other machines
	recent  recent             // what the newest Take told of its snapshot (Show, Between)

	// Versions is the version journal: nil when off, or when it could
	// not be opened (VersionsProblem says why). A field, not a method:
	// the store's jobs each live in a type of their own.
	Versions        *Versions
	VersionsProblem string
}

// ErrGitUnavailable is wrapped by Open's error when git is missing or too
// old: the daemon keeps running and marks the agent degraded ["snapshots"]
// with the error's text as the reason.
var ErrGitUnavailable = repo.ErrGitUnavailable

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = repo.ErrClosed

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
	wd, err := workdir.Open(opt.Workdir)
	if err != nil {
		return nil, err
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
	s := &Store{opt: opt, lock: &repo.WriteLock{}, log: opt.Logger, now: opt.Now, work: opt.Workdir, workdir: wd, notes: take.NewNotes()}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("store", opt.Dir)
	if s.now == nil {
		s.now = time.Now
	}
	ignoreDirs := slices.Clone(opt.IgnoreDirs)
	slices.Sort(ignoreDirs)
	exclude, excludeAbs := repo.BaseExclude(s.work, opt.Dir, opt.Ignore, ignoreDirs, opt.Exclude)
	if s.repo, err = repo.Open(ctx, opt.Dir, opt.Workdir, tool, s.log, exclude); err != nil {
		return nil, err
	}
	s.git = s.repo.Git()
	s.verify = verify.New(s.repo, s.work, excludeAbs, opt.MaxFileBytes)
	s.xfer = transfer.New(s.repo, s.lock, opt.MaxFileBytes)
	all, err := s.repo.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot store %s: %w", opt.Dir, err)
	}
	var newest repo.Snapshot
	var newestModes string
	if len(all) > 0 {
		newest = all[0]
		if newestModes, err = s.repo.ModesOf(ctx, newest.ID); err != nil {
			return nil, fmt.Errorf("snapshot store %s: %w", opt.Dir, err)
		}
	}
	s.take = take.New(take.Options{Repo: s.repo, Lock: s.lock, Workdir: wd, Notes: s.notes,
		IgnoreDirs: ignoreDirs, ExcludeAbs: excludeAbs, MaxFileBytes: opt.MaxFileBytes, Log: s.log, Now: s.now,
		Newest: newest, NewestModes: newestModes, Made: func(m take.Made) {
			s.recent.remember(m)
			s.gc.Made(m.Added)
		}})
	s.restore = restore.New(restore.Options{Repo: s.repo, Lock: s.lock, Take: s.take, Verify: s.verify, Workdir: wd,
		ExcludeAbs: excludeAbs, Log: s.log, Now: s.now})
	s.gc = gc.Start(s.repo, s.lock, len(all), opt.KeepCount, opt.KeepBytes, s.log)
	openVersions(s)
	// A restore a kill, a crash or a full disk interrupted is finished
	// before the store is used.
	s.restore.FinishInterrupted(ctx)
	s.gc.Kick(-1) // the bounds may have changed while the daemon was away
	return s, nil
}

// Close stops the background GC and marks the store closed after the
// running Take or Restore ends.
func (s *Store) Close() error {
	s.gc.Stop()
	if s.Versions != nil {
		s.Versions.J.Close()
	}
	s.lock.Lock()
	defer s.lock.Unlock()
	s.lock.MarkClosed()
	s.take.Release()
	return nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.opt.Dir }

// Tool is the git the store runs, for a caller that reads the agent's
// own repository beside it (worklost).
func (s *Store) Tool() *gittool.Tool { return s.git.Tool() }

// Newest is the newest snapshot; ok is false before the first.
func (s *Store) Newest() (snap Snapshot, ok bool) {
	s.lock.Lock()
	defer s.lock.Unlock()
	newest, _ := s.take.Newest()
	return snapshotOf(newest, Timings{}), newest.N > 0
}

// GC applies retention and compacts the store: it drops the oldest
// snapshots beyond KeepCount, then more of the oldest while the store is
// over KeepBytes (the newest is always kept), packs what is left and
// deletes the rest. The store runs it itself when one is due; a Take
// waits for it only while it reads or deletes refs, never while git packs
// or prunes.
func (s *Store) GC(ctx context.Context) (GCResult, error) {
	res, err := s.gc.GC(ctx)
	return GCResult(res), err
}

// GCProblem says why the store's last garbage collection failed, or ""
// when it worked (or none ran yet): a store that cannot collect grows
// without bound, so the agent shows it as degraded.
func (s *Store) GCProblem() string { return s.gc.Problem() }

// WorkdirProblem says, when the workdir's path no longer leads to the
// directory Open found (a link repointed, a directory replaced), why the
// store refuses to act; "" when it still does.
func (s *Store) WorkdirProblem() string { return s.workdir.Problem() }
