package snapshot

import (
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/restore"
	"github.com/continuityd/continuityd/daemon/snapshot/take"
	"github.com/continuityd/continuityd/internal/ops"
)

// The store's answers, as the daemon, the API and the owner's worker see
// them (the worker carries them as JSON). The parts of the store answer in
// their own types (repo, take, restore, gc); the façade converts
// (convert.go).

// Snapshot is one snapshot of the work tree.
type Snapshot struct {
	ID       string    `json:"id"` // the commit's hash in the store
	Time     time.Time `json:"at"`
	Trigger  string    `json:"trigger"`          // what caused it: "quiet", "threshold", "restore", …
	Seq      uint64    `json:"seq"`              // the residency seq it belongs to
	Parent   string    `json:"parent,omitempty"` // the snapshot before it, "" for the first
	Added    int       `json:"added"`            // files, against Parent
	Modified int       `json:"modified"`
	Deleted  int       `json:"deleted"`
	Skipped  int       `json:"skipped"` // files left out for their size or unreadable
	// Conversation is where the agent's conversation stood when the
	// snapshot was taken (SetConversation); nil when no transcript was
	// followed, and for snapshots taken before it was recorded.
	Conversation *Conversation `json:"conversation,omitempty"`
	// Message is the message it was asked for with (snapshot take
	// --message); "" for the automatic ones.
	Message string `json:"message,omitempty"`
	// Took is how long the Take that made it spent, phase by phase; zero
	// on snapshots read back by List or Show.
	Took Timings `json:"-"`
}

// Files is the number of files the snapshot changed against its parent.
func (s Snapshot) Files() int { return s.Added + s.Modified + s.Deleted }

// Timings are the phases of one Take.
type Timings struct {
	Walk   time.Duration `json:"walk"`   // the size walk of the workdir (or of the changed paths)
	Add    time.Duration `json:"add"`    // the files stored: git add -A into the private index, or read and written in process
	Tree   time.Duration `json:"tree"`   // the trees: git write-tree and the diff against the parent, or written in process
	Commit time.Duration `json:"commit"` // the commit and its ref
	Total  time.Duration `json:"total"`
	// Files is how many files the walk found in the workdir (a snapshot
	// stores them all, less those skipped); in a Take from what changed,
	// in the changed paths only.
	Files int64 `json:"files"`
	// Incremental is set when the Take looked at the changed paths only
	// (NoteChanged), Paths of them.
	Incremental bool `json:"incremental,omitempty"`
	Paths       int  `json:"paths,omitempty"`
}

// Skipped is a file a snapshot left out (internal/ops declares it, as the
// API answers it).
type Skipped = ops.Skipped

// Skip reasons.
const (
	ReasonTooLarge    = repo.ReasonTooLarge
	ReasonUnreadable  = repo.ReasonUnreadable
	ReasonRepository  = repo.ReasonRepository  // a nested repository, submodule or linked worktree: left out whole
	ReasonGitName     = repo.ReasonGitName     // a name git takes for .git (".GIT", ".Git", …) and never adds
	ReasonPathTooLong = repo.ReasonPathTooLong // a path longer than the system's limit (4,095 bytes with the workdir)
)

// Progress is what a Take under way is doing: Step is "" when none is,
// else StepWalk (Files counts the files found so far), StepStore (Files
// is how many the walk found) or StepTree.
type Progress struct {
	Step  string `json:"step,omitempty"`
	Files int64  `json:"files,omitempty"`
}

// The steps of a Take, for Progress.
const (
	StepWalk  = take.StepWalk
	StepStore = take.StepStore
	StepTree  = take.StepTree
)

// FileChange is one file a snapshot changed against its parent
// (internal/ops declares it, as the API answers it).
type FileChange = ops.FileChange

// Detail is one snapshot with its files.
type Detail struct {
	Snapshot
	// Files are the files changed against the parent (all files, as
	// added, for a first snapshot), at most MaxShowFiles.
	Files    []FileChange `json:"files"`
	FilesCut bool         `json:"files_cut,omitempty"` // more files than listed
	// ParentGone says retention dropped the parent: Files is empty, the
	// counts are those recorded when the snapshot was taken.
	ParentGone bool `json:"parent_gone,omitempty"`
	// SkippedFiles are the files left out (at most 1,000 named; SkippedMore
	// counts the rest).
	SkippedFiles []Skipped `json:"skipped_files"`
	SkippedMore  int       `json:"skipped_more,omitempty"`
	// Withheld are the files the machine that took an imported snapshot
	// kept off the fleet (credentials): this copy has no content for them.
	Withheld []Withheld `json:"withheld,omitempty"`
}

// Status names of FileChange.
const (
	StatusAdded    = ops.StatusAdded
	StatusModified = ops.StatusModified
	StatusDeleted  = ops.StatusDeleted
)

// Conversation is the point of the agent's conversation a snapshot
// matches: the session its followed transcript belongs to and the id of
// the last message read from it when the snapshot was taken (Claude
// Code's entry uuid, Codex's response item id or turn id). A person who
// rewinds the code to a snapshot knows which turn to rewind the
// conversation to.
type Conversation struct {
	Session string `json:"session,omitempty"`
	Message string `json:"message,omitempty"`
}

// TreeChange is a file that differs between two snapshots: its git object
// and mode on each side, "" on the side where it is absent. Two sides with
// the same object hold the same bytes, in this store and in any git
// repository (the agent's own included), so a caller can tell whether a
// commit holds a snapshot's file by comparing hashes.
type TreeChange struct {
	Path    string `json:"path"`
	OldID   string `json:"old_id,omitempty"`
	NewID   string `json:"new_id,omitempty"`
	OldMode string `json:"old_mode,omitempty"`
	NewMode string `json:"new_mode,omitempty"`
}

// Object is one git object of a snapshot.
type Object struct {
	ID   string `json:"id"`   // its git hash
	Type string `json:"type"` // "commit", "tree" or "blob"
}

// Withheld is a file a snapshot's copy for the fleet left out, and why (a
// credential file, say): the machine that receives it has no content for
// it, and a restore there leaves the file as it is. internal/ops declares
// it, as the API answers it.
type Withheld = ops.Withheld

// RestoreResult says what a restore changed (or, in a dry run, would);
// Refusal is a file it left alone. internal/ops declares them, as the API
// answers them.
type (
	RestoreResult = ops.RestoreResult
	Refusal       = ops.Refusal
)

// InterruptedRestore is a restore that a kill, a crash or a full disk
// interrupted (the restore package keeps it across restarts, and says
// what each field means).
type InterruptedRestore = restore.Interrupted

// GCResult says what a GC did.
type GCResult struct {
	Dropped   int           // snapshots removed by retention
	Kept      int           // snapshots left
	Bytes     int64         // the store's size on disk afterwards
	Took      time.Duration //
	OverBytes bool          // the newest snapshot alone is over KeepBytes
}

// CheckID normalizes a snapshot id a person typed (a full id or a prefix
// of 7+ characters) and refuses, naming field, one that cannot be.
func CheckID(id, field string) (string, error) { return repo.CheckID(id, field) }

// WithheldLine is the line of a commit message that names one withheld
// file (Show reads it back into Detail.Withheld).
func WithheldLine(w Withheld) string { return repo.WithheldLine(repo.Withheld(w)) }
