// Package worklost notices uncommitted work that vanished from the tree:
// a snapshot held changes that no commit holds, and the next
// snapshot no longer has them, because of a `git checkout -- .`, a `git
// reset --hard`, a `git stash`, an `rm` or an editor's revert, whoever did
// it. It names the paths, the snapshot that holds them and the one command
// that brings them back.
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
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
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
	for _, c := range candidates {
		if headBefore[c.Path] == c.OldID {
			continue // Before held what HEAD held: no uncommitted work
		}
		gone := c.NewID == "" || c.NewID == headAfter[c.Path]
		if gone && headAfter[c.Path] != c.OldID {
			lost = append(lost, c.Path)
		}
	}
	if len(lost) == 0 {
		return nil, nil
	}
	slices.Sort(lost)
	return &WorkLost{At: in.At, Paths: lost, Snapshot: in.Before.Snapshot,
		Restore: RestoreCommand(in.Before.Snapshot, in.Agent, lost)}, nil
}

// RestoreCommand is the command that brings paths back from snapshot id,
// as `continuityd snapshot restore ID [--agent A] --path P...` takes it.
func RestoreCommand(id, agent string, paths []string) string {
	var b strings.Builder
	b.WriteString("continuityd snapshot restore ")
	b.WriteString(shellWord(id))
	if agent != "" {
		b.WriteString(" --agent ")
		b.WriteString(shellWord(agent))
	}
	for _, p := range paths {
		b.WriteString(" --path ")
		b.WriteString(shellWord(p))
	}
	return b.String()
}

// shellWord quotes s for a POSIX shell when it needs it: as is when it is
// made of safe characters, in single quotes otherwise, and as $'…' with
// visible escapes when it holds a control character (or bytes that are not
// UTF-8), so a person never gets a raw control character and the command
// still names the file exactly.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./-+,:@%=", r))
	}) < 0 {
		return s
	}
	plain := utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool {
		return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u2028' || r == '\u2029'
	}) < 0
	if plain {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}
