package capture

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/daemon/worklost"
	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// losses watches each new work snapshot for uncommitted work that vanished
// since the one before (daemon/worklost), and keeps what it found for
// resume until the agent checkpoints after it or the work is back.
//
// gate is held across a snapshot and its check, and across a restore by
// the daemon (Restoring): a check always knows every restore that changed
// the tree before its snapshot was taken, and none that came after it, so
// the daemon's own restore is never taken for a loss. mu guards the state
// and is only held briefly (never across a git run): resume, metrics and
// the residency's writer (a checkpoint) never wait for a snapshot.
//
// What a check needs from the one before (the last point, the restores
// since, the losses kept) is kept in the agent's state directory: after a
// restart the start snapshot is checked against the last one of the run
// before (work thrown away while the daemon was down is found too), and
// resume still lists what was lost. The losses and the restores are in
// lossesFile, synced at each change. The last point moves at every
// snapshot, so it goes to lastPointFile, replaced but not synced: a kill
// keeps it (the page cache survives the process), and a power loss at
// worst falls back to the point lossesFile holds, an older snapshot,
// whose check against the next start finds the same losses (each loss
// found was synced with the point it was found at).
type losses struct {
	gate     sync.Mutex
	mu       sync.Mutex
	file     *atomicfile.Slot // lossesFile (made by New); nil without a state directory
	lastFile *atomicfile.Slot // lastPointFile (made by New); nil without a state directory
	kept     lossState
	found    uint64 // losses found since the daemon started
	failing  bool   // the last check failed (logged once)
	failed   string // why, for status and resume (degraded ["work_lost"])
	onLost   func(capsule.WorkLost)
}

// lossState is what lossesFile holds.
type lossState struct {
	Last worklost.Point `json:"last"` // the snapshot checked last and the HEAD it goes with
	// Gen counts the moves of Last: of the two files, the point with the
	// larger Gen is the newer.
	Gen      uint64             `json:"gen,omitempty"`
	Restored []string           `json:"restored"` // paths the daemon's restores changed since Last
	Entries  []capsule.WorkLost `json:"entries"`  // the losses resume lists (paths as found)
	// Past are losses resume no longer lists (the agent checkpointed
	// after them, the work came back, or newer ones pushed them out),
	// newest last, at most maxPastLosses: a restore by id still finds
	// them (the command an agent was given goes on working).
	Past []capsule.WorkLost `json:"past,omitempty"`
}

// maxPastLosses bounds lossState.Past.
const maxPastLosses = 64

// lastPoint is what lastPointFile holds.
type lastPoint struct {
	Last worklost.Point `json:"last"`
	Gen  uint64         `json:"gen"`
}

// lossesFile is the agent's lossState, in its state directory;
// lastPointFile its last point when it moved since.
const (
	lossesFile    = "worklost.json"
	lastPointFile = "worklost-last.json"
)

// loadLosses reads what the run before kept (nothing when there is no
// state directory or no file; a damaged file is logged and started over).
func (c *Capture) loadLosses() {
	if c.o.Dir == "" {
		return
	}
	raw, err := os.ReadFile(filepath.Join(c.o.Dir, lossesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var st lossState
	if err == nil {
		err = json.Unmarshal(raw, &st)
	}
	if err != nil {
		c.log.Warn("the work-lost state of the last run cannot be read; checks start over from the next snapshot", "file", lossesFile, "err", err)
		return
	}
	if raw, err := os.ReadFile(filepath.Join(c.o.Dir, lastPointFile)); err == nil {
		var lp lastPoint
		if err := json.Unmarshal(raw, &lp); err != nil {
			c.log.Warn("the last work-lost check's point cannot be read (it is not synced: a power loss may leave it so); checks go on from the one kept before it",
				"file", lastPointFile, "err", err)
		} else if lp.Gen > st.Gen {
			st.Last, st.Gen = lp.Last, lp.Gen
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("the last work-lost check's point cannot be read; checks go on from the one kept before it", "file", lastPointFile, "err", err)
	}
	for _, list := range [][]capsule.WorkLost{st.Entries, st.Past} {
		for i, e := range list {
			if e.ID == "" { // kept by a daemon that gave losses no id
				list[i].ID = worklost.ID(e.Snapshot, e.At)
			}
		}
	}
	c.lost.mu.Lock()
	c.lost.kept = st
	c.lost.mu.Unlock()
	viewstamp.Changed()
}

// retire keeps losses that leave resume's list in Past; call it with
// c.lost.mu held.
func (c *Capture) retire(gone ...capsule.WorkLost) {
	if len(gone) == 0 {
		return
	}
	past := slices.DeleteFunc(c.lost.kept.Past, func(p capsule.WorkLost) bool {
		return slices.ContainsFunc(gone, func(g capsule.WorkLost) bool { return g.ID == p.ID })
	})
	past = append(past, gone...)
	if n := len(past) - maxPastLosses; n > 0 {
		past = past[n:]
	}
	c.lost.kept.Past = past
}

// Lost is the loss id as found (its paths as they are named in the tree,
// not redacted), listed in resume or retired since (Past); false when
// no loss kept has that id.
func (c *Capture) Lost(id string) (capsule.WorkLost, bool) {
	c.lost.mu.Lock()
	defer c.lost.mu.Unlock()
	for _, list := range [][]capsule.WorkLost{c.lost.kept.Entries, c.lost.kept.Past} {
		for _, e := range list {
			if e.ID == id {
				e.Paths = slices.Clone(e.Paths)
				return e, true
			}
		}
	}
	return capsule.WorkLost{}, false
}

// moveLast sets the point checked last; call it with c.lost.mu held.
func (c *Capture) moveLast(p worklost.Point) {
	c.lost.kept.Last = p
	c.lost.kept.Gen++
}

// saveLastPoint writes the point checked last, unsynced; call it with
// c.lost.mu held. A failure is logged: lossesFile still holds an older
// point.
func (c *Capture) saveLastPoint() {
	if c.lost.lastFile == nil {
		return
	}
	raw, err := json.Marshal(lastPoint{Last: c.lost.kept.Last, Gen: c.lost.kept.Gen})
	if err == nil {
		err = c.lost.lastFile.Write(raw)
	}
	if err != nil {
		c.log.Warn("cannot keep the last work-lost check's point; a restart checks from an older one", "err", err)
	}
}

// saveLosses writes c.lost.kept; call it with c.lost.mu held. A failure
// is logged: the checks go on in memory.
func (c *Capture) saveLosses() {
	if c.lost.file == nil {
		return
	}
	raw, err := json.Marshal(c.lost.kept)
	if err == nil {
		err = c.lost.file.Write(raw)
	}
	if err != nil {
		c.log.Warn("cannot keep the work-lost state; a restart forgets it", "err", err)
	}
}

// OnWorkLost has fn told each loss found (as resume shows it). Call it
// before Start.
func (c *Capture) OnWorkLost(fn func(capsule.WorkLost)) {
	c.lost.mu.Lock()
	c.lost.onLost = fn
	c.lost.mu.Unlock()
}

// Restoring runs restore, a restore of the agent's snapshot by the daemon,
// so that what it changes in the tree is not taken for lost work by any
// agent on the workdir (Options.RestoreGate): none of them checks a
// snapshot meanwhile, and the paths it changed are left out of each one's
// next check.
func (c *Capture) Restoring(restore func() (snapshot.RestoreResult, error)) (snapshot.RestoreResult, error) {
	all := c.sharing()
	for _, m := range all {
		m.lost.gate.Lock()
	}
	defer func() {
		for _, m := range slices.Backward(all) {
			m.lost.gate.Unlock()
		}
	}()
	res, err := restore()
	if !res.DryRun && len(res.Changes) > 0 {
		// Also after a failure: whatever of it was done is the daemon's.
		for _, m := range all {
			m.lost.mu.Lock()
			for _, f := range res.Changes {
				m.lost.kept.Restored = append(m.lost.kept.Restored, f.Path)
			}
			m.saveLosses()
			m.lost.mu.Unlock()
		}
	}
	return res, err
}

// NoteRestored has the next check leave paths out: a restore by the daemon
// changed them without Restoring (one interrupted, and finished as the
// store opened). Call it after UseSnapshots.
func (c *Capture) NoteRestored(paths []string) {
	c.lost.mu.Lock()
	defer c.lost.mu.Unlock()
	c.lost.kept.Restored = append(c.lost.kept.Restored, paths...)
	c.saveLosses()
}

// WorkLost is the uncommitted work that vanished and is still away, oldest
// first, as resume shows it (paths redacted).
func (c *Capture) WorkLost() []capsule.WorkLost {
	c.lost.mu.Lock()
	defer c.lost.mu.Unlock()
	if len(c.lost.kept.Entries) == 0 {
		return nil
	}
	out := make([]capsule.WorkLost, len(c.lost.kept.Entries))
	for i, e := range c.lost.kept.Entries {
		out[i] = c.shown(e)
	}
	return out
}

// WorkLostFound is how many losses the daemon found since it started (the
// metric).
func (c *Capture) WorkLostFound() uint64 {
	c.lost.mu.Lock()
	defer c.lost.mu.Unlock()
	return c.lost.found
}

// shown is e as it leaves the capture: each path in its exact form
// (termsafe.Exact: JSON carries a name of any bytes), or redacted when it
// is secret-shaped (a name is not repeated; the per-path command then
// names it as redacted, while the command by id still restores it), at
// most capsule.MaxWorkLostPaths paths. The secret guard reads each name
// as Name prints it: it would make a name valid UTF-8 and drop its
// invisible characters, and the name must come out exact.
func (c *Capture) shown(e capsule.WorkLost) capsule.WorkLost {
	paths := make([]string, 0, min(len(e.Paths), capsule.MaxWorkLostPaths))
	for _, p := range e.Paths[:min(len(e.Paths), capsule.MaxWorkLostPaths)] {
		name := termsafe.Name(p)
		if red := c.guard.Redact(name); red != name {
			paths = append(paths, red)
		} else {
			paths = append(paths, termsafe.Exact(p))
		}
	}
	return capsule.WorkLost{ID: e.ID, At: e.At, Paths: paths, Snapshot: e.Snapshot,
		Restore:      worklost.RestoreCommand(e.ID, c.o.Agent),
		RestorePaths: worklost.PathsCommand(e.Snapshot, c.o.Agent, paths),
		Versions:     c.shownVersions(e.Versions), NotCovered: e.NotCovered}
}

// checkpointed drops the losses found before at: the agent checkpointed
// after it was told.
func (c *Capture) checkpointed(at time.Time) {
	c.lost.mu.Lock()
	defer c.lost.mu.Unlock()
	var told []capsule.WorkLost
	c.lost.kept.Entries = slices.DeleteFunc(c.lost.kept.Entries, func(e capsule.WorkLost) bool {
		if e.At.After(at) {
			return false
		}
		told = append(told, e)
		return true
	})
	if len(told) > 0 {
		c.retire(told...)
		c.saveLosses()
		viewstamp.Changed()
	}
}

// headMoved notes a commit: the tree the last snapshot holds now stands
// against the new HEAD, so work the commit took is no longer uncommitted.
func (s *snapshots) headMoved(ctx context.Context) {
	l := &s.c.lost
	l.mu.Lock()
	last := l.kept.Last.Snapshot
	l.mu.Unlock()
	if last == "" {
		return
	}
	head, err := s.repo.Head(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.kept.Last.Snapshot == last && head != l.kept.Last.Head {
		s.c.moveLast(worklost.Point{Snapshot: last, Head: head})
		s.c.saveLastPoint()
	}
}

// checkLoss compares snap with the snapshot checked before it. Call it
// with s.c.lost.gate held, right after snap was taken. A snapshot is
// checked once: the same one again (nothing changed) only brings the HEAD
// up to date.
func (s *snapshots) checkLoss(ctx context.Context, snap snapshot.Snapshot) {
	l := &s.c.lost
	head, err := s.repo.Head(ctx)
	if err != nil {
		s.lossFailed(ctx, err)
		return
	}
	after := worklost.Point{Snapshot: snap.ID, Head: head}
	l.mu.Lock()
	before := l.kept.Last
	if before == after {
		s.lossWorked(snap.ID)
		l.mu.Unlock()
		return
	}
	s.c.moveLast(after)
	restored := l.kept.Restored
	l.kept.Restored = nil
	entries := slices.Clone(l.kept.Entries)
	if before.Snapshot == "" || before.Snapshot == snap.ID {
		if before.Snapshot == "" || len(restored) > 0 {
			s.c.saveLosses()
		} else {
			s.c.saveLastPoint()
		}
		s.lossWorked(snap.ID)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()

	back := s.stillAway(ctx, snap.ID, entries)
	var w *worklost.WorkLost
	if snap.Parent != before.Snapshot || snap.Modified > 0 || snap.Deleted > 0 { // files added only: nothing held before is gone
		w, err = worklost.Detect(ctx, worklost.Input{Store: s.store, Repo: s.repo,
			Agent: s.c.o.Agent, Before: before, After: after, Restored: restored, At: time.Now().UTC(), Journal: s.c.lossJournal()})
		if w != nil && s.c.lossJournal() != nil {
			w.NotCovered = s.c.notCovered(snapshotPoint{at: snap.Time, start: snap.Trigger == TriggerStart}, s.beforeTime(ctx, before.Snapshot, w))
		}
	}
	if err != nil {
		s.lossFailed(ctx, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer viewstamp.Changed() // the losses, or whether the checks work
	var gone []capsule.WorkLost
	l.kept.Entries = slices.DeleteFunc(l.kept.Entries, func(e capsule.WorkLost) bool {
		now, ok := back[lossKey(e)]
		if ok && now == nil {
			gone = append(gone, e)
		}
		return ok && now == nil
	})
	for i, e := range l.kept.Entries {
		if now := back[lossKey(e)]; now != nil {
			l.kept.Entries[i] = *now
		}
	}
	if err == nil {
		s.lossWorked(snap.ID)
	}
	if w != nil {
		l.found++
		l.kept.Entries = append(l.kept.Entries, *w)
		if n := len(l.kept.Entries) - capsule.MaxWorkLost; n > 0 {
			gone = append(gone, l.kept.Entries[:n]...)
			l.kept.Entries = l.kept.Entries[n:]
		}
	}
	s.c.retire(gone...)
	if w != nil || len(back) > 0 || len(restored) > 0 {
		s.c.saveLosses() // the losses or the restores changed: synced, with the point
	} else {
		s.c.saveLastPoint()
	}
	if w == nil {
		return
	}
	shown := s.c.shown(*w)
	names := make([]string, len(shown.Paths))
	for i, p := range shown.Paths {
		names[i] = termsafe.Name(p)
	}
	s.c.log.Warn("uncommitted work vanished from the workdir without a commit; it can be brought back",
		"paths", strings.Join(names, ", "), "snapshot", w.Snapshot, "restore", termsafe.Text(shown.Restore))
	if l.onLost != nil {
		l.onLost(shown)
	}
}

// lossKey names a kept loss.
func lossKey(e capsule.WorkLost) string { return e.Snapshot + " " + e.At.Format(time.RFC3339Nano) }

// stillAway reads which of the losses entries have work back in snapshot
// id (the same content as in the snapshot that held it: a `git stash pop`,
// a restore, an undo): by lossKey, nil for a loss all back, the loss with
// the paths still away when some are back, nothing for one unchanged.
func (s *snapshots) stillAway(ctx context.Context, id string, entries []capsule.WorkLost) map[string]*capsule.WorkLost {
	back := map[string]*capsule.WorkLost{}
	for _, e := range entries {
		changes, err := s.store.Between(ctx, e.Snapshot, id)
		if err != nil {
			continue // not known to be back (the snapshot may be gone): kept until a checkpoint
		}
		differ := map[string]bool{}
		for _, ch := range changes {
			differ[ch.Path] = true
		}
		away := slices.DeleteFunc(slices.Clone(e.Paths), func(p string) bool { return !differ[p] })
		switch {
		case len(away) == 0:
			back[lossKey(e)] = nil
		case len(away) < len(e.Paths):
			e.Paths, e.RestorePaths = away, worklost.PathsCommand(e.Snapshot, s.c.o.Agent, worklost.ExactPaths(away))
			back[lossKey(e)] = &e
		}
	}
	return back
}

// lossWorked notes a check that worked, after failed ones: the agent is
// no longer degraded ["work_lost"]. Call it with s.c.lost.mu held.
func (s *snapshots) lossWorked(snap string) {
	l := &s.c.lost
	if l.failing {
		l.failing, l.failed = false, ""
		viewstamp.Changed()
		s.c.log.Info("work-lost checks work again", "snapshot", snap)
	}
}

// lossFailed logs a failed check once until one works again (not when
// the daemon is stopping), and keeps why: the agent shows degraded
// ["work_lost"] with it until a check works.
func (s *snapshots) lossFailed(ctx context.Context, err error) {
	if ctx.Err() != nil || errors.Is(err, snapshot.ErrClosed) {
		return
	}
	l := &s.c.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	defer viewstamp.Changed()
	l.failed = err.Error()
	if !l.failing {
		l.failing = true
		s.c.log.Warn("cannot check the workdir for uncommitted work that vanished; the agent shows degraded [\"work_lost\"] until a check works", "err", err)
	}
}
