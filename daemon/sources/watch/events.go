package watch

// The events of the tree as fsnotify gives them: a file's change recorded
// (unless ignored), a directory created watched and scanned once the
// batch settles, a .gitignore change reloading the rules.

import (
	"os"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

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
