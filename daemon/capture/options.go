package capture

import (
	"log/slog"
	"time"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/policy"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/daemon/sources/watch"
	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/safefile"
)

// Options are what one agent's capture needs: the daemon's wiring builds
// them from the configuration (the agent's table, [watch], [transcripts],
// [policy], [snapshots]), so this package never reads the configuration
// itself and a test states exactly what it runs with.
type Options struct {
	Agent   string // the agent's name
	Dir     string // the agent's state directory (the transcript offsets are kept there)
	Workdir string // the agent's workdir; "" : nothing is watched or followed

	Store  *residency.Store // the agent's residency, written through
	Guard  *guard.Guard     // what the capture derives is checked with it
	Logger *slog.Logger

	Policy      policy.Config // the agent's automatic checkpoint policy
	Watch       WatchOptions
	Transcripts TranscriptOptions
	// Attribution is the ledger of whose work each change in the workdir
	// is, shared by every agent on that workdir; nil: nothing is credited
	// (no workdir).
	Attribution *attribution.Ledger
	// OnConflict is told each conflict the agent's feed of the ledger
	// finds (a path two agents changed): the daemon tells every agent it
	// names. It must not block. nil: not told.
	OnConflict func(attribution.Conflict)
	// Watches is where the workdir's watcher is subscribed to: the daemon
	// shares one per workdir, so the tree is watched once however many
	// agents work in it (each is told every burst). nil: the capture
	// runs a watcher of its own.
	Watches *watch.Shared
	// TranscriptClaims is shared by every agent on the workdir, so that
	// no two follow one transcript; nil: the agent is alone.
	TranscriptClaims *TranscriptClaims
	// RestoreGate is shared by every agent on the workdir, so a restore by
	// one is not lost work for the others; nil: the agent is alone.
	RestoreGate *RestoreGate
	// CatchUpOutside has the start snapshot's changes against the last
	// snapshot (what changed while the workdir was not watched: a place
	// watched again) credited to nobody's tool, outside, and noted as
	// activity, so resume names them and the policy records them.
	CatchUpOutside bool
	// SnapshotOnExplicitCheckpoint lets the agent's own checkpoint be
	// followed by a work record (snapshots.on_explicit_checkpoint).
	SnapshotOnExplicitCheckpoint bool

	// Opener opens the files of the workdir and the transcripts' home
	// (handoff files, transcripts, the repository's .git files, the
	// ignore files the workdir's watcher reads); nil:
	// this process opens them (safefile.Here). A daemon running as root
	// over another user's workdir opens them as that user.
	Opener safefile.Opener
	// GitAs is who git runs as on the agent's own repository (the
	// work-lost checks, the subjects of packed commits); nil: the
	// daemon's own user. As root over another user's workdir, that user.
	GitAs *gittool.Credential
}

// opener is o.Opener, or this process's own opens.
func (o *Options) opener() safefile.Opener {
	if o.Opener == nil {
		return safefile.Here
	}
	return o.Opener
}

// WatchOptions say how the workdir is watched and which handoff files in
// it are read.
type WatchOptions struct {
	Enabled    bool
	Ignore     []string      // gitignore-style patterns, relative to the workdir
	IgnoreDirs []string      // directory names never watched
	Quiet      time.Duration // activity is summarised after this long without change
	Settle     time.Duration // a file settled after this long without a write (the version journal); 0: watch's default
	// HandoffFile and CapsuleFile are the handoff files, relative to the
	// workdir: the first becomes derived focus and working state, the
	// second a capsule draft.
	HandoffFile, CapsuleFile string
	// Own are the daemon's own directories (state, socket): where one lies
	// inside the workdir it is ignored, so the daemon's writes never count
	// as the agent's work.
	Own []string
}

// The kinds of transcript an agent may follow (TranscriptOptions.Kind).
const (
	KindClaudeCode = "claude-code"
	KindCodex      = "codex"
)

// TranscriptOptions say where the agent's transcripts are found.
type TranscriptOptions struct {
	Enabled               bool
	ClaudeHome, CodexHome string
	// Kind is whose transcripts the agent follows: KindClaudeCode's (in
	// ClaudeHome) or KindCodex's (in CodexHome); "" either.
	Kind string
	// Rescan is how often the follower looks for a new session without a
	// file event (a safety net under the watches); 0: never, the watches
	// alone.
	Rescan time.Duration
}
