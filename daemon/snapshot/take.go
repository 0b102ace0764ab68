package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// Take snapshots the workdir. When the tree is the same as the newest
// snapshot's, it makes none and returns the newest with false. trigger
// names the cause (lower case letters, digits, "_", "-", "."); seq is the
// residency seq the snapshot belongs to.
func (s *Store) Take(ctx context.Context, trigger string, seq uint64) (Snapshot, bool, error) {
	if !triggerRE.MatchString(trigger) {
		return Snapshot{}, false, capsule.Refuse(capsule.CodeInvalidField, "trigger",
			"a trigger is 1 to 64 lower-case letters, digits, '_', '-' or '.'")
	}
	if err := s.lock.LockOpen(); err != nil {
		return Snapshot{}, false, err
	}
	defer s.lock.Unlock()
	if err := s.workdir.Check(); err != nil {
		return Snapshot{}, false, err // another directory is not the agent's
	}
	start := time.Now()
	defer s.dropTakePack() // what a Take that made no snapshot wrote
	notes := s.takeNotes()
	st, err := s.stage(ctx, nil, notes)
	if err != nil {
		s.keepNotes(notes)
		return Snapshot{}, false, err
	}
	snap, isNew, err := s.commit(ctx, &st, trigger, seq)
	if err != nil {
		s.keepNotes(notes)
		return Snapshot{}, false, err
	}
	st.took.Total = time.Since(start)
	return snapshotOf(snap, st.took), isNew, nil
}

// Progress says how far the Take under way got; safe from any goroutine,
// while a Take holds the store. A first snapshot of a large tree takes
// seconds: status and the log show it moving.
func (s *Store) Progress() Progress {
	p := s.step.Load()
	if p == nil || *p == "" {
		return Progress{}
	}
	return Progress{Step: *p, Files: s.stepFiles.Load()}
}

func (s *Store) setStep(step string) {
	if step == StepWalk {
		s.stepFiles.Store(0)
	}
	s.step.Store(&step)
	if s.stepHook != nil && step != "" {
		s.stepHook(step)
	}
}

// staged is the work tree as written into the store's objects, not yet
// a snapshot.
type staged struct {
	tree    string
	changes []repo.Change // against the newest snapshot's tree (a Take from what changed)
	counts  diffCounts
	skipped []repo.Skipped
	modes   string // the mode lines of the snapshot's message (modeLines)
	took    Timings
	// files are changes with their line counts, when counted in the same
	// pass (a Take from what changed); nil otherwise.
	files []repo.FileChange
	// added bounds the bytes of the files the add read (the changed
	// paths' regular files); -1 for a full add.
	added int64
}

// maxCountedPaths bounds the changed paths of a Take that counts lines
// as it compares trees: counting reads every changed file, which a
// first snapshot (every file added) must not pay for.
const maxCountedPaths = 1000

// stage writes the work tree, as the snapshot rules see it, into the
// store: the size walk, the exclusions, `git add -A` into the private
// index, `git write-tree`. With notes that vouch for what changed since
// the last Take, the walk and the add look at those paths only (see
// changed.go). The files of force that exist are added even when an
// ignore rule covers them (a restore's safety snapshot holds what the
// previous restore wrote, see restoredFile).
func (s *Store) stage(ctx context.Context, force []string, notes changeNotes) (staged, error) {
	var st staged
	if s.git.Failed() {
		s.repo.ClearStaleLocks() // a git run failed since the last Take
	}

	t := time.Now()
	s.setStep(StepWalk)
	defer s.setStep("")
	roots, incremental := s.changedRoots(notes)
	var found walked
	var err error
	if incremental {
		found, err = s.walkChanged(roots)
	} else {
		found, err = s.walk()
	}
	if err != nil {
		return st, err
	}
	over := found.over
	st.took.Walk = time.Since(t)
	st.took.Files = s.stepFiles.Load()
	st.took.Incremental = incremental
	st.took.Paths = len(roots)
	st.added = -1
	if incremental {
		st.added = found.bytes
	}

	t = time.Now()
	s.setStep(StepStore)
	if incremental {
		s.beginTakePack()
		fast, err := s.stageFromChanged(ctx, roots, found)
		if err == nil {
			tree := fast.took.Tree
			fast.took, fast.added = st.took, st.added
			fast.took.Add, fast.took.Tree = time.Since(t)-tree, tree
			return fast, nil
		}
		s.dropTakePack()
		if !errors.Is(err, errNotFast) {
			return st, err
		}
		// The whole tree is added instead, with the same walk (the
		// changed paths' findings merged into the last full walk's).
		st.took.Incremental, st.added = false, -1
	}
	if err := s.syncIndex(ctx); err != nil {
		return st, err
	}
	s.stopPipes() // check-ignore read the rules as they were
	if err := s.excludeOversized(ctx, over, false); err != nil {
		return st, err
	}
	st.skipped = append(st.skipped, s.skippedBig()...)
	odd, err := s.notIgnored(ctx, found.odd, s.ignoredOf)
	if err != nil {
		return st, err
	}
	st.skipped = append(st.skipped, odd...)
	// A store whose index holds nothing yet (its first snapshot) tracks
	// nothing the rules could cover: no ignore fix, and the tree's files
	// are all added (no diff against the empty tree to count them).
	before := repo.IndexEntries(s.git.Index())
	if before == 0 {
		s.fixIgnored = false
	}
	if s.canStageFirst(force, before) {
		first, err := s.stageFirst(ctx)
		switch {
		case err == nil:
			return s.endFirst(ctx, st, first, found, t)
		case !errors.Is(err, errNotFirst):
			return st, err
		}
		s.log.Info("snapshot store: the first snapshot is staged by git add instead", "why", err)
	}
	unreadable, err := s.addAll(ctx, st.took.Files-int64(before) <= maxStreamedFiles)
	if err != nil {
		return st, err
	}
	// git add refuses a file inside a directory it takes for .git as a
	// file it could not add: the directory is named already.
	unreadable = slices.DeleteFunc(unreadable, func(u repo.Skipped) bool {
		return slices.ContainsFunc(found.odd, func(k repo.Skipped) bool {
			return k.Reason == repo.ReasonGitName && strings.HasPrefix(u.Path, k.Path+"/")
		})
	})
	s.walkState = &treeState{modes: found.modes, odd: found.odd, unreadable: unreadable}
	for _, u := range unreadable {
		if !slices.ContainsFunc(st.skipped, func(k repo.Skipped) bool { return k.Path == u.Path }) {
			st.skipped = append(st.skipped, u)
		}
	}
	if err := s.forceAdd(ctx, force); err != nil {
		return st, err
	}
	st.took.Add = time.Since(t)

	t = time.Now()
	s.setStep(StepTree)
	for attempt := 0; ; attempt++ {
		if st.tree, err = s.git.Text(ctx, "write-tree"); err != nil {
			return st, fmt.Errorf("snapshot of %s: %w", s.work, err)
		}
		parent := repo.EmptyTree
		if s.newest.N > 0 {
			parent = s.newest.Tree
		}
		st.counts = diffCounts{}
		switch {
		case st.tree == parent:
		case parent == repo.EmptyTree && before == 0:
			st.counts.added = repo.IndexEntries(s.git.Index())
		default:
			if st.counts, err = s.diffCount(ctx, parent, st.tree); err != nil {
				return st, err
			}
		}
		if attempt > 0 || !s.needsIgnoreFix(st.counts.ignoreFile) {
			break
		}
		// An ignore rule changed: tracked files it now covers leave the
		// index (git add -A keeps tracked files even when ignored).
		fixed, err := s.dropIgnored(ctx, force)
		if err != nil {
			return st, err
		}
		if !fixed {
			break
		}
	}
	if st.modes, err = s.modeLines(ctx, st.tree, found.modes); err != nil {
		return st, err
	}
	st.took.Tree = time.Since(t)
	return st, nil
}

// endFirst is stage's end for a first snapshot written in process
// (stageFirst), begun at start.
func (s *Store) endFirst(ctx context.Context, st staged, first stagedFirst, found walked, start time.Time) (staged, error) {
	s.walkState = &treeState{modes: found.modes, odd: found.odd, unreadable: first.unreadable}
	st.skipped = append(st.skipped, first.unreadable...)
	st.took.Add = time.Since(start)
	t := time.Now()
	st.tree = first.tree
	st.counts = diffCounts{added: first.files}
	var err error
	if st.modes, err = s.modeLines(ctx, st.tree, found.modes); err != nil {
		return st, err
	}
	st.took.Tree = time.Since(t)
	return st, nil
}

// stageFromChanged is stage's part for a Take from what changed, with the
// walk of the changed paths done: the size exclusions brought up to date,
// the files staged in process (stageChanged), the permissions listed.
// errNotFast sends the Take to the full add.
func (s *Store) stageFromChanged(ctx context.Context, roots []string, found walked) (staged, error) {
	if err := s.excludeOversized(ctx, found.over, true); err != nil {
		return staged{}, err
	}
	odd, err := s.notIgnored(ctx, found.odd, s.pipes.IgnoredList)
	if err != nil {
		return staged{}, err
	}
	st, err := s.stageChanged(ctx, roots, found)
	if err != nil {
		return staged{}, err
	}
	t := time.Now()
	set := make(map[string]bool, len(roots))
	for _, r := range roots {
		set[r] = true
	}
	unreadable := slices.Clone(st.skipped)
	for _, u := range s.walkState.unreadable {
		if !inRoots(u.Path, set) && !slices.ContainsFunc(unreadable, func(k repo.Skipped) bool { return k.Path == u.Path }) {
			unreadable = append(unreadable, u)
		}
	}
	s.walkState = &treeState{modes: found.modes, odd: found.odd, unreadable: unreadable}
	st.skipped = append(s.skippedBig(), odd...)
	for _, u := range unreadable {
		if !slices.ContainsFunc(st.skipped, func(k repo.Skipped) bool { return k.Path == u.Path }) {
			st.skipped = append(st.skipped, u)
		}
	}
	if st.modes, err = s.modeLinesChanged(ctx, st.tree, found.modes); err != nil {
		return staged{}, err
	}
	st.took.Tree += time.Since(t)
	return st, nil
}

// skippedBig names the files skipped for their size and the nested
// repositories, as the last excludeOversized left them.
func (s *Store) skippedBig() []repo.Skipped {
	var list []repo.Skipped
	for _, p := range sortedKeys(s.oversized) {
		if n := s.oversized[p]; n == repoSize {
			list = append(list, repo.Skipped{Path: p, Reason: repo.ReasonRepository})
		} else {
			list = append(list, repo.Skipped{Path: p, Size: n, Reason: repo.ReasonTooLarge})
		}
	}
	return list
}

// addRetries is how many times a git add that a file changing under it
// stopped is run again.
const addRetries = 2

// maxStreamedFiles bounds the new files a git add streams into one pack:
// git's bulk check-in looks up each object it writes in a list of those
// written before it, one by one (git 2.39), which at 100,000 new files
// costs more than the loose objects it saves.
const maxStreamedFiles = 16 << 10

// addAll runs `git add -A` of the whole tree into the private index and
// returns the files it could not read. With stream, the files git reads
// go into one pack (see below) instead of a loose object each. --ignore-errors: a file that
// cannot be read (permissions, or gone between the walk and git) is left
// out and named, not a failed snapshot. A git stopped by a file changing
// while it read it (it found fewer bytes than it was told: "failed to
// read"; or a signal) left its index.lock: that is cleared and the add
// run again. git's warnings are logged.
func (s *Store) addAll(ctx context.Context, stream bool) ([]repo.Skipped, error) {
	for attempt := 0; ; attempt++ {
		var warn string
		threshold := "core.bigFileThreshold=512m" // git's default
		if stream {
			threshold = "core.bigFileThreshold=1"
		}
		// core.bigFileThreshold=1: every file is streamed into one pack
		// (git's bulk check-in) instead of a loose object file each: a
		// third less time for a first snapshot of 10,000 files here, and
		// one file for the collector to repack instead of thousands. It
		// is set for this run only: for the diffs, files stay text.
		c := repo.Call{Args: []string{"-c", threshold, "add", "-A", "--ignore-errors"}, InWork: true, Warnings: &warn}
		_, err := s.git.Run(ctx, c)
		var ge *repo.GitError
		var exit *exec.ExitError
		if errors.As(err, &ge) && errors.As(ge.Err, &exit) && ctx.Err() == nil &&
			(exit.ExitCode() < 0 || strings.Contains(ge.Stderr, "failed to read")) {
			s.repo.ClearStaleLocks()
			if attempt == addRetries {
				return nil, fmt.Errorf("snapshot of %s: git add stopped %d times (a file changing while git reads it?): %w", s.work, attempt+1, err)
			}
			s.log.Warn("snapshot store: git add stopped (a file changed while it read it?); running it again", "err", err)
			continue
		}
		if err == nil {
			s.logWarnings(warn)
			return nil, nil
		}
		unreadable, ok := unreadableFiles(err)
		if !ok {
			return nil, fmt.Errorf("snapshot of %s: %w", s.work, err)
		}
		s.logWarnings(ge.Stderr)
		return unreadable, nil
	}
}

// logWarnings logs git's "warning:" lines.
func (s *Store) logWarnings(stderr string) {
	for line := range strings.SplitSeq(stderr, "\n") {
		if w, ok := strings.CutPrefix(strings.TrimSpace(line), "warning: "); ok {
			s.log.Warn("snapshot store: git warned", "warning", w)
		}
	}
}

// notIgnored returns those of list the ignore rules do not cover, asking
// ignoredOf (a git run) or ignoredOfPipeList (the long-lived one).
func (s *Store) notIgnored(ctx context.Context, list []repo.Skipped, ignoredOf func(context.Context, []string) ([]string, error)) ([]repo.Skipped, error) {
	if len(list) == 0 {
		return nil, nil
	}
	paths := make([]string, len(list))
	for i, k := range list {
		paths[i] = k.Path
	}
	ignored, err := ignoredOf(ctx, paths)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(k repo.Skipped) bool { return slices.Contains(ignored, k.Path) }), nil
}

// modeLines are the permission lines of a snapshot's message: the files
// and directories of tree whose permissions git does not keep (keptMode),
// sorted, at most repo.MaxListedModes of them.
func (s *Store) modeLines(ctx context.Context, tree string, modes map[string]fs.FileMode) (string, error) {
	if len(modes) == 0 {
		return "", nil
	}
	out, err := s.git.Run(ctx, repo.Call{Args: []string{"ls-tree", "-r", "-t", "-z", "--name-only", "--full-tree", tree}})
	if err != nil {
		return "", fmt.Errorf("snapshot of %s: %w", s.work, err)
	}
	held := map[string]fs.FileMode{}
	for p := range strings.SplitSeq(string(out), "\x00") {
		if m, ok := modes[p]; ok {
			held[p] = m
		}
	}
	return repo.FormatModes(held), nil
}

// forceAdd adds the files of paths that exist in the workdir as files or
// links (not through a link, not over the size limit) to the private
// index, whatever the ignore rules say.
func (s *Store) forceAdd(ctx context.Context, paths []string) error {
	var list bytes.Buffer
	for _, p := range paths {
		if _, big := s.oversized[p]; big || s.symlinkOnPath(p, false) != "" {
			continue
		}
		fi, err := os.Lstat(filepath.Join(s.work, filepath.FromSlash(p)))
		if err != nil || !(fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0) {
			continue
		}
		if s.opt.MaxFileBytes >= 0 && fi.Size() > s.opt.MaxFileBytes {
			continue
		}
		list.WriteString(p)
		list.WriteByte(0)
	}
	if list.Len() == 0 {
		return nil
	}
	_, err := s.git.Run(ctx, repo.Call{Args: []string{"add", "-f", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"},
		Stdin: &list, InWork: true})
	if err != nil {
		if _, ok := unreadableFiles(err); !ok {
			return fmt.Errorf("snapshot of %s: %w", s.work, err)
		}
	}
	return nil
}

// needsIgnoreFix says whether tracked files may have become ignored: at
// the first Take after Open (the rules may have changed while the daemon
// was away) and whenever a .gitignore changed.
func (s *Store) needsIgnoreFix(ignoreFileChanged bool) bool {
	if s.fixIgnored {
		s.fixIgnored = false
		return true
	}
	return ignoreFileChanged
}

// diffCounts are the files added, modified and deleted between two
// trees, and whether a .gitignore is among them.
type diffCounts struct {
	added, modified, deleted int
	ignoreFile               bool
}

func (c *diffCounts) count(status byte, p string) {
	switch status {
	case 'A':
		c.added++
	case 'D':
		c.deleted++
	default:
		c.modified++
	}
	if p == ".gitignore" || strings.HasSuffix(p, "/.gitignore") {
		c.ignoreFile = true
	}
}

// diffCount counts what changed between two trees (git diff-tree --raw),
// reading git's output as it comes: a first snapshot of 100,000 files
// lists them all, and none of it needs keeping.
func (s *Store) diffCount(ctx context.Context, from, to string) (diffCounts, error) {
	var counts diffCounts
	err := s.repo.DiffTreeEach(ctx, from, to, nil, func(c repo.Change) { counts.count(c.Status, c.Path) })
	return counts, err
}

// dropIgnored removes from the private index the tracked files the ignore
// rules now cover, but those of keep, and reports whether there were any.
func (s *Store) dropIgnored(ctx context.Context, keep []string) (bool, error) {
	out, err := s.git.Run(ctx, repo.Call{Args: []string{"ls-files", "-z", "-c", "-i", "--exclude-standard"}, InWork: true})
	if err != nil {
		return false, fmt.Errorf("snapshot of %s: %w", s.work, err)
	}
	if len(keep) > 0 {
		kept := make(map[string]bool, len(keep))
		for _, p := range keep {
			kept[p] = true
		}
		var rest []byte
		for p := range bytes.SplitSeq(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
			if len(p) > 0 && !kept[string(p)] {
				rest = append(append(rest, p...), 0)
			}
		}
		out = rest
	}
	if len(out) == 0 {
		return false, nil
	}
	if _, err := s.git.Run(ctx, repo.Call{Args: []string{"update-index", "-z", "--force-remove", "--stdin"},
		Stdin: bytes.NewReader(out), InWork: true}); err != nil {
		return false, fmt.Errorf("snapshot of %s: %w", s.work, err)
	}
	return true, nil
}

// excludeOversized brings the list of files skipped for their size up to
// date: written to the store's core.excludesFile (so git add -A leaves
// them out without reading them) and removed from the private index when
// they were tracked before they grew. A Take from what changed (fast)
// asks the long-lived check-ignore and leaves the index alone: it stages
// without it, and syncIndex later brings the index to what it staged.
func (s *Store) excludeOversized(ctx context.Context, over map[string]int64, fast bool) error {
	// Big files that the ignore rules leave out anyway are not "skipped":
	// they would never be in a snapshot. Each is asked about once (again
	// when its size changes).
	var unknown []string
	bigIgnored := map[string]int64{}
	for p, n := range over {
		if m, ok := s.oversized[p]; ok && m == n {
			continue
		}
		if m, ok := s.bigIgnored[p]; ok && m == n {
			bigIgnored[p] = n
			delete(over, p)
			continue
		}
		if _, ok := s.oversized[p]; !ok {
			unknown = append(unknown, p)
		}
	}
	if len(unknown) > 0 {
		ignoredOf := s.ignoredOf
		if fast {
			ignoredOf = s.pipes.IgnoredList
		}
		ignored, err := ignoredOf(ctx, unknown)
		if err != nil {
			return err
		}
		for _, p := range ignored {
			bigIgnored[p] = over[p]
			delete(over, p)
		}
	}
	s.bigIgnored = bigIgnored

	var fresh bytes.Buffer
	var repos []string
	changed := len(over) != len(s.oversized)
	for p, n := range over {
		if _, ok := s.oversized[p]; !ok {
			changed = true
			fresh.WriteString(p)
			fresh.WriteByte(0)
			if n == repoSize {
				repos = append(repos, p)
			}
		}
	}
	if len(repos) > 0 && !fast {
		// A directory that became a repository: the files tracked in it
		// leave the index (git add -A would keep them, and update-index
		// takes files, not directories).
		out, err := s.git.Run(ctx, repo.Call{Args: append([]string{"ls-files", "-z", "-c", "--"}, repos...), InWork: true})
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", s.work, err)
		}
		fresh.Write(out)
	}
	if changed {
		var b strings.Builder
		b.WriteString("# files over the snapshot size limit, written by continuityd\n")
		for _, p := range sortedKeys(over) {
			if over[p] == repoSize {
				b.WriteString("/" + repo.EscapeGlob(p) + "/\n")
			} else {
				b.WriteString("/" + repo.EscapeGlob(p) + "\n")
			}
		}
		if err := repo.WriteIfChanged(filepath.Join(s.opt.Dir, repo.OversizedFile), []byte(b.String())); err != nil {
			return fmt.Errorf("snapshot store: %w", err)
		}
	}
	if fresh.Len() > 0 && !fast {
		// Tracked before it grew: git add -A would read it again.
		if _, err := s.git.Run(ctx, repo.Call{Args: []string{"update-index", "-z", "--force-remove", "--stdin"},
			Stdin: &fresh, InWork: true}); err != nil {
			return fmt.Errorf("snapshot of %s: %w", s.work, err)
		}
	}
	s.oversized = over
	return nil
}

// ignoredOf returns those of paths the ignore rules cover (the size
// exclusions themselves not counted).
func (s *Store) ignoredOf(ctx context.Context, paths []string) ([]string, error) {
	var in bytes.Buffer
	for _, p := range paths {
		in.WriteString(p)
		in.WriteByte(0)
	}
	args := []string{"-c", "core.excludesFile=/dev/null", "check-ignore", "-z", "--no-index", "--stdin"}
	// check-ignore refuses literal pathspec magic; it matches paths, not
	// patterns, anyway.
	out, err := s.git.Run(ctx, repo.Call{Args: args, Stdin: &in, InWork: true, Env: []string{"GIT_LITERAL_PATHSPECS=0"}})
	var ge *repo.GitError
	if errors.As(err, &ge) && len(out) == 0 && ge.Stderr == "" {
		return nil, nil // exit 1: none ignored
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", s.work, err)
	}
	var ignored []string
	for p := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if p != "" {
			ignored = append(ignored, p)
		}
	}
	return ignored, nil
}

// unreadableFiles reads the files git add --ignore-errors could not add
// from its error; ok is false when git failed for another reason.
func unreadableFiles(err error) ([]repo.Skipped, bool) {
	var ge *repo.GitError
	if !errors.As(err, &ge) {
		return nil, false
	}
	var list []repo.Skipped
	for line := range strings.SplitSeq(ge.Stderr, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "", line == "fatal: adding files failed", strings.HasPrefix(line, "warning:"):
		case strings.HasPrefix(line, "error: unable to index file '"):
			list = append(list, repo.Skipped{Path: strings.TrimSuffix(strings.TrimPrefix(line, "error: unable to index file '"), "'"), Reason: repo.ReasonUnreadable})
		case strings.HasPrefix(line, "error: unable to add '") && strings.HasSuffix(line, "' to index"):
			p := strings.TrimSuffix(strings.TrimPrefix(line, "error: unable to add '"), "' to index")
			list = append(list, repo.Skipped{Path: p, Reason: repo.ReasonUnreadable})
		case strings.HasPrefix(line, "error: open(\""):
			p, _, _ := strings.Cut(strings.TrimPrefix(line, "error: open(\""), "\"):")
			list = append(list, repo.Skipped{Path: p, Reason: repo.ReasonUnreadable})
		case strings.HasPrefix(line, "error: "):
		default:
			return nil, false
		}
	}
	if len(list) == 0 {
		return nil, false // it failed, and named no file
	}
	// git names a file twice (open, then unable to index): keep one.
	slices.SortFunc(list, func(a, b repo.Skipped) int { return strings.Compare(a.Path, b.Path) })
	list = slices.CompactFunc(list, func(a, b repo.Skipped) bool { return a.Path == b.Path })
	return list, true
}

// commit makes the staged tree a snapshot unless it equals the newest.
func (s *Store) commit(ctx context.Context, st *staged, trigger string, seq uint64) (repo.Snapshot, bool, error) {
	if s.newest.N > 0 && st.tree == s.newest.Tree && st.modes == s.newestModes {
		return s.newest, false, nil
	}
	t := time.Now()
	snap := repo.Snapshot{
		Time:    s.now().UTC(),
		Trigger: trigger,
		Seq:     seq,
		Parent:  s.newest.ID,
		Skipped: len(st.skipped),
		Tree:    st.tree,

		Conversation: s.conversationNow(),
		N:            s.newest.N + 1,
	}
	snap.Added, snap.Modified, snap.Deleted = st.counts.added, st.counts.modified, st.counts.deleted
	// No git parent: every snapshot is a root commit, its parent is in the
	// metadata, so retention drops old snapshots by deleting their refs,
	// without rewriting (and renaming) the ones it keeps. The commit is
	// the one `git commit-tree` would write (TestCommitObjectIsGits).
	message := repo.Message(snap, st.skipped, st.modes)
	id, err := s.writeObject("commit", repo.CommitObject(st.tree, snap.Time.Unix(), message))
	if err == nil {
		err = s.finishTakePack()
	}
	if err != nil {
		return repo.Snapshot{}, false, fmt.Errorf("snapshot of %s: %w", s.work, err)
	}
	snap.ID = id.String()
	s.reach(pointCommit)
	// The ref is made last, atomically (a lock file renamed into place),
	// and never over one that exists.
	before, stamped := s.repo.Stamp()
	err = s.repo.CreateRef(repo.RefName(snap.N), id, func() { s.reach(pointRefLocked) })
	if err != nil {
		s.repo.ForgetList()
		return repo.Snapshot{}, false, fmt.Errorf("snapshot of %s: %w", s.work, err)
	}
	s.repo.ListTaken(snap.ID, st.tree, message, before, stamped)
	s.lastChanges.Store(nil)
	if st.changes != nil {
		s.lastChanges.Store(&changeSet{from: s.newest.Tree, to: st.tree, list: treeChanges(st.changes)})
	}
	s.newest, s.newestModes = snap, st.modes
	s.newestDetail.Store(nil)
	if st.files != nil {
		s.newestDetail.Store(detailOf(snap, st))
	}
	s.gc.Made(st.added)
	st.took.Commit = time.Since(t)
	return snap, true, nil
}

// detailOf is what Show answers for the snapshot a Take just made from
// st, as it would read it back from the store.
func detailOf(snap repo.Snapshot, st *staged) *Detail {
	d := &Detail{Snapshot: snapshotOf(snap, Timings{}), SkippedFiles: []Skipped{}, Files: fileChangesOf(st.files)}
	if n := len(st.skipped); n > repo.MaxListedSkipped {
		d.SkippedFiles, d.SkippedMore = skippedOf(st.skipped[:repo.MaxListedSkipped]), n-repo.MaxListedSkipped
	} else if n > 0 {
		d.SkippedFiles = skippedOf(st.skipped)
	}
	if len(d.Files) > MaxShowFiles {
		d.Files, d.FilesCut = d.Files[:MaxShowFiles], true
	}
	if len(d.Files) == 0 {
		d.Files = nil // as Show reads a snapshot with no file changed (permissions only)
	}
	return d
}
