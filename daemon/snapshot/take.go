package snapshot

import (
	"context"
	"sync/atomic"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/take"
)

// Taking snapshots (take), and what the newest Take told of its snapshot.

// Take snapshots the workdir. When the tree is the same as the newest
// snapshot's, it makes none and returns the newest with false: no two
// snapshots hold the same tree, so a message given then is not recorded.
// trigger names the cause (lower case letters, digits, "_", "-", ".");
// seq is the residency seq the snapshot belongs to; opt, at most one,
// gives the snapshot its message.
func (s *Store) Take(ctx context.Context, trigger string, seq uint64, opt ...TakeOptions) (Snapshot, bool, error) {
	var note string
	for _, o := range opt {
		note = o.Message
	}
	snap, took, isNew, err := s.take.Take(ctx, trigger, seq, note)
	if err != nil {
		return Snapshot{}, false, err
	}
	return snapshotOf(snap, Timings(took)), isNew, nil
}

// TakeOptions are what a Take asked for by a person or an agent carries
// besides its trigger.
type TakeOptions struct {
	// Message is the snapshot's message (snapshot take --message), shown
	// in list and show. The caller has checked it (guard.DecodeTakeRequest):
	// the store writes it escaped into the snapshot's metadata line.
	Message string `json:"message,omitempty"`
}

// Progress says how far the Take under way got; safe from any goroutine,
// while a Take holds the store. A first snapshot of a large tree takes
// seconds: status and the log show it moving.
func (s *Store) Progress() Progress { return Progress(s.take.Progress()) }

// SetConversation gives the store where the conversation stands: each
// snapshot made from then on records what point returns as it is taken.
// point runs with the store's writer lock held and must not call the
// store.
func (s *Store) SetConversation(point func() Conversation) {
	s.take.SetConversation(func() repo.Conversation { return repo.Conversation(point()) })
}

// Follow tells the store that a watcher now reports every change of the
// workdir (NoteChanged, NoteUnknown): the next Take adds the whole tree
// (what changed before the watcher started is not known), the Takes
// after it look at the changed paths only. Call it once the watcher's
// watches are in place; Unfollow when it stops. Without Follow, every
// Take adds the whole tree.
func (s *Store) Follow() { s.notes.Follow() }

// Unfollow tells the store that no watcher reports the changes any more:
// every Take adds the whole tree again.
func (s *Store) Unfollow() { s.notes.Unfollow() }

// NoteChanged tells the store that paths (relative to the workdir, with
// "/"; a directory may end in "/") changed: the next Take looks at them
// again. Safe from any goroutine, also while a Take runs (the paths are
// then for the Take after it).
func (s *Store) NoteChanged(paths []string) { s.notes.NoteChanged(paths) }

// NoteUnknown tells the store that changes may have been missed (the
// watcher lost events, could not watch a directory, or has just started):
// the next Take adds the whole tree again.
func (s *Store) NoteUnknown() { s.notes.NoteUnknown() }

// recent is what the newest Take told of the snapshot it made, so that
// Show and Between answer for it without a git run.
type recent struct {
	// detail is Show's answer for the newest snapshot when its Take
	// counted the lines already (a snapshot from what changed); nil
	// otherwise.
	detail atomic.Pointer[Detail]
	// changes are the newest Take's changes against its parent, when it
	// listed them (Between).
	changes atomic.Pointer[changeSet]
}

// remember keeps what a Take made, as Show and Between would read it back.
func (r *recent) remember(m take.Made) {
	r.changes.Store(nil)
	if m.Changes != nil {
		r.changes.Store(&changeSet{from: m.From, to: m.Snapshot.Tree, list: treeChanges(m.Changes)})
	}
	r.detail.Store(nil)
	if m.Files != nil {
		r.detail.Store(detailOf(m))
	}
}

// detailOf is what Show answers for the snapshot a Take just made, as it
// would read it back from the store.
func detailOf(m take.Made) *Detail {
	d := &Detail{Snapshot: snapshotOf(m.Snapshot, Timings{}), SkippedFiles: []Skipped{}, Files: fileChangesOf(m.Files)}
	if n := len(m.Skipped); n > repo.MaxListedSkipped {
		d.SkippedFiles, d.SkippedMore = skippedOf(m.Skipped[:repo.MaxListedSkipped]), n-repo.MaxListedSkipped
	} else if n > 0 {
		d.SkippedFiles = skippedOf(m.Skipped)
	}
	if len(d.Files) > MaxShowFiles {
		d.Files, d.FilesCut = d.Files[:MaxShowFiles], true
	}
	if len(d.Files) == 0 {
		d.Files = nil // as Show reads a snapshot with no file changed (permissions only)
	}
	return d
}
