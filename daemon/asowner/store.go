package asowner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// Store is the daemon's side of a snapshot store the owner's worker
// hosts: the methods of *snapshot.Store, each a call to the worker (the
// views every resume and status asks are kept a moment: view.go). After
// the worker died, the next call opens the store again in the new one
// (and follows the watcher again if it did). The conversation point
// stays here: each Take and Restore carries where it stands.
type Store struct {
	w    *Worker
	opt  snapshot.Options
	tool *gittool.Tool // the git the store runs, as the daemon finds it; nil: none

	mu       sync.Mutex // guards the fields below
	id       uint64     // the store's number in the worker of generation gen
	gen      uint64
	followed bool

	conv   atomic.Pointer[func() snapshot.Conversation]
	closed atomic.Bool
	views  views // the view ops' latest answers
}

// quickCall bounds the calls that answer from memory (Newest, Progress,
// GCProblem, the watcher's notes): they are asked on status and resume,
// which must not hang on a worker that does.
const quickCall = 10 * time.Second

// OpenStore opens (or makes) the store opt names in the worker, as
// snapshot.Open would in process: an error leaves the agent degraded
// ["snapshots"]. opt.Logger and opt.Now stay here (the worker logs to the
// daemon's log through its stderr, and uses its own clock).
func (w *Worker) OpenStore(ctx context.Context, opt snapshot.Options) (*Store, error) {
	opt.Logger, opt.Now = nil, nil
	s := &Store{w: w, opt: opt}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, _, err := s.openLocked(ctx); err != nil {
		return nil, err
	}
	// The worker found git on the same PATH: the daemon's side of the
	// same binary, for what it runs as the owner itself (Tool).
	s.tool, _ = gittool.Find(ctx, opt.Git)
	return s, nil
}

// openLocked opens the store in the running worker when it was not open
// there yet, and returns it with its number there.
func (s *Store) openLocked(ctx context.Context) (*process, uint64, error) {
	p, err := s.w.process()
	if err != nil {
		return nil, 0, err
	}
	if s.gen == p.gen {
		return p, s.id, nil
	}
	s.views.changing(opOpen) // a new worker: the store as it reopens there
	var ans openAnswer
	if err := p.call(ctx, opOpen, request{Options: &s.opt}, &ans); err != nil {
		return nil, 0, err
	}
	if s.gen != 0 {
		s.w.log.Info("opened the snapshot store again in the owner's new worker", "store", s.opt.Dir)
	}
	s.id, s.gen = ans.Store, p.gen
	if s.followed {
		if err := p.call(ctx, opFollow, request{Store: s.id}, &empty{}); err != nil {
			return nil, 0, err
		}
	}
	return p, s.id, nil
}

// call runs op on the store in the worker, opening it there first when
// the worker is a new one.
func (s *Store) call(ctx context.Context, op string, req request, ans any) error {
	if s.closed.Load() {
		return snapshot.ErrClosed
	}
	s.mu.Lock()
	p, id, err := s.openLocked(ctx)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	req.Store = id
	s.views.changing(op)
	defer s.views.changing(op)
	return p.call(ctx, op, req, ans)
}

// quick is call for what answers from memory, bounded by quickCall.
func (s *Store) quick(op string, req request, ans any) error {
	ctx, cancel := context.WithTimeout(context.Background(), quickCall)
	defer cancel()
	return s.call(ctx, op, req, ans)
}

// conversation is where the conversation stands now, for a Take.
func (s *Store) conversation() *snapshot.Conversation {
	f := s.conv.Load()
	if f == nil || *f == nil {
		return nil
	}
	c := (*f)()
	return &c
}

// Dir is the store's directory (in the owner's part of the state
// directory; the daemon never opens it itself).
func (s *Store) Dir() string { return s.opt.Dir }

// Tool is the git the store runs (nil: none was found), for a caller
// that runs it on the agent's repository (as the owner: gittool.Tool.As).
func (s *Store) Tool() *gittool.Tool { return s.tool }

// SetConversation is (*snapshot.Store).SetConversation: point runs here,
// at each Take and Restore.
func (s *Store) SetConversation(point func() snapshot.Conversation) { s.conv.Store(&point) }

// Take is (*snapshot.Store).Take.
func (s *Store) Take(ctx context.Context, trigger string, seq uint64, opt ...snapshot.TakeOptions) (snapshot.Snapshot, bool, error) {
	var ans takeAnswer
	req := request{Trigger: trigger, Seq: seq, Conversation: s.conversation()}
	for _, o := range opt {
		req.Take = &o
	}
	err := s.call(ctx, opTake, req, &ans)
	if err == nil {
		err = s.check(opTake, ans.Snapshot)
	}
	if err != nil {
		return snapshot.Snapshot{}, false, err
	}
	ans.Snapshot.Took = ans.Took
	return ans.Snapshot, ans.New, nil
}

// Restore is (*snapshot.Store).Restore.
func (s *Store) Restore(ctx context.Context, id string, paths []string, dryRun bool) (snapshot.RestoreResult, error) {
	var ans snapshot.RestoreResult
	err := s.call(ctx, opRestore, request{ID: id, Paths: paths, DryRun: dryRun, Conversation: s.conversation()}, &ans)
	if err == nil {
		err = s.checkIDs(opRestore, ans.Snapshot, ans.Safety)
	}
	if err != nil {
		return snapshot.RestoreResult{}, err
	}
	return ans, nil
}

// List is (*snapshot.Store).List.
func (s *Store) List(ctx context.Context) ([]snapshot.Snapshot, error) {
	var ans listAnswer
	err := s.call(ctx, opList, request{}, &ans)
	if err == nil {
		err = s.check(opList, ans.Snapshots...)
	}
	if err != nil {
		return nil, err
	}
	return ans.Snapshots, nil
}

// Show is (*snapshot.Store).Show.
func (s *Store) Show(ctx context.Context, id string) (snapshot.Detail, error) {
	var ans snapshot.Detail
	err := s.call(ctx, opShow, request{ID: id}, &ans)
	if err == nil {
		err = s.check(opShow, ans.Snapshot)
	}
	if err != nil {
		return snapshot.Detail{}, err
	}
	return ans, nil
}

// Diff is (*snapshot.Store).Diff.
func (s *Store) Diff(ctx context.Context, id, against string, maxBytes int) (string, bool, error) {
	return s.DiffView(ctx, id, against, maxBytes, snapshot.View{})
}

// DiffView is (*snapshot.Store).DiffView.
func (s *Store) DiffView(ctx context.Context, id, against string, maxBytes int, v snapshot.View) (string, bool, error) {
	var ans diffAnswer
	if err := s.call(ctx, opDiff, request{ID: id, Against: against, MaxBytes: maxBytes, Paths: v.Paths, Stat: v.Stat}, &ans); err != nil {
		return "", false, err
	}
	limit := maxBytes
	if limit <= 0 {
		limit = snapshot.DefaultDiffBytes
	}
	if len(ans.Diff) > limit {
		return "", false, s.w.garbage(opDiff, fmt.Errorf("a diff of %d bytes, over the %d asked", len(ans.Diff), limit))
	}
	return ans.Diff, ans.Cut, nil
}

// Between is (*snapshot.Store).Between.
func (s *Store) Between(ctx context.Context, from, to string) ([]snapshot.TreeChange, error) {
	var ans betweenAnswer
	if err := s.call(ctx, opBetween, request{From: from, To: to}, &ans); err != nil {
		return nil, err
	}
	for _, c := range ans.Changes {
		if err := s.checkIDs(opBetween, c.OldID, c.NewID); err != nil {
			return nil, err
		}
	}
	return ans.Changes, nil
}

// Newest is (*snapshot.Store).Newest; ok is false too when the worker
// cannot say.
func (s *Store) Newest() (snapshot.Snapshot, bool) {
	var ans newestAnswer
	if err := viewQuick(s, opNewest, &ans); err != nil || !ans.OK || s.check(opNewest, ans.Snapshot) != nil {
		return snapshot.Snapshot{}, false
	}
	return ans.Snapshot, true
}

// Lookup is (*snapshot.Store).Lookup.
func (s *Store) Lookup(ctx context.Context, id string) (snapshot.Snapshot, error) {
	var ans snapshot.Snapshot
	err := s.call(ctx, opLookup, request{ID: id}, &ans)
	if err == nil {
		err = s.check(opLookup, ans)
	}
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	return ans, nil
}

// Progress is (*snapshot.Store).Progress; nothing under way when the
// worker cannot say.
func (s *Store) Progress() snapshot.Progress {
	var ans snapshot.Progress
	if err := s.quick(opProgress, request{}, &ans); err != nil || ans.Files < 0 || len(ans.Step) > 64 {
		return snapshot.Progress{}
	}
	return ans
}

// GCProblem is (*snapshot.Store).GCProblem; a worker that cannot be asked
// is a problem too.
func (s *Store) GCProblem() string {
	if s.closed.Load() {
		return ""
	}
	var ans problemAnswer
	if err := viewQuick(s, opGCProblem, &ans); err != nil {
		return err.Error()
	}
	return cut(ans.Problem, maxMessage)
}

// WorkdirProblem is (*snapshot.Store).WorkdirProblem; a worker that
// cannot be asked says nothing here (GCProblem says it).
func (s *Store) WorkdirProblem() string {
	if s.closed.Load() {
		return ""
	}
	var ans problemAnswer
	if err := viewQuick(s, opWorkdir, &ans); err != nil {
		return ""
	}
	return cut(ans.Problem, maxMessage)
}

// interrupted asks the worker for its store's interrupted restore, its
// ids checked and its problem bounded.
func (s *Store) interrupted() (interruptedAnswer, bool) {
	var ans interruptedAnswer
	if s.closed.Load() || viewQuick(s, opInterrupted, &ans) != nil || !ans.OK {
		return interruptedAnswer{}, false
	}
	r := &ans.Restore
	if s.checkIDs(opInterrupted, r.Snapshot, r.Safety, r.FinishSafety) != nil || r.Files < 0 || r.Done < 0 {
		return interruptedAnswer{}, false
	}
	r.Problem = cut(r.Problem, maxMessage)
	return ans, true
}

// Interrupted is (*snapshot.Store).Interrupted.
func (s *Store) Interrupted() (snapshot.InterruptedRestore, bool) {
	ans, ok := s.interrupted()
	return ans.Restore, ok
}

// InterruptedChanges is (*snapshot.Store).InterruptedChanges.
func (s *Store) InterruptedChanges() []string {
	ans, _ := s.interrupted()
	return ans.Changes
}

// Follow is (*snapshot.Store).Follow.
func (s *Store) Follow() {
	s.mu.Lock()
	s.followed = true
	s.mu.Unlock()
	s.note(opFollow, nil)
}

// Unfollow is (*snapshot.Store).Unfollow.
func (s *Store) Unfollow() {
	s.mu.Lock()
	s.followed = false
	s.mu.Unlock()
	s.note(opUnfollow, nil)
}

// NoteChanged is (*snapshot.Store).NoteChanged.
func (s *Store) NoteChanged(paths []string) { s.note(opNoteChanged, paths) }

// NoteUnknown is (*snapshot.Store).NoteUnknown.
func (s *Store) NoteUnknown() { s.note(opNoteUnknown, nil) }

// note tells the store what the watcher saw. A note that cannot be
// delivered is lost with the worker that would have kept it: a store
// opened again in a new worker adds the whole tree at its first Take.
func (s *Store) note(op string, paths []string) {
	if err := s.quick(op, request{Paths: paths}, &empty{}); err != nil && !errors.Is(err, snapshot.ErrClosed) {
		s.w.log.Debug("a note to the snapshot store was lost", "store", s.opt.Dir, "err", err)
	}
}

// Close is (*snapshot.Store).Close: the worker closes its store.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.mu.Lock()
	p := s.w.cur
	s.w.mu.Unlock()
	if p == nil || p.gen != s.gen {
		return nil // not open in a running worker
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	err := p.call(ctx, opClose, request{Store: s.id}, &empty{})
	if errors.Is(err, snapshot.ErrClosed) {
		return nil
	}
	return err
}

// Objects is (*snapshot.Store).Objects.
func (s *Store) Objects(ctx context.Context, id string) (snapshot.Snapshot, []snapshot.Object, error) {
	var ans objectsAnswer
	err := s.call(ctx, opObjects, request{ID: id}, &ans)
	if err == nil {
		err = s.check(opObjects, ans.Snapshot)
	}
	for _, o := range ans.Objects {
		if err == nil {
			err = s.checkObject(opObjects, o)
		}
	}
	if err != nil {
		return snapshot.Snapshot{}, nil, err
	}
	return ans.Snapshot, ans.Objects, nil
}

// Import is (*snapshot.Store).Import.
func (s *Store) Import(ctx context.Context, id, commit string) (snapshot.Snapshot, error) {
	var ans snapshot.Snapshot
	err := s.call(ctx, opImport, request{ID: id, Commit: commit}, &ans)
	if err == nil {
		err = s.check(opImport, ans)
	}
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	return ans, nil
}

// Missing is (*snapshot.Store).Missing.
func (s *Store) Missing(ctx context.Context, ids []string) ([]string, error) {
	var ans missingAnswer
	if err := s.call(ctx, opMissing, request{IDs: ids}, &ans); err != nil {
		return nil, err
	}
	asked := make(map[string]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	for _, id := range ans.Missing {
		if !asked[id] {
			return nil, s.w.garbage(opMissing, fmt.Errorf("%q, which was not asked about", cut(id, 64)))
		}
	}
	return ans.Missing, nil
}

// HoldObjects is (*snapshot.Store).HoldObjects. A hold the worker could
// not take holds nothing: Import then fails on a missing object, which
// the fleet's fetch reports.
func (s *Store) HoldObjects() (release func()) {
	var ans holdAnswer
	if err := s.quick(opHold, request{}, &ans); err != nil {
		s.w.log.Warn("objects fetched for the store are not held against its garbage collection", "store", s.opt.Dir, "err", err)
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() { s.quick(opRelease, request{Hold: ans.Hold}, &empty{}) })
	}
}

// ---- checks of what the worker answers ----------------------------------

var hashRE = lazyregexp.New(`^[0-9a-f]{40}$`)

// check refuses a snapshot whose id is not a hash: the worker's word,
// used as an id in the calls that follow. (Its other fields are the
// snapshot's metadata, which an imported snapshot brings from another
// machine as it is, and which are shown escaped wherever they are shown.)
func (s *Store) check(op string, snaps ...snapshot.Snapshot) error {
	for _, snap := range snaps {
		if !hashRE.MatchString(snap.ID) {
			return s.w.garbage(op, fmt.Errorf("a snapshot with the id %q", cut(snap.ID, 64)))
		}
	}
	return nil
}

// checkIDs refuses ids that are neither empty nor a hash.
func (s *Store) checkIDs(op string, ids ...string) error {
	for _, id := range ids {
		if id != "" && !hashRE.MatchString(id) {
			return s.w.garbage(op, fmt.Errorf("the id %q", cut(id, 64)))
		}
	}
	return nil
}

func (s *Store) checkObject(op string, o snapshot.Object) error {
	if !hashRE.MatchString(o.ID) || (o.Type != "commit" && o.Type != "tree" && o.Type != "blob") {
		return s.w.garbage(op, fmt.Errorf("an object %q of type %q", cut(o.ID, 64), cut(o.Type, 16)))
	}
	return nil
}
