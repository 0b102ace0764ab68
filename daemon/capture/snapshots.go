package capture

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/policy"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/daemon/sources/watch"
	"github.com/continuityd/continuityd/daemon/worklost"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
	"github.com/continuityd/continuityd/internal/gittool"
)

// TriggerStart is the snapshot of the tree as it stands when the daemon
// starts watching it, so the first burst of changes can be rewound too.
const TriggerStart = "start"

// Snapshots is the agent's snapshot store as the capture uses it:
// *snapshot.Store in process, or, when the daemon runs as root over
// another user's workdir, the store in that owner's worker
// (asowner.Store).
type Snapshots interface {
	Take(ctx context.Context, trigger string, seq uint64, opt ...snapshot.TakeOptions) (snapshot.Snapshot, bool, error)
	Show(ctx context.Context, id string) (snapshot.Detail, error)
	Lookup(ctx context.Context, id string) (snapshot.Snapshot, error)
	Between(ctx context.Context, from, to string) ([]snapshot.TreeChange, error)
	Progress() snapshot.Progress
	Follow()
	Unfollow()
	NoteChanged(paths []string)
	NoteUnknown()
	SetConversation(point func() snapshot.Conversation)
	// WorkdirProblem says why the store refuses to act: the workdir's
	// path leads elsewhere now ("" when it does not).
	WorkdirProblem() string
	// Tool is the git the store runs; the capture runs it on the agent's
	// repository too (as the workdir's owner, Options.GitAs).
	Tool() *gittool.Tool
}

// snapshots is the capture's side of the work snapshots: the policy's
// Snapshotter over the agent's store (which the agent owns), the commits
// seen since the last work record, and the last snapshot error.
type snapshots struct {
	c     *Capture
	store Snapshots
	repo  *worklost.Repo // the agent's repository, read by the work-lost checks
	taken func()         // after each snapshot (the agent's GC check)
	// withheld lists the files of a snapshot that stay off the fleet;
	// nil when snapshots are not shipped.
	withheld func(ctx context.Context, id string) ([]snapshot.Withheld, error)

	mu       sync.Mutex
	recorded string   // the snapshot the last work record carried
	commits  []string // commit receipts since the last work record
	err      error    // the last snapshot failure, nil after a success
	starting bool     // the start snapshot is under way
}

// UseSnapshots makes the policy's triggers that follow changes snapshot
// the workdir into store and write work records; taken runs after each
// snapshot. Call it before Start.
func (c *Capture) UseSnapshots(store Snapshots, taken func()) {
	// Starting from here: the start snapshot is the first thing Start
	// does, and until it is taken the store's newest is the one it had.
	s := &snapshots{c: c, store: store, taken: taken, starting: true}
	c.loadLosses()
	c.mu.Lock()
	c.snaps = s
	c.mu.Unlock()
	s.repo = worklost.NewRepo(c.gitTool(), c.o.Workdir)
	c.policy.SetSnapshotter(s)
	store.SetConversation(c.transcripts.conversationPoint)
}

// TriggerManual is a snapshot a person or the agent asked for (snapshot
// take, POST /v1/snapshots, the snapshot_take tool).
const TriggerManual = "manual"

// TakeSnapshot takes a snapshot of the whole tree now, asked for with
// message ("" : none, already checked), as the automatic ones are taken:
// work lost is looked for after it, and the next work record carries it. An unchanged tree
// makes none: the newest snapshot is returned with false.
func (c *Capture) TakeSnapshot(ctx context.Context, message string) (snapshot.Snapshot, bool, error) {
	s := c.snapshotter()
	if s == nil {
		return snapshot.Snapshot{}, false, errors.New("work snapshots are off for this agent")
	}
	// The whole tree is looked at again: a file saved a moment ago may not
	// be reported by the watcher yet (it waits for a burst to go quiet),
	// and whoever asks for a snapshot means the tree as it is now.
	s.store.NoteUnknown()
	return s.take(ctx, TriggerManual, c.store.Resume().Seq, snapshot.TakeOptions{Message: message})
}

// ExplicitCheckpoint tells the policy the agent saved a checkpoint of its
// own (snapshots.on_explicit_checkpoint): a work record may follow. The
// losses found before it are no longer shown: the agent was told.
func (c *Capture) ExplicitCheckpoint() {
	c.checkpointed(time.Now())
	if c.o.SnapshotOnExplicitCheckpoint && c.snapshotter() != nil {
		c.feed(policy.Input{Kind: policy.KindCheckpoint})
	}
}

func (c *Capture) snapshotter() *snapshots {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snaps
}

// SnapshotError is the last snapshot failure (the reason the agent shows
// degraded ["snapshots"]), nil when the last snapshot worked.
func (c *Capture) SnapshotError() error {
	s := c.snapshotter()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// NameWithheld makes each work record name the files of its snapshot
// that shipping it to the fleet keeps on the machine (list says which).
// Call it after UseSnapshots and before Start.
func (c *Capture) NameWithheld(list func(ctx context.Context, id string) ([]snapshot.Withheld, error)) {
	if s := c.snapshotter(); s != nil {
		s.mu.Lock()
		s.withheld = list
		s.mu.Unlock()
	}
}

// noteCommit keeps a commit receipt for the next work record.
func (c *Capture) noteCommit(receipt string) {
	s := c.snapshotter()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits = append(s.commits, receipt)
	if n := len(s.commits) - capsule.MaxWorkCommits; n > 0 {
		s.commits = s.commits[n:]
	}
}

// progressEvery is how often a snapshot at the start says how far it got
// in the log.
const progressEvery = 5 * time.Second

// start takes the snapshot of the tree as the daemon finds it (no record:
// nothing happened yet); the first work record reports changes against it.
// A large tree takes seconds: the log says when it starts, how far it got
// every progressEvery and when it is done, and status shows it meanwhile.
func (s *snapshots) start(ctx context.Context) {
	s.mu.Lock()
	s.starting = true
	s.mu.Unlock()
	viewstamp.Changed()
	began := time.Now()
	s.c.log.Info("taking the start snapshot of the workdir", "workdir", s.c.o.Workdir)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if p := s.store.Progress(); p.Step != "" {
					s.c.log.Info("start snapshot under way", "step", p.Step, "files", p.Files,
						"elapsed", time.Since(began).Round(time.Second))
				}
			}
		}
	})
	snap, _, err := s.take(ctx, TriggerStart, s.c.store.Resume().Seq)
	close(done)
	wg.Wait()
	s.mu.Lock()
	s.starting = false
	if err == nil {
		s.recorded = snap.ID
	}
	s.mu.Unlock()
	viewstamp.Changed()
	if err == nil {
		s.c.log.Info("start snapshot taken", "snapshot", snap.ID, "files", snap.Took.Files, "changed", snap.Files(),
			"took", time.Since(began).Round(time.Millisecond))
		if s.c.o.CatchUpOutside && snap.Parent != "" && snap.Files() > 0 {
			s.catchUp(ctx, snap)
		}
	}
}

// catchUp reports the start snapshot's changes against the snapshot
// before it, made while nothing watched the workdir: credited to
// outside, and noted as the workdir's activity.
func (s *snapshots) catchUp(ctx context.Context, snap snapshot.Snapshot) {
	d, err := s.store.Show(ctx, snap.ID)
	if err != nil {
		s.c.log.Warn("what changed while the workdir was not watched cannot be read", "snapshot", snap.ID, "err", err)
		return
	}
	paths := make([]string, 0, len(d.Files))
	for _, f := range d.Files {
		paths = append(paths, f.Path)
	}
	n := max(len(paths), snap.Files())
	s.c.log.Info("changed while the workdir was not watched: reported as outside", "files", n, "snapshot", snap.ID)
	now := time.Now()
	s.c.burst(watch.Summary{Paths: paths, Count: n, First: snap.Time, Last: now})
	redacted := make([]string, 0, len(paths))
	for _, p := range paths {
		redacted = append(redacted, s.c.guard.Redact(p))
	}
	s.c.store.NoteActivity(redacted, n)
	s.c.feed(policy.Input{Kind: policy.KindActivity, At: now})
}

// StartSnapshotRunning reports whether the start snapshot is under way:
// the store's newest snapshot is then read only once it is done, which
// for a large tree is seconds that a hook's answer cannot wait.
func (c *Capture) StartSnapshotRunning() bool {
	s := c.snapshotter()
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starting
}

// startProgress is the snapshots component's detail while the start
// snapshot is under way ("" otherwise).
func (s *snapshots) startProgress() string {
	s.mu.Lock()
	starting := s.starting
	s.mu.Unlock()
	if !starting {
		return ""
	}
	p := s.store.Progress()
	switch p.Step {
	case "":
		return "taking the start snapshot"
	case snapshot.StepWalk:
		return fmt.Sprintf("taking the start snapshot: %s, %s files so far", p.Step, groupThousands(p.Files))
	default:
		return fmt.Sprintf("taking the start snapshot: %s (%s files)", p.Step, groupThousands(p.Files))
	}
}

// groupThousands writes n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (s *snapshots) take(ctx context.Context, trigger string, seq uint64, opt ...snapshot.TakeOptions) (snapshot.Snapshot, bool, error) {
	s.c.lost.gate.Lock()
	snap, isNew, err := s.store.Take(ctx, trigger, seq, opt...)
	if err == nil {
		s.checkLoss(ctx, snap) // before a restore may change the tree again
	}
	s.c.lost.gate.Unlock()
	s.mu.Lock()
	prev := s.err
	if err != nil && ctx.Err() == nil && !errors.Is(err, snapshot.ErrClosed) {
		s.err = err
	} else if err == nil {
		s.err = nil
	}
	changed := s.err != prev
	s.mu.Unlock()
	if changed {
		viewstamp.Changed()
	}
	switch {
	case err != nil && ctx.Err() == nil && !errors.Is(err, snapshot.ErrClosed):
		if prev == nil {
			s.c.log.Warn("work snapshot failed; the agent shows degraded [\"snapshots\"] until one works", "trigger", trigger, "err", err)
		}
	case err == nil:
		if prev != nil {
			s.c.log.Info("work snapshots work again", "snapshot", snap.ID)
		}
		if s.taken != nil {
			s.taken()
		}
	}
	return snap, isNew, err
}

// Work implements policy.Snapshotter.
func (s *snapshots) Work(ctx context.Context, trigger string, seq uint64) (*capsule.Work, error) {
	snap, _, err := s.take(ctx, trigger, seq)
	s.mu.Lock()
	recorded := s.recorded
	commits := append([]string(nil), s.commits...)
	s.mu.Unlock()
	newSnap := err == nil && snap.ID != "" && snap.ID != recorded
	if !newSnap && len(commits) == 0 {
		return nil, err
	}
	w := &capsule.Work{Trigger: trigger, Commits: commits, Files: []capsule.WorkFile{}}
	if newSnap {
		ws := &capsule.WorkSnapshot{ID: snap.ID, Parent: snap.Parent, At: snap.Time, Seq: snap.Seq,
			Added: snap.Added, Modified: snap.Modified, Deleted: snap.Deleted}
		if cv := snap.Conversation; cv != nil {
			ws.Conversation = &capsule.WorkConversation{Session: cv.Session, Message: cv.Message}
		}
		w.Snapshot = ws
		if d, derr := s.store.Show(ctx, snap.ID); derr == nil {
			whose := s.c.Whose(ctx, snap)
			for i, f := range d.Files {
				if i == capsule.MaxWorkFiles {
					w.FilesMore = len(d.Files) - i
					break
				}
				w.Files = append(w.Files, capsule.WorkFile{Path: s.c.guard.Redact(f.Path), Status: f.Status,
					LinesAdded: f.LinesAdded, LinesDeleted: f.LinesDeleted, Binary: f.Binary, By: whose(f.Path)})
			}
			if d.FilesCut {
				w.FilesMore = max(w.FilesMore, ws.Added+ws.Modified+ws.Deleted-len(w.Files))
			}
			ws.SkippedCount = len(d.SkippedFiles) + d.SkippedMore
			for i, k := range d.SkippedFiles {
				if i == capsule.MaxWorkSkipped {
					break
				}
				ws.Skipped = append(ws.Skipped, s.c.guard.Redact(k.Path))
			}
		}
		s.nameWithheld(ctx, ws)
	}
	return w, nil
}

// nameWithheld lists in ws the files its snapshot's copy in the fleet
// leaves out. A failure to tell is logged: the shipper checks again
// before anything leaves.
func (s *snapshots) nameWithheld(ctx context.Context, ws *capsule.WorkSnapshot) {
	s.mu.Lock()
	list := s.withheld
	s.mu.Unlock()
	if list == nil {
		return
	}
	files, err := list(ctx, ws.ID)
	if err != nil {
		s.c.log.Warn("the work record cannot say which files stay off the fleet", "snapshot", ws.ID, "err", err)
		return
	}
	ws.WithheldCount = len(files)
	for i, f := range files {
		if i == capsule.MaxWorkWithheld {
			break
		}
		ws.Withheld = append(ws.Withheld, capsule.WorkWithheld{Path: s.c.guard.Redact(f.Path), Reason: f.Reason})
	}
}

// Written implements policy.Snapshotter.
func (s *snapshots) Written(w *capsule.Work) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.Snapshot != nil {
		s.recorded = w.Snapshot.ID
	}
	// The commits it carried (more may have come meanwhile).
	n := min(len(w.Commits), len(s.commits))
	s.commits = s.commits[n:]
}
