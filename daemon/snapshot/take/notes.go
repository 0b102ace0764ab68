package take

import (
	"maps"
	"sync"
)

// A snapshot from what changed.
//
// A Take re-adds the whole tree (the size walk and `git add -A`: an lstat
// of every file, twice) unless it is told what changed since the
// previous Take: the workdir watcher tells (NoteChanged), or says it
// cannot vouch (NoteUnknown). Then only the changed paths are looked at
// again: the size walk of those paths (a changed directory whole), `git
// ls-files` of them (what the private index holds there and the files
// there the ignore rules leave in) and `git add -A` of exactly those
// files. The rest of the private index is the previous Take's, which the
// watcher vouches for. A change git would see in any other way (an
// ignore file changed, too many paths) takes the full add.

// maxChangedPaths bounds the paths a Take looks at again one by one;
// past it the whole tree is added again (cheaper than a long pathspec).
const maxChangedPaths = 4096

// changeNotes are the paths changed since the previous Take, as the
// watcher reported them; unknown when it could not vouch for the tree,
// when no watcher follows it, and at the first Take after Open.
type changeNotes struct {
	paths   map[string]bool
	unknown bool
}

// Notes are what the watcher says changed in the workdir since the last
// Take. Safe from any goroutine, also while a Take runs.
type Notes struct {
	mu       sync.Mutex  // the watcher's side writes while a Take runs
	notes    changeNotes // paths changed since the last Take
	followed bool        // a watcher reports the changes (Follow)
}

// NewNotes are the notes of a store just opened: nothing is known to
// have changed or not.
func NewNotes() *Notes { return &Notes{notes: changeNotes{unknown: true}} }

// Follow tells the store that a watcher now reports every change of the
// workdir (NoteChanged, NoteUnknown): the next Take adds the whole tree
// (what changed before the watcher started is not known), the Takes
// after it look at the changed paths only. Call it once the watcher's
// watches are in place; Unfollow when it stops. Without Follow, every
// Take adds the whole tree.
func (n *Notes) Follow() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.followed = true
	n.notes = changeNotes{unknown: true}
}

// Unfollow tells the store that no watcher reports the changes any more:
// every Take adds the whole tree again.
func (n *Notes) Unfollow() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.followed = false
	n.notes = changeNotes{unknown: true}
}

// NoteChanged tells the store that paths (relative to the workdir, with
// "/"; a directory may end in "/") changed: the next Take looks at them
// again. Safe from any goroutine, also while a Take runs (the paths are
// then for the Take after it).
func (n *Notes) NoteChanged(paths []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.notes.unknown {
		return
	}
	if n.notes.paths == nil {
		n.notes.paths = map[string]bool{}
	}
	for _, p := range paths {
		if len(n.notes.paths) > maxChangedPaths {
			n.notes = changeNotes{unknown: true}
			return
		}
		n.notes.paths[p] = true
	}
}

// NoteUnknown tells the store that changes may have been missed (the
// watcher lost events, could not watch a directory, or has just started):
// the next Take adds the whole tree again.
func (n *Notes) NoteUnknown() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = changeNotes{unknown: true}
}

// take hands the notes gathered so far to a Take and starts new ones; a
// Take that fails gives them back (keep).
func (n *Notes) take() changeNotes {
	n.mu.Lock()
	defer n.mu.Unlock()
	taken := n.notes
	n.notes = changeNotes{unknown: !n.followed}
	return taken
}

// keep gives the notes of a failed Take back for the next one.
func (n *Notes) keep(failed changeNotes) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if failed.unknown || n.notes.unknown {
		n.notes = changeNotes{unknown: true}
		return
	}
	if n.notes.paths == nil {
		n.notes.paths = map[string]bool{}
	}
	maps.Copy(n.notes.paths, failed.paths)
}
