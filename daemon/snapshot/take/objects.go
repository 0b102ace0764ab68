package take

import "github.com/continuityd/continuityd/daemon/snapshot/repo"

// Objects written and read in process, for a Take from what changed.
//
// A git run costs a process start (several milliseconds of CPU on a slow
// machine) and a read of the whole private index (10 MB at 100,000
// files), so a burst of five edits that ran six of them cost more than
// `git add -A && git commit` itself. A Take from what changed therefore
// writes its few objects itself: its blobs, trees and commit go into one
// pack of the Take (takePack, in git's pack format: repo.PackWriter), put in
// place before its ref, rather than a loose object file each (a file
// created, often with its objects/xx directory, then renamed: most of a
// burst's CPU when it wrote loose objects). It makes its ref the way
// update-ref does (a lock file created exclusively, fsynced, renamed).
// What it reads (trees on the changed paths, the old side of a changed
// file for its line counts) it reads from a loose object (what a full
// add wrote), or else from one long-lived `git cat-file --batch` (packed
// objects), which finds a pack put in place after it started. The
// collector's repack merges these packs (gcEvery). Tests check every
// object against git's own (hash-object, commit-tree, ls-tree) and the
// whole result against a full `git add -A`.

// The points where a Take changes the store in process, in order: its
// blobs added to its pack (a Take from what changed), its trees, its
// commit written (the pack put in place, or a full add's loose commit),
// its ref's lock file. A kill at any of them leaves no snapshot listed
// (TestSIGKILLDuringSnapshot).
const (
	PointBlobs     = "blobs-written"
	PointTrees     = "trees-written"
	PointCommit    = "commit-written"
	PointRefLocked = "ref-locked"

	// A first snapshot's (first.go): its objects written to a
	// temporary pack, and the pack put in place (its index not yet).
	PointFirstObjects = "first-objects-written"
	PointFirstPacked  = "first-packed"
)

// takePack holds what a Take from what changed writes until its commit:
// the pack (started at the first object) and the trees written into it,
// which the Take may read again (fromChanged.modeLines) before they are
// in the store. indexBehind is the index's before the Take, put back if
// its pack is dropped: the index must never be synced to a tree not
// stored.
type takePack struct {
	w           *repo.PackWriter
	trees       map[repo.OID][]repo.TreeEntry
	indexBehind string
}

// takeObjects writes the new objects of a Take: into its pack while one
// is being collected (begin), else loose.
type takeObjects struct {
	repo  *repo.Repo
	index *privateIndex
	pack  *takePack        // the objects of the Take from what changed under way
	zw    repo.Compressors // reused for the objects a Take writes (loose or in its pack)
}

// begin starts collecting a Take's objects (write).
func (o *takeObjects) begin() {
	o.drop()
	o.pack = &takePack{trees: map[repo.OID][]repo.TreeEntry{}, indexBehind: o.index.behind}
}

// write stores a new object of a Take: into the Take's pack when one is
// being collected, else loose.
func (o *takeObjects) write(typ string, data []byte) (repo.OID, error) {
	if o.pack == nil {
		return o.repo.WriteLoose(typ, data, &o.zw)
	}
	if o.pack.w == nil {
		w, err := repo.NewPackWriter(o.repo.Dir(), 32, 32<<10, o.zw)
		if err != nil {
			return repo.OID{}, err
		}
		o.pack.w, o.zw = w, w.Compressors()
	}
	return o.pack.w.Add(typ, data)
}

// finish puts the Take's pack in place (when it wrote any object); the
// collecting ends.
func (o *takeObjects) finish() error {
	p := o.pack
	o.pack = nil
	if p == nil || p.w == nil {
		return nil
	}
	if err := p.w.Finish(); err != nil {
		p.w.Abort()
		o.index.behind = p.indexBehind
		return err
	}
	return nil
}

// drop drops the objects of a Take that made no snapshot (it failed,
// fell back to a full add, or found nothing new).
func (o *takeObjects) drop() {
	p := o.pack
	o.pack = nil
	if p == nil {
		return
	}
	if p.w != nil {
		p.w.Abort()
	}
	o.index.behind = p.indexBehind
}
