package transcript

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/safefile"
)

// Finder finds the transcript of the agent working in one directory and
// notices when a new session starts there: Claude Code writes a new
// <session>.jsonl into the directory's project folder, Codex a new rollout
// whose session_meta names the directory. Without a hook to say so, the
// new session's transcript is the one to follow from then on.
//
// The rule, so that two sessions open side by side do not make the choice
// flip at each write: the first Scan picks the most recently modified
// transcript; later Scans move only to a transcript that appeared since
// the Scan before (the newest of them, if several did), or, when the one
// followed is gone (or another agent's, SetTaken), to the newest left.
//
// A Finder is not safe for concurrent use; the follower owns it. It keeps
// the names of the workdir's transcripts and the cwd of each Codex rollout
// it has read, so a Scan reads only the first line of rollouts it has not
// seen before.
type Finder struct {
	claudeHome, codexHome, workdir string
	// taken says a transcript is another agent's (nil: none is): Scan
	// never picks it, and lets go of the one followed once it is.
	taken func(path string) bool
	op    safefile.Opener // opens the rollouts read for their cwd

	current string
	// pickedNew says the last Scan moved to a transcript that appeared
	// since the Scan before (a session begun), not to one left over.
	pickedNew bool
	// known holds the workdir's transcripts at the last Scan; nil before
	// the first.
	known map[string]bool
	// rolloutCwd caches the cwd each rollout's session_meta names ("" for a
	// rollout that names none), for the rollouts present at the last Scan.
	rolloutCwd map[string]string
}

// NewFinder returns a Finder for the agent working in workdir. claudeHome
// and codexHome are the configuration's transcripts.claude_home (~/.claude)
// and transcripts.codex_home (~/.codex); "" leaves that agent out.
func NewFinder(claudeHome, codexHome, workdir string) *Finder {
	return &Finder{claudeHome: claudeHome, codexHome: codexHome, workdir: filepath.Clean(workdir)}
}

// ClaudeProjectDir is the folder where Claude Code writes the workdir's
// transcripts ("" without a Claude home). It may not exist yet.
func (f *Finder) ClaudeProjectDir() string {
	if f.claudeHome == "" {
		return ""
	}
	return ClaudeProjectDir(f.claudeHome, f.workdir)
}

// CodexSessionsDir is the folder under which Codex writes its rollouts, in
// dated subfolders ("" without a Codex home).
func (f *Finder) CodexSessionsDir() string {
	if f.codexHome == "" {
		return ""
	}
	return filepath.Join(f.codexHome, "sessions")
}

// WatchDirs returns the folders in which a new session's transcript
// appears now, for a directory watch that calls Scan on a Create: the
// Claude Code project folder and today's Codex rollout folder
// (sessions/YYYY/MM/DD, local time). Some may not exist yet (a watch on
// them fails), and Codex's folder changes at midnight, so the follower
// should also call Scan now and then.
func (f *Finder) WatchDirs(now time.Time) []string {
	var dirs []string
	if d := f.ClaudeProjectDir(); d != "" {
		dirs = append(dirs, d)
	}
	if d := f.CodexSessionsDir(); d != "" {
		dirs = append(dirs, filepath.Join(d, now.Format("2006"), now.Format("01"), now.Format("02")))
	}
	return dirs
}

// WatchChains returns, for each folder of WatchDirs, that folder and its
// parents up to the agent's home (~/.claude, ~/.codex), nearest first. A
// follower watches all of them: a folder that does not exist yet (the
// first session in a project, a new day's Codex folder) is noticed when
// it is created in its parent, and the session in it at once, without
// waiting for a rescan.
func (f *Finder) WatchChains(now time.Time) [][]string {
	var chains [][]string
	for _, d := range f.WatchDirs(now) {
		home := f.claudeHome
		if !strings.HasPrefix(d, filepath.Clean(f.claudeHome)+string(filepath.Separator)) || f.claudeHome == "" {
			home = f.codexHome
		}
		home = filepath.Clean(home)
		chain := []string{d}
		for p := d; p != home && filepath.Dir(p) != p; {
			p = filepath.Dir(p)
			chain = append(chain, p)
		}
		chains = append(chains, chain)
	}
	return chains
}

// Settled reports whether the Finder has nothing more to learn from path
// before it changes: a transcript of the workdir it listed, or a rollout
// whose session_meta it has read. A write to a file that is not settled
// (a rollout whose first line was not complete yet) may make it the
// workdir's new session, so it is worth a Scan.
func (f *Finder) Settled(path string) bool {
	if f.known[path] {
		return true
	}
	_, ok := f.rolloutCwd[path]
	return ok
}

// SetTaken tells the Finder which transcripts are other agents' (several
// agents on one workdir, each following its own): Scan picks the newest
// one that is not taken, and moves off the one followed when it becomes
// taken (to the newest left, or to none).
func (f *Finder) SetTaken(taken func(path string) bool) { f.taken = taken }

// SetOpener has the Finder read the rollouts' first lines through op
// (nil: this process opens them), as the transcripts are then read.
func (f *Finder) SetOpener(op safefile.Opener) { f.op = op }

func (f *Finder) opener() safefile.Opener {
	if f.op == nil {
		return safefile.Here
	}
	return f.op
}

func (f *Finder) isTaken(path string) bool { return f.taken != nil && f.taken(path) }

// PickedNew reports whether the last Scan moved to a session that began
// since the Scan before (all of it is news), rather than to one that was
// there already (the one followed was gone or became another agent's:
// what it holds is history).
func (f *Finder) PickedNew() bool { return f.pickedNew }

// Follow tells the Finder the follower now follows path (a transcript a
// hook named): Scan keeps it until a newer session appears.
func (f *Finder) Follow(path string) { f.current = path }

// Scan looks at the workdir's transcripts and returns the one to follow
// (see Finder for the rule), its modification time, and whether it differs
// from the one returned (or given to Follow) before. path is "" when the
// workdir has no transcript.
func (f *Finder) Scan() (path string, modTime time.Time, changed bool) {
	found := f.list()
	first := f.known == nil
	var fresh, free []candidate // new since the last Scan; not another agent's
	for _, c := range found {
		if f.isTaken(c.path) {
			continue
		}
		free = append(free, c)
		if first || !f.known[c.path] {
			fresh = append(fresh, c)
		}
	}
	f.known = make(map[string]bool, len(found))
	for _, c := range found {
		f.known[c.path] = true
	}

	prev := f.current
	f.pickedNew = false
	// lost: none is followed, or the one followed is gone or another's.
	lost := f.current == "" || !exists(f.current) || f.isTaken(f.current)
	switch {
	case len(fresh) > 0 && !(first && !lost): // a Follow before the first Scan stands
		newestFirst(fresh)
		f.current = fresh[0].path
		f.pickedNew = !first
	case lost && len(free) > 0:
		newestFirst(free)
		f.current = free[0].path
	case lost:
		f.current = ""
	}
	for _, c := range found {
		if c.path == f.current {
			modTime = c.mtime
		}
	}
	if modTime.IsZero() && f.current != "" {
		if fi, err := os.Stat(f.current); err == nil {
			modTime = fi.ModTime()
		}
	}
	return f.current, modTime, f.current != prev
}

// list returns the workdir's transcripts of both agents.
func (f *Finder) list() []candidate {
	var found []candidate
	if d := f.ClaudeProjectDir(); d != "" {
		files, _ := claudeTranscripts(d) // a missing folder: no session yet
		found = append(found, files...)
	}
	if d := f.CodexSessionsDir(); d != "" {
		rollouts, _ := codexRollouts(d)
		seen := make(map[string]string, len(rollouts))
		for _, r := range rollouts {
			cwd, ok := f.rolloutCwd[r.path]
			if !ok {
				var final bool
				if cwd, final = codexRolloutCwd(f.opener(), r.path); !final {
					continue // its first line is not written yet: look again next time
				}
			}
			seen[r.path] = cwd
			if cwd != "" && filepath.Clean(cwd) == f.workdir {
				found = append(found, r)
			}
		}
		f.rolloutCwd = seen // forget the rollouts that are gone
	}
	return found
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// BelongsTo reports whether path is a transcript of a session launched in
// workdir, by the rules the Finder finds them with: a Claude Code session
// transcript directly in the workdir's project folder under claudeHome
// (side chains, agent-*.jsonl, are none), or a Codex rollout under
// codexHome/sessions whose session_meta names workdir as its cwd (its
// first line is read, through op; nil: this process opens it). "" leaves
// that kind out. A transcript of another directory, a subdirectory of the
// workdir included, belongs to no agent of this one: it is another
// project's.
func BelongsTo(op safefile.Opener, claudeHome, codexHome, workdir, path string) bool {
	path, workdir = filepath.Clean(path), filepath.Clean(workdir)
	name := filepath.Base(path)
	if !strings.HasSuffix(name, ".jsonl") {
		return false
	}
	if claudeHome != "" && !strings.HasPrefix(name, "agent-") && filepath.Dir(path) == ClaudeProjectDir(claudeHome, workdir) {
		return true
	}
	sessions := filepath.Join(codexHome, "sessions") + string(filepath.Separator)
	if codexHome == "" || !strings.HasPrefix(path, sessions) || !strings.HasPrefix(name, "rollout-") {
		return false
	}
	if op == nil {
		op = safefile.Here
	}
	cwd, _ := codexRolloutCwd(op, path)
	return cwd != "" && filepath.Clean(cwd) == workdir
}

// BelongsUnder is BelongsTo for a session launched in workdir or in a
// directory below it, as a hook names its session's transcript: a session
// in a project's subdirectory is the project's. A Claude Code transcript
// in another project folder must name a cwd under workdir in its first
// lines, and its folder's name must continue the workdir's (a neighbour,
// work-2 beside work, is not below it).
func BelongsUnder(op safefile.Opener, claudeHome, codexHome, workdir, path string) bool {
	if BelongsTo(op, claudeHome, codexHome, workdir, path) {
		return true
	}
	path, workdir = filepath.Clean(path), filepath.Clean(workdir)
	name, dir := filepath.Base(path), filepath.Dir(path)
	if op == nil {
		op = safefile.Here
	}
	below := func(cwd string) bool {
		return cwd != "" && strings.HasPrefix(filepath.Clean(cwd), workdir+string(filepath.Separator))
	}
	switch {
	case !strings.HasSuffix(name, ".jsonl"):
		return false
	case claudeHome != "" && !strings.HasPrefix(name, "agent-") && filepath.Dir(dir) == filepath.Join(claudeHome, "projects") &&
		strings.HasPrefix(filepath.Base(dir), EncodeClaudeProject(workdir)+"-"):
		return below(claudeTranscriptCwd(op, path))
	case codexHome != "" && strings.HasPrefix(path, filepath.Join(codexHome, "sessions")+string(filepath.Separator)) && strings.HasPrefix(name, "rollout-"):
		cwd, _ := codexRolloutCwd(op, path)
		return below(cwd)
	}
	return false
}

// claudeTranscriptCwd is the cwd the first lines of a Claude Code
// transcript name ("" when none does).
func claudeTranscriptCwd(op safefile.Opener, path string) string {
	f, _, err := op.Open(path, safefile.OpenOptions{})
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for i := 0; i < 50 && sc.Scan(); i++ {
		var l struct {
			Cwd string `json:"cwd"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && filepath.IsAbs(l.Cwd) {
			return l.Cwd
		}
	}
	return ""
}
