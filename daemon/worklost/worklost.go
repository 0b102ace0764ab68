// Package worklost notices uncommitted work that vanished from the tree:
// a snapshot held changes that no commit holds, and the next
// snapshot no longer has them, because of a `git checkout -- .`, a `git
// reset --hard`, a `git stash`, an `rm` or an editor's revert, whoever did
// it. It names the paths, the snapshot that holds them and the one command
// that brings them back (by the loss's id, so that it needs no quoting of
// names).
//
// The rule, per path p, going from snapshot Before to snapshot After:
//
//   - Before held work on p that HEAD did not: Before has p, and its
//     object differs from p's at Before's HEAD (a tracked file modified, or
//     a new file). A deletion is not work to lose.
//   - After no longer has that work: p is gone, or is back to what the
//     HEAD of After's time holds (reverted).
//   - No commit holds it: p's object at After's HEAD is not Before's (a
//     commit of the work, then a reset, is the user's choice, not a loss).
//   - The daemon did not do it: paths a daemon restore wrote or removed
//     since Before are left out.
//
// A path edited on to new content is work going on, not work lost.
//
// The agent's repository is only read, by a long-lived `git cat-file
// --batch` (`git ls-tree` for what cat-file cannot be asked), built by
// internal/gittool: optional locks off, nothing of the repository's config
// able to start a program or fetch, the system and global configuration
// not read; nothing in it is written (repo.go). A repository git refuses
// (another user's: "dubious ownership"), or a partial clone on a git too
// old to be kept from fetching, makes every check fail with the reason,
// which the daemon shows as degraded.
package worklost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// Point is a snapshot and the agent's HEAD commit when it was taken ("" when
// the repository had no commit, or the workdir is not in one).
type Point struct {
	Snapshot string
	Head     string
}

// WorkLost is uncommitted work that vanished, and the way back: the
// resume's work_lost entry.
type WorkLost = capsule.WorkLost

// Snapshots is what Detect asks of the snapshot store: *snapshot.Store,
// or the store in the owner's worker when the daemon runs as root over
// another user's tree.
type Snapshots interface {
	Between(ctx context.Context, from, to string) ([]snapshot.TreeChange, error)
}

// Input is one step from one snapshot to the next.
type Input struct {
	Store  Snapshots
	Repo   *Repo  // the agent's repository, whose workdir is the snapshots' root
	Agent  string // named in the restore command with --agent; "" leaves it out
	Before Point
	After  Point
	// Restored are the paths (relative to the workdir) a restore by the
	// daemon wrote or removed since Before: its changes are not losses.
	Restored []string
	At       time.Time // when the loss was seen
	// Journal, when set, is the version journal: a lost path whose newer
	// content it kept is brought back at that version.
	Journal Journal
}

// Journal is what Detect asks of the version journal.
type Journal interface {
	// NewestExcept is p's newest kept version not after until whose
	// content (blob id) is none of not: its id and time.
	NewestExcept(p string, until time.Time, not ...string) (id string, at time.Time, ok bool)
}

// Detect returns the work lost from Before to After, nil when none was.
func Detect(ctx context.Context, in Input) (*WorkLost, error) {
	if in.Store == nil || in.Repo == nil || in.Before.Snapshot == "" || in.After.Snapshot == "" {
		return nil, errors.New("worklost: a store, the repository's reader and two snapshots are needed")
	}
	changes, err := in.Store.Between(ctx, in.Before.Snapshot, in.After.Snapshot)
	if err != nil {
		return nil, err
	}
	restored := map[string]bool{}
	for _, p := range in.Restored {
		restored[p] = true
	}
	var candidates []snapshot.TreeChange
	for _, c := range changes {
		if c.OldID == "" || c.OldMode == "040000" || c.OldMode == "160000" || restored[c.Path] {
			continue // nothing held (an added file), a directory, a nested repository, the daemon's own restore
		}
		candidates = append(candidates, c)
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	paths := make([]string, len(candidates))
	for i, c := range candidates {
		paths[i] = c.Path
	}
	r := in.Repo
	headBefore, err := r.objects(ctx, in.Before.Head, paths)
	if err != nil {
		return nil, err
	}
	headAfter := headBefore
	if in.After.Head != in.Before.Head {
		if headAfter, err = r.objects(ctx, in.After.Head, paths); err != nil {
			return nil, err
		}
	}
	var lost []string
	var versions []capsule.LostVersion
	for _, c := range candidates {
		if headBefore[c.Path] == c.OldID {
			continue // Before held what HEAD held: no uncommitted work
		}
		gone := c.NewID == "" || c.NewID == headAfter[c.Path]
		if gone && headAfter[c.Path] != c.OldID {
			lost = append(lost, c.Path)
			if in.Journal == nil {
				continue
			}
			// What stood just before it vanished: the journal's newest
			// version that is neither what replaced it nor HEAD's; when
			// that is the snapshot's own content, the snapshot has it.
			if vid, at, ok := in.Journal.NewestExcept(c.Path, in.At, c.NewID, headAfter[c.Path]); ok && isNewer(in.Journal, c.Path, at, c.OldID) {
				versions = append(versions, capsule.LostVersion{Path: termsafe.Exact(c.Path), Version: vid, At: at})
			}
		}
	}
	if len(lost) == 0 {
		return nil, nil
	}
	slices.Sort(lost)
	slices.SortFunc(versions, func(a, b capsule.LostVersion) int { return a.At.Compare(b.At) })
	id := ID(in.Before.Snapshot, in.At)
	return &WorkLost{ID: id, At: in.At, Paths: lost, Snapshot: in.Before.Snapshot, Versions: versions,
		Restore: RestoreCommand(id, in.Agent), RestorePaths: PathsCommand(in.Before.Snapshot, in.Agent, ExactPaths(lost))}, nil
}

// isNewer reports whether p's version at at holds other content than the
// snapshot's (old): the journal's is newer work then.
func isNewer(j Journal, p string, at time.Time, old string) bool {
	_, at2, ok := j.NewestExcept(p, at, old)
	return ok && at2.Equal(at)
}

// ID names the loss found at at in snapshot (a resume's work_lost entry):
// plain ASCII, so the command that restores it by its id needs no
// quoting, whatever the lost files are called.
func ID(snapshot string, at time.Time) string {
	sum := sha256.Sum256([]byte(snapshot + " " + at.UTC().Format(time.RFC3339Nano)))
	return "wl-" + hex.EncodeToString(sum[:6])
}

// RestoreCommand is the command that brings back the loss id, as
// `continuityd snapshot restore --lost ID [--agent A]` takes it: it names
// no file, so it is pasted into any shell (bash, dash, a script) as it is.
func RestoreCommand(id, agent string) string {
	cmd := "continuityd snapshot restore --lost " + shellWord(id)
	if agent != "" {
		cmd += " --agent " + shellWord(agent)
	}
	return cmd
}

// PathsCommand is the same restore with the paths named, `continuityd
// snapshot restore ID [--agent A] --path P...`, for a person to read and
// adapt: each path is given as Name prints it (termsafe.ShowExact of its
// exact form; --path reads that form back, see termsafe.Exact), inside
// single quotes when it needs any, so it holds no control character, no
// $'…' a POSIX shell would not know, and nothing a shell expands.
func PathsCommand(snapshot, agent string, exact []string) string {
	var b strings.Builder
	b.WriteString("continuityd snapshot restore ")
	b.WriteString(shellWord(snapshot))
	if agent != "" {
		b.WriteString(" --agent ")
		b.WriteString(shellWord(agent))
	}
	for _, p := range exact {
		b.WriteString(" --path ")
		b.WriteString(shellWord(termsafe.ShowExact(p)))
	}
	return b.String()
}

// ExactPaths are paths in their exact form (termsafe.Exact).
func ExactPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = termsafe.Exact(p)
	}
	return out
}

// shellWord quotes s for a POSIX shell when it needs it: as is when it is
// made of safe characters, in single quotes otherwise (a single quote
// inside closes them, is escaped with a backslash, and opens them again).
// s holds no control character (the names are given as termsafe.Name
// prints them), so single quotes suffice.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./-+,:@%=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
