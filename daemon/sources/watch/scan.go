package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/fsnotify/fsnotify"

	"github.com/continuityd/continuityd/internal/safefile"
	"github.com/continuityd/continuityd/internal/termsafe"
)

type scanMode uint8

const (
	modeInitial scanMode = iota // at start: watch, report nothing
	modeNew                     // a new directory: watch, report every file
	modeRescan                  // after an overflow: reconcile, report files modified since rescanSince
	modeResync                  // after a .gitignore change: reconcile, report nothing
)

func (m scanMode) reconcile() bool { return m == modeRescan || m == modeResync }

// start places the initial watches.
func (w *Watcher) start() {
	w.findOuter()
	d := w.watch(nil, "", w.root, "", kindWork)
	if d == nil {
		return
	}
	w.rootDir = d
	w.scan(d, modeInitial)
}

// add places one fsnotify watch.
func (w *Watcher) add(path string) error {
	if w.addHook != nil {
		if err := w.addHook(path); err != nil {
			return err
		}
	}
	return w.fw.Add(path)
}

// watch adds the watch for a directory and its state; nil when that failed.
func (w *Watcher) watch(parent *dirInfo, name, path, rel string, kind dirKind) *dirInfo {
	if err := w.add(path); err != nil {
		w.addFailed(path, err)
		return nil
	}
	d := &dirInfo{name: name, path: path, rel: rel, kind: kind, parent: parent}
	if parent != nil {
		parent.child(name, d)
		delete(parent.skipped, name)
		if kind == kindGitRefs {
			d.git = parent.git
		}
	}
	w.dirs[path] = d
	w.st.dirs.Add(1)
	return d
}

// addFailed handles a failed Add: running out of inotify watches degrades
// the Watcher (one log line), anything else skips the directory.
func (w *Watcher) addFailed(path string, err error) {
	w.st.watchErrs.Add(1)
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		w.blind = true // a directory of the tree is not watched
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EMFILE):
		if w.limitLogged {
			return
		}
		w.limitLogged = true
		limit := "unknown"
		if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
			limit = strings.TrimSpace(string(b))
		}
		w.log.Error("watch: inotify watch limit reached: raise fs.inotify.max_user_watches "+
			"(sudo sysctl -w fs.inotify.max_user_watches=524288; persist it in /etc/sysctl.d/); "+
			"directories past the limit are not watched",
			"root", w.root, "dir", path, "max_user_watches", limit, "err", err)
		w.setDegraded("inotify watch limit reached: raise fs.inotify.max_user_watches " +
			"(sudo sysctl -w fs.inotify.max_user_watches=524288); some directories are not watched")
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		// Gone before it could be watched; its removal is reported by its parent.
	case errors.Is(err, fs.ErrPermission):
		w.log.Debug("watch: cannot watch directory", "dir", path, "err", err)
		w.unwatchedDir(path, err)
	default:
		w.log.Warn("watch: cannot watch directory", "dir", path, "err", err)
		w.unwatchedDir(path, err)
	}
}

// unwatchedDir notes a directory of the tree that cannot be watched (too
// deep for the kernel's path limit, unreadable): changes below it are not
// seen, so the Watcher is degraded, saying how many directories and why
// for the first one (its path cut to maxShownDir characters). The watch
// limit's reason, which says what to do, is left in place.
func (w *Watcher) unwatchedDir(path string, err error) {
	w.unwatched++
	if w.limitLogged {
		return
	}
	if w.unwatched == 1 {
		rel := path
		if r, ok := strings.CutPrefix(path, w.root+string(filepath.Separator)); ok {
			rel = r
		}
		if n := utf8.RuneCountInString(rel); n > maxShownDir {
			rs := []rune(rel)
			rel = fmt.Sprintf("%s…%s (%d characters)", string(rs[:maxShownDir/2]), string(rs[n-maxShownDir/2:]), n)
		}
		why := err.Error() // fsnotify's error names the whole path; the errno says why
		var errno syscall.Errno
		if errors.As(err, &errno) {
			why = errno.Error()
		}
		w.firstUnwatched = termsafe.Line(rel) + ": " + termsafe.Line(why)
	}
	what := "a directory cannot be watched"
	if w.unwatched > 1 {
		what = fmt.Sprintf("%d directories cannot be watched", w.unwatched)
	}
	w.setDegraded(what + "; changes below are not seen (" + w.firstUnwatched + ")")
}

// maxShownDir bounds the path of an unwatched directory in the reason
// status shows.
const maxShownDir = 120

// drop forgets a directory and everything below it.
func (w *Watcher) drop(d *dirInfo) {
	for _, c := range d.children {
		w.drop(c)
	}
	if w.dirs[d.path] == d {
		delete(w.dirs, d.path)
		w.st.dirs.Add(-1)
		_ = w.fw.Remove(d.path) // already gone when the directory was removed
	}
	if d.parent != nil && d.parent.children[d.name] == d {
		delete(d.parent.children, d.name)
	}
	if len(d.external) > 0 {
		w.teardownExternal(d)
	}
	delete(w.resyncPending, d)
	if d == w.rootDir {
		w.rootDir = nil
	}
	w.dropped[w.droppedI] = d.path
	w.droppedI = (w.droppedI + 1) % len(w.dropped)
}

func (w *Watcher) recentlyDropped(path string) bool {
	return slices.Contains(w.dropped[:], path)
}

func (w *Watcher) skip(parent *dirInfo, name string) {
	if parent.skipped == nil {
		parent.skipped = map[string]bool{}
	}
	parent.skipped[name] = true
	w.st.ignored.Add(1)
}

// ignored applies Options.Ignore, then the .gitignore files of the tree from
// parent up to Root, then those above Root; rel is relative to Root and its
// ancestors are not ignored (they are watched).
func (w *Watcher) ignored(parent *dirInfo, rel string, isDir bool) bool {
	if w.extra != nil {
		if m, ign := w.extra.check(rel, isDir); m {
			return ign
		}
	}
	for d := parent; d != nil; d = d.parent {
		if d.rules != nil {
			sub := rel
			if d.rel != "" {
				sub = rel[len(d.rel)+1:]
			}
			if m, ign := d.rules.check(sub, isDir); m {
				return ign
			}
		}
	}
	for _, o := range w.outer {
		if m, ign := o.rules.check(o.prefix+rel, isDir); m {
			return ign
		}
	}
	return false
}

func (w *Watcher) dirIgnored(parent *dirInfo, name, rel string) bool {
	return w.ignoreDirs[name] || w.ignored(parent, rel, true)
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func readDir(path string) ([]fs.DirEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1) // unsorted: cheaper than os.ReadDir
}

// scan reads a watched directory: it watches the subdirectories not yet
// watched (and scans them), and, by mode, reports files and reconciles the
// state with what is on disk.
func (w *Watcher) scan(d *dirInfo, mode scanMode) {
	entries, err := readDir(d.path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			w.log.Debug("watch: cannot read directory", "dir", d.path, "err", err)
		}
		return
	}
	switch d.kind {
	case kindGit:
		w.scanGit(d, entries, mode)
	case kindGitRefs:
		w.scanRefs(d, entries, mode)
	default:
		w.scanWork(d, entries, mode)
	}
}

// scanWork scans a directory of the work tree.
func (w *Watcher) scanWork(d *dirInfo, entries []fs.DirEntry, mode scanMode) {
	w.scanMeta(d, entries, mode)
	var present map[string]bool
	if mode.reconcile() {
		present = make(map[string]bool, len(entries))
	}
	for _, e := range entries {
		name := e.Name()
		if name == ".git" {
			continue
		}
		if present != nil {
			present[name] = true
		}
		if e.IsDir() {
			w.scanSubdir(d, name, mode)
		} else {
			w.scanFile(d, e, mode)
		}
	}
	if present != nil {
		w.forgetAbsent(d, present)
	}
}

// scanMeta reloads a work directory's ignore rules (its .gitignore and, in
// a repository, .git/info/exclude) and follows its .git entry, or, when
// reconciling, forgets the git metadata of a .git that is gone.
func (w *Watcher) scanMeta(d *dirInfo, entries []fs.DirEntry, mode scanMode) {
	hasIgnore, hasGit, gitIsDir := false, false, false
	for _, e := range entries {
		switch e.Name() {
		case ".gitignore":
			hasIgnore = true
		case ".git":
			hasGit, gitIsDir = true, e.IsDir()
		}
	}
	if hasIgnore || gitIsDir {
		d.rules = w.loadRules(d.path, gitIsDir)
	} else {
		d.rules = nil
	}
	if hasGit {
		ext := w.gitFor(d.path, joinPath(d.path, ".git"), gitIsDir, d, mode)
		for _, p := range ext {
			if !slices.Contains(d.external, p) {
				d.external = append(d.external, p)
			}
		}
	} else if mode.reconcile() {
		if c := d.children[".git"]; c != nil {
			w.drop(c)
		}
		w.teardownExternal(d)
	}
}

// scanSubdir watches and scans the subdirectory name of d, or skips it when
// it is ignored; an ignored one watched already is dropped when
// reconciling.
func (w *Watcher) scanSubdir(d *dirInfo, name string, mode scanMode) {
	rel := joinRel(d.rel, name)
	if c := d.children[name]; c != nil {
		if !mode.reconcile() {
			return // watched already (a Create raced the scan)
		}
		if w.dirIgnored(d, name, rel) {
			w.drop(c)
			w.skip(d, name)
			return
		}
		w.scan(c, mode)
		return
	}
	if w.dirIgnored(d, name, rel) {
		w.skip(d, name)
		return
	}
	if c := w.watch(d, name, joinPath(d.path, name), rel, kindWork); c != nil {
		w.scan(c, mode)
	}
}

// scanFile reports the file e of d as mode says: every file in a new
// directory, the files modified since rescanSince in a rescan.
func (w *Watcher) scanFile(d *dirInfo, e fs.DirEntry, mode scanMode) {
	name := e.Name()
	if c := d.children[name]; c != nil && mode.reconcile() {
		w.drop(c) // a directory replaced by a file
	}
	switch mode {
	case modeNew:
		rel := joinRel(d.rel, name)
		if !isEditorTemp(name) && !w.ignored(d, rel, false) {
			w.record(rel, w.scanNow.UnixNano(), w.scanNow)
		} else {
			w.hide(rel)
		}
	case modeRescan:
		if isEditorTemp(name) {
			return
		}
		info, err := e.Info()
		if err != nil || info.ModTime().Before(w.rescanSince) {
			return
		}
		rel := joinRel(d.rel, name)
		if !w.ignored(d, rel, false) {
			w.record(rel, info.ModTime().UnixNano(), w.scanNow)
		}
	}
}

// forgetAbsent drops the subdirectories of d and forgets the skipped names
// that are not present any more.
func (w *Watcher) forgetAbsent(d *dirInfo, present map[string]bool) {
	for name, c := range d.children {
		if c.kind == kindWork && !present[name] {
			w.drop(c)
		}
	}
	for name := range d.skipped {
		if !present[name] {
			delete(d.skipped, name)
		}
	}
}

// scanGit watches the refs/ tree of a git directory (nothing else in it).
func (w *Watcher) scanGit(g *dirInfo, entries []fs.DirEntry, mode scanMode) {
	for _, e := range entries {
		if e.Name() != "refs" || !e.IsDir() {
			continue
		}
		if c := g.children["refs"]; c != nil {
			if mode.reconcile() {
				w.scan(c, mode)
			}
		} else if c := w.watch(g, "refs", joinPath(g.path, "refs"), "", kindGitRefs); c != nil {
			w.scan(c, mode)
		}
	}
	if mode == modeNew || mode == modeRescan {
		w.gitTouched(g)
	}
}

// scanRefs watches a refs/ directory's subdirectories.
func (w *Watcher) scanRefs(r *dirInfo, entries []fs.DirEntry, mode scanMode) {
	var present map[string]bool
	if mode.reconcile() {
		present = make(map[string]bool, len(entries))
	}
	files := false
	for _, e := range entries {
		name := e.Name()
		if present != nil {
			present[name] = true
		}
		if !e.IsDir() {
			files = files || !strings.HasSuffix(name, ".lock")
			continue
		}
		if c := r.children[name]; c != nil {
			if mode.reconcile() {
				w.scan(c, mode)
			}
		} else if c := w.watch(r, name, joinPath(r.path, name), "", kindGitRefs); c != nil {
			w.scan(c, mode)
		}
	}
	if files && mode == modeNew {
		w.gitTouched(r.git)
	}
	if present != nil {
		for name, c := range r.children {
			if !present[name] {
				w.drop(c)
			}
		}
	}
}

// gitFor watches the git metadata of worktree repo, whose ".git" entry is
// dotgit: a directory, or a file naming the gitdir (linked worktrees,
// submodules). parent is the worktree's state when it is in the tree. It
// returns the git directories watched apart from the tree, which the
// worktree releases when it goes (teardownExternal).
func (w *Watcher) gitFor(repo, dotgit string, isDir bool, parent *dirInfo, mode scanMode) []string {
	if isDir {
		w.gitDir(dotgit, repo, parent, mode)
		return nil
	}
	gitdir, common, err := resolveGitFile(w.o.Opener, dotgit)
	if err != nil {
		w.log.Debug("watch: unreadable .git file", "path", dotgit, "err", err)
		return nil
	}
	var ext []string
	for _, p := range []string{gitdir, common} {
		if slices.Contains(ext, p) {
			continue
		}
		if w.gitDir(p, repo, nil, mode) != nil {
			ext = append(ext, p)
		}
	}
	return ext
}

// gitDir watches a git directory (and its refs/) for repo.
func (w *Watcher) gitDir(path, repo string, parent *dirInfo, mode scanMode) *dirInfo {
	g := w.dirs[path]
	if g != nil && g.kind != kindGit {
		return nil
	}
	fresh := g == nil
	if fresh {
		if g = w.watch(parent, ".git", path, "", kindGit); g == nil {
			return nil
		}
		g.git = g
	} else if parent != nil && g.parent == nil { // watched for a linked worktree first
		g.parent = parent
		parent.child(".git", g)
	}
	if !slices.Contains(g.repos, repo) {
		g.repos = append(g.repos, repo)
	}
	if fresh || mode.reconcile() {
		w.scan(g, mode)
	}
	return g
}

// teardownExternal releases the git directories a worktree had watched
// apart from the tree.
func (w *Watcher) teardownExternal(d *dirInfo) {
	for _, p := range d.external {
		g := w.dirs[p]
		if g == nil || g.kind != kindGit {
			continue
		}
		g.repos = slices.DeleteFunc(g.repos, func(r string) bool { return r == d.path })
		if len(g.repos) == 0 && g.parent == nil {
			w.drop(g)
		}
	}
	d.external = nil
}

// resolveGitFile reads a ".git" file ("gitdir: <path>") through op and
// returns the gitdir and the common dir (they differ for a linked
// worktree). A gitdir whose commondir op may not read (a repository the
// tree's owner cannot read) is an error: it is not watched.
func resolveGitFile(op safefile.Opener, dotgit string) (gitdir, common string, err error) {
	b, err := safefile.ReadFileWith(op, dotgit, true, maxGitFile)
	if err != nil {
		return "", "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", "", errors.New("no gitdir line")
	}
	gitdir = strings.TrimSpace(rest)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(filepath.Dir(dotgit), gitdir)
	}
	gitdir = filepath.Clean(gitdir)
	if r, err := filepath.EvalSymlinks(gitdir); err == nil {
		gitdir = r
	}
	common = gitdir
	b, err = safefile.ReadFileWith(op, gitdir+"/commondir", true, maxGitFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	if err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitdir, c)
		}
		common = filepath.Clean(c)
		if r, err := filepath.EvalSymlinks(common); err == nil {
			common = r
		}
	}
	return gitdir, common, nil
}

// findOuter handles a Root inside a repository: the repository's git
// directory is watched (OnGitEvent gets the repository root) and the
// .gitignore files between the repository root and Root apply.
func (w *Watcher) findOuter() {
	if _, err := os.Lstat(w.root + "/.git"); err == nil {
		return // Root is a worktree root itself
	}
	var rules []outerRules
	for dir := filepath.Dir(w.root); ; dir = filepath.Dir(dir) {
		fi, gitErr := os.Lstat(filepath.Join(dir, ".git"))
		isRepo := gitErr == nil
		if rs := loadRules(w.o.Opener, dir, isRepo && fi.IsDir()); rs != nil {
			rel, err := filepath.Rel(dir, w.root)
			if err == nil {
				rules = append(rules, outerRules{prefix: filepath.ToSlash(rel) + "/", rules: rs})
			}
		}
		if isRepo {
			w.outer = rules
			w.gitFor(dir, filepath.Join(dir, ".git"), fi.IsDir(), nil, modeInitial)
			return
		}
		if dir == filepath.Dir(dir) {
			return
		}
	}
}

// handle processes one fsnotify event.
func (w *Watcher) handle(ev fsnotify.Event) {
	w.st.events.Add(1)
	name := ev.Name
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return
	}
	dirPath, base := name[:i], name[i+1:]
	if i == 0 {
		dirPath = "/"
	}
	parent := w.dirs[dirPath]
	if parent == nil {
		// The event of a watched directory whose parent is not watched
		// (Root, a git directory outside the tree), or of a watch dropped.
		if d := w.dirs[name]; d != nil && ev.Has(fsnotify.Remove|fsnotify.Rename) {
			if d == w.rootDir {
				w.log.Warn("watch: the work directory was removed or renamed; nothing is watched", "root", w.root)
				w.setDegraded("work directory removed or renamed: " + w.root)
			}
			w.drop(d)
		}
		return
	}
	switch parent.kind {
	case kindGit:
		w.st.ignored.Add(1)
		w.gitEvent(parent, name, base, ev)
		return
	case kindGitRefs:
		w.st.ignored.Add(1)
		w.refsEvent(parent, name, base, ev)
		return
	}
	if ev.Op&^fsnotify.Chmod == 0 {
		// Attributes (also sent before a removal): not work, but a
		// snapshot records the executable bit.
		if base != ".git" {
			w.hide(name[w.rootPrefix:])
		}
		return
	}
	if base == ".git" {
		w.st.ignored.Add(1)
		w.dotGitEvent(parent, name, ev)
		return
	}
	rel := name[w.rootPrefix:]
	now := time.Now()
	if ev.Has(fsnotify.Create) {
		if parent.children[base] != nil {
			return // a directory found by a scan already
		}
		// Directory or file is settled at the end of the batch
		// (flushCreates): a Write meanwhile says file and saves an lstat.
		if _, dup := w.createIdx[name]; !dup {
			w.createIdx[name] = len(w.creates)
			w.creates = append(w.creates, pendingCreate{parent: parent, name: name, base: base, rel: rel, t: now})
		}
		return
	}
	if i, ok := w.createIdx[name]; ok {
		delete(w.createIdx, name)
		if ev.Has(fsnotify.Write) {
			w.creates[i].done = true // a file: recorded with this Write
		} else {
			w.settleCreate(&w.creates[i])
		}
	}
	if ev.Has(fsnotify.Remove | fsnotify.Rename) {
		if d := parent.children[base]; d != nil && d.kind == kindWork {
			w.drop(d)
			w.record(rel+"/", now.UnixNano(), now)
			return
		}
		if parent.skipped[base] {
			delete(parent.skipped, base)
			w.st.ignored.Add(1)
			return
		}
		if w.recentlyDropped(name) {
			// The second event of a directory moved away, or a file of
			// that name gone since: a snapshot looks again.
			w.hide(rel)
			return
		}
	}
	w.fileChanged(parent, base, rel, now)
}

// pendingCreate is a Create event whose type is not known yet.
type pendingCreate struct {
	parent          *dirInfo
	name, base, rel string
	t               time.Time
	done            bool
}

// flushCreates settles the Create events of the batch.
func (w *Watcher) flushCreates() {
	for i := range w.creates {
		if c := &w.creates[i]; !c.done {
			w.settleCreate(c)
		}
	}
	if cap(w.creates) > 1024 {
		w.creates = nil
	} else {
		clear(w.creates)
		w.creates = w.creates[:0]
	}
	clear(w.createIdx)
}

// settleCreate handles a created path: a directory is watched and scanned
// (its files are reported), a file is reported.
func (w *Watcher) settleCreate(c *pendingCreate) {
	c.done = true
	parent := c.parent
	if w.dirs[parent.path] != parent {
		return // its directory went in the meantime
	}
	fi, err := os.Lstat(c.name)
	if err != nil || !fi.IsDir() {
		w.fileChanged(parent, c.base, c.rel, c.t)
		return
	}
	if parent.children[c.base] != nil {
		return
	}
	if w.dirIgnored(parent, c.base, c.rel) {
		w.skip(parent, c.base)
		return
	}
	if d := w.watch(parent, c.base, c.name, c.rel, kindWork); d != nil {
		w.scanNow = c.t
		w.scan(d, modeNew)
	}
}

// fileChanged records a change of a file (or of a path that is gone)
// unless it is ignored.
func (w *Watcher) fileChanged(parent *dirInfo, base, rel string, now time.Time) {
	if isEditorTemp(base) {
		w.st.ignored.Add(1)
		w.hide(rel)
		return
	}
	if base == ".gitignore" {
		w.reloadRules(parent)
	}
	if w.ignored(parent, rel, false) {
		w.st.ignored.Add(1)
		w.hide(rel)
		return
	}
	w.record(rel, now.UnixNano(), now)
}

// reloadRules rereads a directory's .gitignore at once and schedules the
// reconciliation of its subtree (newly ignored directories lose their
// watches, newly included ones get them).
func (w *Watcher) reloadRules(d *dirInfo) {
	g := d.children[".git"]
	d.rules = w.loadRules(d.path, g != nil && g.kind == kindGit)
	w.resyncPending[d] = true
	w.touchMaint()
}

// dotGitEvent handles a ".git" entry of a work directory appearing,
// changing or going.
func (w *Watcher) dotGitEvent(d *dirInfo, name string, ev fsnotify.Event) {
	if d.rel != "" {
		w.hide(d.rel + "/") // a nested repository came or went: its directory changed whole
	}
	if ev.Has(fsnotify.Remove | fsnotify.Rename) {
		if c := d.children[".git"]; c != nil {
			w.drop(c)
		}
		w.teardownExternal(d)
		return
	}
	fi, err := os.Lstat(name)
	if err != nil {
		return
	}
	if fi.IsDir() {
		if d.children[".git"] == nil {
			w.gitDir(name, d.path, d, modeNew)
			w.reloadRules(d) // .git/info/exclude
		}
		return
	}
	w.teardownExternal(d)
	d.external = w.gitFor(d.path, name, false, d, modeNew)
}

// gitEvent handles an event in a git directory: HEAD and packed-refs
// matter, and refs/ appearing (git init).
func (w *Watcher) gitEvent(g *dirInfo, name, base string, ev fsnotify.Event) {
	if ev.Op&^fsnotify.Chmod == 0 {
		return
	}
	switch base {
	case "HEAD", "packed-refs":
		w.gitTouched(g)
	case "refs":
		if ev.Has(fsnotify.Remove | fsnotify.Rename) {
			if c := g.children["refs"]; c != nil {
				w.drop(c)
			}
		} else if g.children["refs"] == nil {
			if fi, err := os.Lstat(name); err == nil && fi.IsDir() {
				if c := w.watch(g, "refs", name, "", kindGitRefs); c != nil {
					w.scan(c, modeNew)
				}
			}
		}
		w.gitTouched(g)
	}
}

// refsEvent handles an event under refs/: any ref file but a lock matters.
func (w *Watcher) refsEvent(r *dirInfo, name, base string, ev fsnotify.Event) {
	if ev.Op&^fsnotify.Chmod == 0 {
		return
	}
	if ev.Has(fsnotify.Remove | fsnotify.Rename) {
		if c := r.children[base]; c != nil {
			w.drop(c)
		}
	}
	if ev.Has(fsnotify.Create) && r.children[base] == nil {
		if fi, err := os.Lstat(name); err == nil && fi.IsDir() {
			if c := w.watch(r, base, name, "", kindGitRefs); c != nil {
				w.scan(c, modeNew)
			}
			return
		}
	}
	if strings.HasSuffix(base, ".lock") {
		return
	}
	w.gitTouched(r.git)
}

// rescan walks the whole tree after events were lost.
func (w *Watcher) rescan() {
	w.st.rescans.Add(1)
	now := time.Now()
	w.scanNow = now
	w.rescanSince = w.quietSince.Add(-rescanSlack)
	hadBatch := !w.b.first.IsZero()
	if w.rootDir == nil {
		if _, err := os.Stat(w.root); err == nil {
			w.rootDir = w.watch(nil, "", w.root, "", kindWork)
		}
	}
	if w.rootDir != nil {
		w.scan(w.rootDir, modeRescan)
	}
	var gits []*dirInfo
	for _, d := range w.dirs {
		if d.kind == kindGit {
			gits = append(gits, d)
		}
	}
	for _, g := range gits {
		if g.parent == nil && w.dirs[g.path] == g {
			w.scan(g, modeRescan)
		}
		w.gitTouched(g)
	}
	if hadBatch || !w.b.first.IsZero() {
		w.b.rescanned = true
	}
	w.b.lost = true // the rescan finds no removal: the next summary cannot vouch

}
