package repo

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Snapshot is one snapshot as the store holds it: the commit a ref names
// and what its message records.
type Snapshot struct {
	ID string // the snapshot's id: its commit's hash where it was taken
	// Commit is its commit in this store when that is not ID (an
	// imported copy with files withheld); "" otherwise.
	Commit string
	Tree   string // the tree's hash
	N      uint64 // its number where it was taken: refs/snapshots/<n>
	// The metadata line's (Message).
	Time                              time.Time
	Trigger                           string
	Seq                               uint64
	Parent                            string
	Added, Modified, Deleted, Skipped int
	Conversation                      *Conversation // nil when none was recorded
	// Note is the message a person or an agent gave the snapshot when
	// asking for it (snapshot take --message); "" for the automatic ones.
	Note string
}

// CommitID is the snapshot's commit in this store.
func (s Snapshot) CommitID() string {
	if s.Commit != "" {
		return s.Commit
	}
	return s.ID
}

// Conversation is the point of the agent's conversation a snapshot
// records: its session and the last message read.
type Conversation struct {
	Session string
	Message string
}

// Skipped is a file a snapshot left out, as its message names it.
type Skipped struct {
	Path   string // relative to the workdir, with "/"
	Size   int64  // bytes, when known
	Reason string // ReasonTooLarge, ReasonUnreadable, ReasonRepository, ReasonGitName, ReasonPathTooLong
}

// Skip reasons.
const (
	ReasonTooLarge    = "too_large"
	ReasonUnreadable  = "unreadable"
	ReasonRepository  = "repository"    // a nested repository, submodule or linked worktree: left out whole
	ReasonGitName     = "git_name"      // a name git takes for .git (".GIT", ".Git", …) and never adds
	ReasonPathTooLong = "path_too_long" // a path longer than the system's limit (4,095 bytes with the workdir)
)

// The commit message's first line holds the metadata List needs, so one
// `git for-each-ref` answers a List; the body lists the skipped files:
//
//	continuityd-snapshot v=1 n=7 trigger=quiet seq=42 time=2026-…Z parent=<id>|- added=3 modified=1 deleted=0 skipped=1 [session=<id>] [message=<id>]
//
//	skipped size=12582912 path="data/big.bin"
//
// session and message (the Conversation) come last and only when known,
// then note (the message a snapshot was asked for with) when there is one,
// their values escaped as in a URL query (subjectValue); a snapshot taken
// before they were recorded has neither, and reads back with no
// Conversation. A reader ignores keys it does not know, so an older daemon
// lists newer snapshots. testdata/subject.golden holds one line of each
// kind (TestSubjectGolden).
const subjectTag = "continuityd-snapshot"

// MaxListedSkipped bounds the skipped files named in one snapshot.
const MaxListedSkipped = 1000

// Message is the commit message of snapshot snap: its metadata line, the
// files it skipped and its mode lines (FormatModes).
func Message(snap Snapshot, skipped []Skipped, modes string) string {
	parent := snap.Parent
	if parent == "" {
		parent = "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s v=1 n=%d trigger=%s seq=%d time=%s parent=%s added=%d modified=%d deleted=%d skipped=%d",
		subjectTag, snap.N, snap.Trigger, snap.Seq, snap.Time.UTC().Format(time.RFC3339Nano), parent,
		snap.Added, snap.Modified, snap.Deleted, snap.Skipped)
	if c := snap.Conversation; c != nil && c.Session != "" {
		b.WriteString(" session=" + subjectValue(c.Session))
	}
	if c := snap.Conversation; c != nil && c.Message != "" {
		b.WriteString(" message=" + subjectValue(c.Message))
	}
	if snap.Note != "" {
		b.WriteString(" note=" + subjectValue(snap.Note))
	}
	b.WriteString("\n")
	if len(skipped) > 0 {
		b.WriteString("\n")
		for i, k := range skipped {
			if i == MaxListedSkipped {
				fmt.Fprintf(&b, "skipped-more %d\n", len(skipped)-i)
				break
			}
			fmt.Fprintf(&b, "skipped reason=%s size=%d path=%s\n", k.Reason, k.Size, strconv.Quote(k.Path))
		}
	}
	if modes != "" {
		b.WriteString("\n" + modes)
	}
	return b.String()
}

// ParseSubject reads the metadata line back, of the snapshot id whose
// tree is tree.
func ParseSubject(id, tree, subject string) (Snapshot, bool) {
	f := strings.Fields(subject)
	if len(f) < 2 || f[0] != subjectTag {
		return Snapshot{}, false
	}
	snap := Snapshot{ID: id, Tree: tree}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "n":
			snap.N, err = strconv.ParseUint(v, 10, 64)
		case "trigger":
			snap.Trigger = v
		case "seq":
			snap.Seq, err = strconv.ParseUint(v, 10, 64)
		case "time":
			snap.Time, err = time.Parse(time.RFC3339Nano, v)
		case "parent":
			if v != "-" {
				snap.Parent = v
			}
		case "added":
			snap.Added, err = strconv.Atoi(v)
		case "modified":
			snap.Modified, err = strconv.Atoi(v)
		case "deleted":
			snap.Deleted, err = strconv.Atoi(v)
		case "skipped":
			snap.Skipped, err = strconv.Atoi(v)
		case "note":
			snap.Note, err = parseSubjectValue(v)
		case "session", "message":
			var val string
			if val, err = parseSubjectValue(v); err == nil {
				if snap.Conversation == nil {
					snap.Conversation = &Conversation{}
				}
				if k == "session" {
					snap.Conversation.Session = val
				} else {
					snap.Conversation.Message = val
				}
			}
		}
		if err != nil {
			return Snapshot{}, false
		}
	}
	return snap, snap.N > 0
}

// ModesOf returns the mode lines (FormatModes) of snapshot id's message,
// as they were written.
func (r *Repo) ModesOf(ctx context.Context, id string) (string, error) {
	msg, err := r.git.Run(ctx, Call{Args: []string{"cat-file", "commit", id}})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for line := range strings.SplitSeq(string(msg), "\n") {
		if strings.HasPrefix(line, "mode ") || strings.HasPrefix(line, "modes-more ") {
			b.WriteString(line + "\n")
		}
	}
	return b.String(), nil
}

// ParseSkipped reads the skipped files from a commit message body.
func ParseSkipped(msg string) (list []Skipped, more int) {
	for line := range strings.SplitSeq(msg, "\n") {
		if rest, ok := strings.CutPrefix(line, "skipped-more "); ok {
			more, _ = strconv.Atoi(rest)
			continue
		}
		rest, ok := strings.CutPrefix(line, "skipped reason=")
		if !ok {
			continue
		}
		reason, rest, _ := strings.Cut(rest, " size=")
		size, rest, _ := strings.Cut(rest, " path=")
		p, err := strconv.Unquote(rest)
		if err != nil {
			continue
		}
		n, _ := strconv.ParseInt(size, 10, 64)
		list = append(list, Skipped{Path: p, Size: n, Reason: reason})
	}
	return list, more
}

// MaxListedModes bounds the permissions recorded with one snapshot.
const MaxListedModes = 1000

// FormatModes writes the mode lines of the paths of held (the files and
// directories whose permissions git does not keep), sorted, at most
// MaxListedModes of them.
func FormatModes(held map[string]fs.FileMode) string {
	paths := slices.Sorted(maps.Keys(held))
	var b strings.Builder
	for i, p := range paths {
		if i == MaxListedModes {
			fmt.Fprintf(&b, "modes-more %d\n", len(paths)-i)
			break
		}
		fmt.Fprintf(&b, "mode %04o path=%s\n", held[p], strconv.Quote(p))
	}
	return b.String()
}

// ParseModes reads the permission lines (FormatModes) of a commit message.
// Only permissions git would not give are taken: a mode line can take
// bits away, never add one.
func ParseModes(msg string) map[string]fs.FileMode {
	modes := map[string]fs.FileMode{}
	for line := range strings.SplitSeq(msg, "\n") {
		rest, ok := strings.CutPrefix(line, "mode ")
		if !ok {
			continue
		}
		m, q, _ := strings.Cut(rest, " path=")
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil || n > 0o777 {
			continue
		}
		p, err := strconv.Unquote(q)
		if err != nil {
			continue
		}
		modes[p] = fs.FileMode(n)
	}
	return modes
}

// Withheld is a file a snapshot's copy for the fleet left out, and why
// (a credential file, say): the machine that receives it has no content
// for it, and a restore there leaves the file as it is.
type Withheld struct {
	Path   string
	Reason string
}

// withheldTag starts each withheld file's line in a snapshot commit's
// message: `withheld path="…" reason="…"`.
const withheldTag = "withheld path="

// WithheldLine is the line of a commit message that names one withheld
// file (read back by ParseWithheld).
func WithheldLine(w Withheld) string {
	return withheldTag + strconv.Quote(w.Path) + " reason=" + strconv.Quote(w.Reason) + "\n"
}

// ParseWithheld reads the withheld files from a commit message.
func ParseWithheld(msg string) []Withheld {
	var list []Withheld
	for line := range strings.SplitSeq(msg, "\n") {
		rest, ok := strings.CutPrefix(line, withheldTag)
		if !ok {
			continue
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			continue
		}
		p, _ := strconv.Unquote(q)
		reason, err := strconv.Unquote(strings.TrimPrefix(rest[len(q):], " reason="))
		if err != nil {
			continue
		}
		list = append(list, Withheld{Path: p, Reason: reason})
	}
	return list
}

// CommitTreeAndSubject reads a raw commit: its tree and the first line of
// its message.
func CommitTreeAndSubject(raw []byte) (tree, subject string, ok bool) {
	head, msg, found := bytes.Cut(raw, []byte("\n\n"))
	if !found {
		return "", "", false
	}
	first, _, _ := bytes.Cut(head, []byte("\n"))
	t, isTree := bytes.CutPrefix(first, []byte("tree "))
	if !isTree || !ObjectID.Match(t) {
		return "", "", false
	}
	line, _, _ := bytes.Cut(msg, []byte("\n"))
	return string(t), string(line), true
}

// subjectValue and parseSubjectValue write an id into the metadata line
// and read it back: the line is split at spaces, so spaces, "=" and
// anything else that is not plain are escaped as in a URL query.
func subjectValue(s string) string { return url.QueryEscape(s) }

func parseSubjectValue(s string) (string, error) { return url.QueryUnescape(s) }
