package capture

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/policy"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/daemon/sources/gitwatch"
	"github.com/continuityd/continuityd/daemon/sources/handoff"
	"github.com/continuityd/continuityd/daemon/sources/watch"
	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/safefile"
)

// Capture is one agent's automatic side: the sources that notice the work
// moving (the workdir watcher, the handoff files, transcripts) feed the
// residency and the checkpoint policy, which writes through the same store
// and outbox as the agent itself. Nothing here invents content: paths and
// counts, the agent's own handoff text, and markers.
type Capture struct {
	o      Options
	store  *residency.Store
	guard  *guard.Guard
	log    *slog.Logger
	policy *policy.Policy
	inputs chan policy.Input

	watcher     *watch.Watcher // nil when not watching
	watchErr    string         // why the workdir could not be watched at all
	transcripts *transcriptFollower
	mu          sync.Mutex
	handoffs    map[string]string         // handoff file → its mtime last applied, or the refusal
	repos       map[string]*gitwatch.Repo // worktree root → repository seen
	snaps       *snapshots                // work snapshots (snapshots.go); nil when off
	attr        *attributing              // whose work each change is (attribution.go); nil when off
	journal     journalFeed               // the version journal, fed each settled path (journal.go)
	lost        losses                    // uncommitted work that vanished (worklost.go)
	started     time.Time                 // when Start ran: commits older are not new work
	gitOnce     sync.Once                 // finds git (gittool.go)
	git         *gittool.Tool             // the git run on the agent's repository; nil when there is none
	startDone   chan struct{}             // closed once the start snapshot is over (StartSnapshotDone)
	prompts     []turnStart               // when the last turns began, in which session (donelost.go)

	// refusedLogged holds, per repository root, the reason git is not run
	// on it that was logged last (under mu).
	refusedLogged map[string]string
}

// policyInputs buffers what reaches the policy; the store's writer must
// never block on it, so a full buffer drops (activity is repeated anyway).
const policyInputs = 1024

// New prepares the sources and policy of the agent o names; Start runs
// them.
func New(o Options) *Capture {
	c := &Capture{o: o, store: o.Store, guard: o.Guard, log: o.Logger.With("agent", o.Agent),
		inputs: make(chan policy.Input, policyInputs), handoffs: map[string]string{}, startDone: make(chan struct{})}
	c.policy = policy.New(o.Agent, o.Policy, o.Store, c.seal, o.Logger, time.Now)
	c.transcripts = newTranscriptFollower(c)
	c.attr = c.newAttributing()
	if o.Dir != "" {
		c.lost.file = atomicfile.NewSlot(filepath.Join(o.Dir, lossesFile), 0o600, true)
		c.lost.lastFile = atomicfile.NewSlot(filepath.Join(o.Dir, lastPointFile), 0o600, false)
	}
	return c
}

// seal builds the capsule the policy seals, exactly as POST
// /v1/capsule/seal does, and checks it with the guard.
func (c *Capture) seal(st capsule.Resume, draft *capsule.CapsuleRecord, now time.Time) (*capsule.Capsule, error) {
	cp := capsule.Seal(st, draft, now)
	if err := c.guard.CheckCapsule(cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// feed hands an input to the policy without ever blocking.
func (c *Capture) feed(in policy.Input) {
	select {
	case c.inputs <- in:
	default:
		c.log.Debug("policy input dropped (buffer full)")
	}
}

// StartSnapshotDone is closed once Start's snapshot of the tree is over
// (taken, failed, or cut short by the end of Start's context), or at Start
// when the agent takes no snapshots: the agent's start-up work is done.
func (c *Capture) StartSnapshotDone() <-chan struct{} { return c.startDone }

// Start runs the policy, the workdir watcher and the handoff files.
func (c *Capture) Start(ctx context.Context, wg *sync.WaitGroup) {
	c.started = time.Now()
	if g := c.o.RestoreGate; g != nil {
		g.join(c)
		context.AfterFunc(ctx, func() { g.leave(c) })
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.policy.Run(ctx, c.inputs)
	}()
	wd := c.o.Workdir
	// The tree as the daemon finds it is the first snapshot, taken in the
	// background: a large tree must not hold up the daemon's start (agents
	// start one after another, before the socket serves) or a reload. The
	// store takes one snapshot at a time, so a burst's snapshot waits for
	// this one. It starts at once, before the watcher is in place, so it
	// holds the tree from before the first burst; the snapshot after it
	// is then a full one too (Follow), the later ones from what changed.
	if s := c.snapshotter(); s != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(c.startDone)
			s.start(ctx)
		}()
		wg.Add(1)
		go func() { // the reader of the agent's repository ends with the agent
			defer wg.Done()
			<-ctx.Done()
			s.repo.Close()
		}()
	} else {
		close(c.startDone)
	}
	if claims := c.o.TranscriptClaims; claims != nil {
		// What the agent held (followed, or its hook bound) is free
		// once it stops; Stop waits for this, so a reopened agent's
		// claims come after.
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ctx.Done()
			claims.Release(c.o.Agent)
		}()
	}
	if wd != "" && c.o.Transcripts.Enabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.transcripts.run(ctx)
		}()
	}
	if wd == "" || !c.o.Watch.Enabled {
		return
	}
	c.checkHandoffs(ctx) // files written while the daemon was down
	c.primeGit(ctx, wd)
	ignore := slices.Clone(c.o.Watch.Ignore)
	// The daemon's own files must not count as the agent's work: a state
	// directory inside the workdir would otherwise feed on itself.
	for _, own := range c.o.Watch.Own {
		if rel, err := filepath.Rel(wd, own); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			ignore = append(ignore, "/"+filepath.ToSlash(rel)+"/")
		}
	}
	// The workdir's watcher is shared by every agent on it (Options.Watches):
	// each is told every burst and runs its own policy and snapshots.
	shared := c.o.Watches
	if shared == nil {
		shared = &watch.Shared{Logger: c.log}
	}
	stopped := make(chan struct{})
	sub, err := shared.Subscribe(watch.Options{
		Root: wd, Ignore: ignore, IgnoreDirs: c.o.Watch.IgnoreDirs, Quiet: c.o.Watch.Quiet,
		Settle: c.o.Watch.Settle, Opener: c.o.Opener, // its ignore and git files are read with the owner's rights
	}, watch.Subscriber{
		Summary:  func(s watch.Summary) { c.activity(ctx, s) },
		Settled:  c.settled,
		GitEvent: func(dir string) { c.gitCheck(ctx, dir) },
		Stopped: func(err error) {
			c.log.Warn("workdir watcher stopped", "err", err)
			c.unfollow()
			close(stopped)
		},
	})
	if err != nil {
		c.log.Warn("cannot watch the workdir; automatic capture is off for it", "workdir", wd, "err", err)
		c.mu.Lock()
		c.watchErr = "cannot watch the workdir: " + err.Error()
		c.mu.Unlock()
		return
	}
	w := sub.Watcher()
	c.mu.Lock()
	c.watcher = w
	c.mu.Unlock()
	viewstamp.Changed()
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sub.Close()
		c.unfollow()
	}()
	// The daemon reports ready only once the tree is watched, so a change
	// made right after start is seen; what changed while the watches were
	// being added is read once more.
	select {
	case <-w.Ready():
		if s := c.snapshotter(); s != nil {
			s.store.Follow() // snapshots from what changed, after the start snapshot
			select {
			case <-stopped: // stopped since: Stopped's unfollow may have come first
				c.unfollow()
			default:
			}
		}
	case <-ctx.Done():
	case <-stopped:
	case <-time.After(30 * time.Second):
		c.log.Warn("the workdir watcher is slow to start; going on", "workdir", wd)
	}
	c.checkHandoffs(ctx)
}

// unfollow tells the snapshot store that no watcher reports the changes
// any more.
func (c *Capture) unfollow() {
	if s := c.snapshotter(); s != nil {
		s.store.Unfollow()
	}
}

// Watching is the workdir watcher (shared with the other agents on the
// workdir), or nil.
func (c *Capture) Watching() *watch.Watcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watcher
}

// DegradedSources names what could not be watched, for resume.
func (c *Capture) DegradedSources() []string {
	c.mu.Lock()
	w := c.watcher
	c.mu.Unlock()
	var out []string
	if w != nil && w.Degraded() != "" {
		out = append(out, "watch")
	}
	if c.SnapshotError() != nil {
		out = append(out, "snapshots")
	}
	if c.workLostProblem() != "" {
		out = append(out, "work_lost")
	}
	if c.commitsProblem() != "" {
		out = append(out, "commits")
	}
	return out
}

// activity records a burst of file changes (paths redacted) and tells the
// policy; a change to a handoff file is read at once.
func (c *Capture) activity(ctx context.Context, s watch.Summary) {
	c.burst(s)
	if snaps := c.snapshotter(); snaps != nil {
		if s.Complete {
			snaps.store.NoteChanged(s.Changed)
		} else {
			snaps.store.NoteUnknown()
		}
	}
	paths := make([]string, 0, len(s.Paths))
	// A summary lists at most some paths: past that, look anyway.
	handoffChanged := s.Rescanned || s.Count > len(s.Paths)
	for _, p := range s.Paths {
		if p == filepath.ToSlash(c.o.Watch.HandoffFile) || p == filepath.ToSlash(c.o.Watch.CapsuleFile) {
			handoffChanged = true
		}
		paths = append(paths, c.guard.Redact(p))
	}
	c.store.NoteActivity(paths, s.Count)
	c.feed(policy.Input{Kind: policy.KindActivity, At: s.Last})
	if handoffChanged {
		c.checkHandoffs(ctx)
	}
}

// checkHandoffs reads the handoff files that changed since last applied:
// HANDOFF.md becomes derived focus and working state, the capsule file a
// capsule draft. A file that fails the guards is refused and the reason is
// shown in resume and status until it is fixed.
//
// The workdir may hold a cloned repository, so these files are untrusted:
// they are opened inside the workdir (a symbolic link leading out of it is
// refused, not followed), must be regular files (a FIFO is never waited
// on, a device never read) and are read through the size limit, so an
// oversized file is refused without being read.
func (c *Capture) checkHandoffs(ctx context.Context) {
	wd := c.o.Workdir
	op := c.o.opener()
	for _, name := range []string{c.o.Watch.HandoffFile, c.o.Watch.CapsuleFile} {
		raw, fi, oerr := safefile.ReadFileInWith(op, wd, name, guard.MaxBodyBytes)
		if errors.Is(oerr, fs.ErrNotExist) {
			continue
		}
		// What was seen: the file's mtime, or the refusal (a refused link
		// or FIFO is reported once, not at every burst of activity).
		var state string
		var mtime time.Time
		if fi != nil {
			mtime = fi.ModTime()
			state = mtime.UTC().Format(time.RFC3339Nano)
		}
		if oerr != nil && fi == nil {
			state = "refused: " + oerr.Error()
		}
		c.mu.Lock()
		seen := c.handoffs[name]
		c.mu.Unlock()
		if state == seen {
			continue
		}
		var d *policy.Derived
		var rerr *capsule.Error
		if oerr != nil {
			rerr = refuseFile(name, oerr)
		} else {
			d, rerr = c.readHandoff(name, raw, mtime)
		}
		c.mu.Lock()
		c.handoffs[name] = state
		c.mu.Unlock()
		if err := c.store.NoteRefusal(ctx, name, rerr); err != nil && ctx.Err() == nil {
			c.log.Warn("cannot record the handoff file's state", "err", err)
		}
		if rerr != nil {
			c.log.Warn("handoff file refused", "file", name, "code", rerr.Code, "field", rerr.Field, "reason", rerr.Message)
			continue
		}
		c.feed(policy.Input{Kind: policy.KindDerived, At: time.Now(), Derived: d})
	}
}

// refuseFile is the refusal shown for a handoff file that was not read.
func refuseFile(name string, err error) *capsule.Error {
	var se *safefile.Error
	if !errors.As(err, &se) {
		return capsule.Refuse(capsule.CodeInvalidField, name, "cannot be read: %v", err)
	}
	if errors.Is(err, safefile.ErrTooLarge) {
		return capsule.Refuse(capsule.CodeBodyTooLarge, name, "%s (%d bytes)", se.Detail, guard.MaxBodyBytes)
	}
	return capsule.Refuse(capsule.CodeInvalidField, name, "%s", se.Detail)
}

// readHandoff parses and guards one handoff file's content.
func (c *Capture) readHandoff(name string, raw []byte, mtime time.Time) (*policy.Derived, *capsule.Error) {
	d := &policy.Derived{Source: name, ChangedAt: mtime}
	if name == c.o.Watch.CapsuleFile {
		cp, err := c.guard.DecodeCapsule(raw)
		if err != nil {
			return nil, asError(err)
		}
		d.Capsule = cp
		return d, nil
	}
	h, err := handoff.Parse(raw)
	if err != nil {
		return nil, capsule.Refuse(capsule.CodeInvalidField, name, "%v", err)
	}
	hc := h.Capsule()
	if err := c.guard.CheckCapsule(&hc); err != nil {
		return nil, asError(err)
	}
	// The same checks an agent's own checkpoint gets.
	cp := map[string]any{}
	ws := map[string]any{}
	set := func(dst *(*string), v string) {
		if v != "" {
			s := v
			*dst = &s
		}
	}
	set(&d.Focus, h.Goal)
	set(&d.NextAction, h.Next)
	set(&d.LastResult, h.Done)
	set(&d.WaitingFor, h.Blockers)
	if d.Focus != nil {
		cp["focus"] = *d.Focus
	}
	for k, v := range map[string]*string{"next_action": d.NextAction, "last_result": d.LastResult, "waiting_for": d.WaitingFor} {
		if v != nil {
			ws[k] = *v
		}
	}
	if len(ws) > 0 {
		cp["working_state"] = ws
	}
	if len(cp) > 0 {
		body, _ := json.Marshal(cp)
		if _, err := c.guard.DecodeCheckpoint(body); err != nil {
			return nil, asError(err)
		}
	}
	if h.DoNot != "" || h.Refuted != "" {
		d.Capsule = &hc
	}
	return d, nil
}

func asError(err error) *capsule.Error {
	var ce *capsule.Error
	if errors.As(err, &ce) {
		return ce
	}
	return capsule.Refuse(capsule.CodeInvalidField, "", "%v", err)
}

// Signal tells the policy about a stored signal (from the store's commit).
func (c *Capture) Signal(s *capsule.Signal) {
	if s.TranscriptPath != "" && s.Via != "transcript" {
		if c.transcripts.bind(s.TranscriptPath) && c.o.Transcripts.Enabled {
			c.transcripts.follow(s.TranscriptPath)
		}
	}
	c.toolSignal(s)
	c.sessionStopped(s)
	c.notePrompt(s)
	sc := *s
	c.feed(policy.Input{Kind: policy.KindSignal, At: s.At, Signal: &sc})
}

// Guard is the guard the capture checks what it derives with (a reload
// with new link domains reopens the agent to change it).
func (c *Capture) Guard() *guard.Guard { return c.guard }
