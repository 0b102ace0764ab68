package ops

import "time"

// The answers of the work snapshots' operations. daemon/snapshot keeps
// the store's own Snapshot and Detail (with what only the store needs);
// the other types here are its, under its own names.

// Latest names the newest snapshot where an id is asked for.
const Latest = "latest"

// FleetFetchTimeout bounds the fetch of a snapshot only the fleet has,
// which a show, diff or restore of it waits for first: the API's answer
// and the client allow for it.
const FleetFetchTimeout = 2 * time.Minute

// SnapshotList is the answer to GET /v1/snapshots and the snapshot_list
// tool: the agent's work snapshots, newest first.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

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
	// snapshot was taken; nil when no transcript was followed, and for
	// snapshots taken before it was recorded.
	Conversation *Conversation `json:"conversation,omitempty"`
	// Message is the message it was asked for with (snapshot take
	// --message); none on the automatic ones.
	Message string `json:"message,omitempty"`
}

// TakeAnswer is what POST /v1/snapshots did: the snapshot taken, or, when
// the tree had not changed since the newest one, that one with New false
// (no two snapshots hold the same tree; the message is then not kept).
type TakeAnswer struct {
	Snapshot Snapshot `json:"snapshot"`
	New      bool     `json:"new"`
}

// Conversation is where an agent's conversation stood: its session and
// the last message of it, as its transcript names them.
type Conversation struct {
	Session string `json:"session,omitempty"`
	Message string `json:"message,omitempty"`
}

// Detail is one snapshot with its files.
type Detail struct {
	Snapshot
	// Files are the files changed against the parent (all files, as
	// added, for a first snapshot), at most 1,000.
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

// FileChange is one file a snapshot changed against its parent, or a
// restore changes.
type FileChange struct {
	Path         string `json:"path"`
	Status       string `json:"status"` // "added", "modified" or "deleted"
	LinesAdded   int    `json:"lines_added"`
	LinesDeleted int    `json:"lines_deleted"`
	Binary       bool   `json:"binary,omitempty"` // no line counts
	// By is whose change the file is, in a snapshot's file list: "agent"
	// (this agent's own tool calls), "agent:NAME" (another agent of the
	// daemon) or "outside" (nobody claimed it); left out when the daemon
	// cannot tell (the first snapshot, a change made before it watched).
	By string `json:"by,omitempty"`
}

// Status names of FileChange.
const (
	StatusAdded    = "added"
	StatusModified = "modified"
	StatusDeleted  = "deleted"
)

// Skipped is a file a snapshot left out.
type Skipped struct {
	Path   string `json:"path"`   // relative to the workdir, with "/"
	Size   int64  `json:"size"`   // bytes, when known
	Reason string `json:"reason"` // too_large, unreadable, repository, git_name, path_too_long
}

// Withheld is a file a snapshot's copy for the fleet left out, and why
// (a credential file, say): the machine that receives it has no content
// for it, and a restore there leaves the file as it is.
type Withheld struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// DiffAnswer is a snapshot's unified diff.
type DiffAnswer struct {
	ID      string `json:"id"`
	Against string `json:"against,omitempty"` // "" : its parent
	Diff    string `json:"diff"`
	Cut     bool   `json:"cut"` // the diff was longer than the bound
}

// RestoreResult says what a restore changed (or, in a dry run, would).
type RestoreResult struct {
	Snapshot string `json:"snapshot"` // the snapshot restored from
	DryRun   bool   `json:"dry_run"`
	// Safety is the snapshot of the tree as it was before the restore (a
	// new one, or the newest when the tree had not changed since):
	// restoring it undoes this restore. Empty in a dry run.
	Safety    string `json:"safety,omitempty"`
	SafetyNew bool   `json:"safety_new,omitempty"`
	// Changes are the files the restore writes or removes: "added" (comes
	// back), "modified" (content, mode or type changes), "deleted" (is
	// removed: it is not in the snapshot).
	Changes []FileChange `json:"changes"`
	// Refused are files the restore leaves alone, with the reason: a file
	// or directory that no snapshot holds is in the way, or a nested
	// repository.
	Refused []Refusal `json:"refused,omitempty"`
}

// Refusal is a file a restore left alone.
type Refusal struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Scopes of a restore (RestoreAnswer.Scope).
const (
	// ScopeMine: no paths and not all: the paths this agent changed since
	// the snapshot, as the workdir's attribution ledger credits them.
	ScopeMine = "mine"
	// ScopePaths: the paths the request named.
	ScopePaths = "paths"
	// ScopeAll: the whole tree (all), as a restore was before agents
	// shared workdirs.
	ScopeAll = "all"
)

// RestoreAnswer is what POST /v1/snapshots/{id}/restore did (or, in a dry
// run, would do).
type RestoreAnswer struct {
	RestoreResult
	// Scope is what the restore covered: "mine" (the default: this
	// agent's own paths), "paths", "all", or "lost" (one work_lost entry).
	Scope string `json:"scope"`
	// LeftAlone are, for a restore of this agent's own paths, the files
	// that differ from the snapshot and that it left as they are, each
	// with whose change it is: "agent:NAME" (another agent) or "outside"
	// (nobody's tool: a person, an editor, another program).
	LeftAlone []LeftAlone `json:"left_alone,omitempty"`
}

// LeftAlone is a file a restore of the agent's own paths did not touch,
// and whose change it is.
type LeftAlone struct {
	Path string `json:"path"`
	By   string `json:"by"`
}
