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
