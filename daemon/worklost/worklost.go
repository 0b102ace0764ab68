// Package worklost notices uncommitted work that vanished from the tree
// (issue 24): a snapshot held changes that no commit holds, and the next
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
// The agent's repository is only read, with `git ls-tree` and `git
// rev-parse`, with optional locks off, hooks off and the system and global
// configuration not read; nothing in it is written.
package worklost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// Input is one step from one snapshot to the next.
type Input struct {
	Store   *snapshot.Store
	Workdir string // the agent's work tree, the snapshots' root
	Git     string // the git binary; "" looks up "git" on PATH
	Agent   string // named in the restore command with --agent; "" leaves it out
	Before  Point
	After   Point
	// Restored are the paths (relative to the workdir) a restore by the
	// daemon wrote or removed since Before: its changes are not losses.
	Restored []string
	At       time.Time // when the loss was seen
}

// gitTimeout bounds each read of the agent's repository.
const gitTimeout = 30 * time.Second

// Detect returns the work lost from Before to After, nil when none was.
func Detect(ctx context.Context, in Input) (*WorkLost, error) {
	if in.Store == nil || in.Before.Snapshot == "" || in.After.Snapshot == "" {
		return nil, errors.New("worklost: a store and two snapshots are needed")
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
	r := repo{git: in.Git, dir: in.Workdir}
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

// repo reads the agent's repository.
type repo struct{ git, dir string }

// env is the environment of a read of the agent's repository: the
// daemon's own GIT_* variables left out, no system or global
// configuration, no optional locks, pathspecs taken literally.
func (r repo) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_OPTIONAL_LOCKS=0",
		"GIT_LITERAL_PATHSPECS=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
}

func (r repo) run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	bin := r.git
	if bin == "" {
		bin = "git"
	}
	full := append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Dir = r.dir
	cmd.Env = r.env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 512 {
			msg = msg[:512]
		}
		return out, fmt.Errorf("worklost: git %s in the workdir: %w: %s", args[0], err, msg)
	}
	return out, nil
}

// Head returns the commit the agent's HEAD names in workdir, "" when the
// repository has no commit yet or the workdir is in no repository (then
// every file a snapshot holds is uncommitted work).
func Head(ctx context.Context, git, workdir string) (string, error) {
	out, err := repo{git: git, dir: workdir}.run(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && (ee.ExitCode() == 1 || strings.Contains(err.Error(), "not a git repository")) {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// maxPathspecs is how many paths are named to ls-tree; with more, the
// whole tree is listed and filtered.
const maxPathspecs = 256

// objects returns the object of each path at commit ("" for a path the
// commit lacks; every path lacks one when commit is "").
func (r repo) objects(ctx context.Context, commit string, paths []string) (map[string]string, error) {
	out := map[string]string{}
	if commit == "" {
		return out, nil
	}
	args := []string{"ls-tree", "-r", "-z", commit}
	if len(paths) <= maxPathspecs {
		args = append(append(args, "--"), paths...)
	}
	b, err := r.run(ctx, args...)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	for entry := range bytes.SplitSeq(b, []byte{0}) {
		// "<mode> SP <type> SP <hash> TAB <path>"
		meta, path, ok := bytes.Cut(entry, []byte{'\t'})
		if !ok || !want[string(path)] {
			continue
		}
		if f := strings.Fields(string(meta)); len(f) == 3 {
			out[string(path)] = f[2]
		}
	}
	return out, nil
}
