package snapshot

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/journal"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/restore"
)

// JournalOptions configure the store's version journal (package
// journal): every version of every file the watcher saw settle.
type JournalOptions struct {
	Enabled bool `json:"enabled,omitempty"`
	// KeepAll, KeepHourly: see journal.Options; 0: the defaults.
	KeepAll    time.Duration `json:"keep_all,omitempty"`
	KeepHourly time.Duration `json:"keep_hourly,omitempty"`
	// Share is the part of KeepBytes the journal's versions may take
	// (0: DefaultJournalShare).
	Share float64 `json:"share,omitempty"`
}

// DefaultJournalShare is the part of keep_bytes the version journal's
// contents may take; the snapshots take what is left.
const DefaultJournalShare = 0.5

// Versions is the store's version journal, and restoring one version
// through the store's restorer. The store's Versions field is nil when
// the journal is off or could not be opened (VersionsProblem says why).
type Versions struct {
	J       *journal.Journal
	repo    *repo.Repo
	restore *restore.Restorer
}

// openVersions opens the version journal when the options ask for it;
// a failure leaves the store working without it, the reason kept.
func openVersions(s *Store) {
	jo := s.opt.Journal
	if !jo.Enabled {
		return
	}
	share := jo.Share
	if share <= 0 || share > 1 {
		share = DefaultJournalShare
	}
	j, err := journal.Open(journal.Options{Repo: s.repo, Workdir: s.workdir, MaxFileBytes: s.opt.MaxFileBytes,
		KeepAll: jo.KeepAll, KeepHourly: jo.KeepHourly, MaxBytes: int64(float64(s.opt.KeepBytes) * share),
		Grew: s.gc.Kick, Skew: journal.SkewFromEnv(), Log: s.log, Now: s.now})
	if err != nil {
		s.VersionsProblem = "the version journal cannot be opened: " + err.Error()
		s.log.Warn("snapshot store: "+s.VersionsProblem, "err", err)
		return
	}
	s.Versions = &Versions{J: j, repo: s.repo, restore: s.restore}
	// Git's collection keeps the blobs the journal's retention keeps.
	s.gc.BeforeCompact = j.KeepRef
}

// Version is one version of a file as history lists it.
type Version struct {
	ID         string    `json:"id"` // "v" and the journal's sequence number: --version takes it
	At         time.Time `json:"at"`
	Size       int64     `json:"size"`
	Lines      int       `json:"lines"`
	LinesDelta int       `json:"lines_delta"` // against the version before (0 for the first)
	By         string    `json:"-"`           // the agent's name, "" outside (labelled by the caller)
	Session    string    `json:"session,omitempty"`
	Turn       time.Time `json:"turn,omitzero"`      // when the agent's turn it was made in began
	Snapshot   string    `json:"snapshot,omitempty"` // a snapshot that holds this very content at this path
	Blob       string    `json:"blob,omitempty"`
	Gone       bool      `json:"gone,omitempty"`       // the file was deleted
	NotKept    string    `json:"not_kept,omitempty"`   // why no content was kept (too large, a nested repository)
	Executable bool      `json:"executable,omitempty"` //
}

// FileHistory is a file's versions, oldest first.
type FileHistory struct {
	Versions []Version
	Thinned  journal.Thinned
	Damaged  int
}

// History lists the versions of p (relative to the workdir), with the
// snapshot each is in when one holds it.
func (v *Versions) History(ctx context.Context, p string) (FileHistory, error) {
	h, err := v.J.History(p)
	if err != nil {
		return FileHistory{}, err
	}
	out := FileHistory{Thinned: h.Thinned, Damaged: h.Damaged, Versions: make([]Version, 0, len(h.Versions))}
	prevLines := -1
	for _, e := range h.Versions {
		ver := versionOf(e)
		if prevLines >= 0 && e.Kept() {
			ver.LinesDelta = e.Lines - prevLines
		}
		if e.Kept() {
			prevLines = e.Lines
		} else if e.Flags&journal.FlagGone != 0 {
			prevLines = 0
		}
		out.Versions = append(out.Versions, ver)
	}
	v.inSnapshots(ctx, p, h.Versions, out.Versions)
	return out, nil
}

func versionOf(e journal.Entry) Version {
	ver := Version{ID: "v" + strconv.FormatUint(e.Seq, 10), At: e.At, Size: e.Size, Lines: e.Lines, By: e.By,
		Session: e.Session, Turn: e.Turn, Executable: e.Mode == 0o100755}
	switch {
	case e.Flags&journal.FlagGone != 0:
		ver.Gone, ver.Size = true, 0
	case e.Flags&journal.FlagTooLarge != 0:
		ver.NotKept = "over max_file_size"
	case e.Flags&journal.FlagNestedRep != 0:
		ver.NotKept = "in a nested repository"
	default:
		ver.Blob = repo.OID(e.Blob).String()
	}
	return ver
}

// inSnapshots fills in, for each version, the oldest snapshot taken
// while it stood that holds its content at p (one git run for them all).
func (v *Versions) inSnapshots(ctx context.Context, p string, es []journal.Entry, out []Version) {
	snaps, err := v.repo.List(ctx)
	if err != nil || len(snaps) == 0 || len(es) == 0 {
		return
	}
	type ask struct {
		i    int
		snap repo.Snapshot
	}
	var asks []ask
	for i, e := range es {
		if !e.Kept() {
			continue
		}
		var until time.Time
		if i+1 < len(es) {
			until = es[i+1].At
		}
		// Snapshots are newest first: walk back to the oldest in range.
		for k := len(snaps) - 1; k >= 0; k-- {
			s := snaps[k]
			if s.Time.Before(e.At.Truncate(time.Second)) || !until.IsZero() && s.Time.After(until.Add(time.Second)) {
				continue
			}
			asks = append(asks, ask{i, s})
		}
	}
	if len(asks) == 0 {
		return
	}
	var in strings.Builder
	for _, a := range asks {
		fmt.Fprintf(&in, "%s:%s\n", a.snap.Tree, p)
	}
	res, err := v.repo.Git().Run(ctx, repo.Call{Args: []string{"cat-file", "--batch-check=%(objectname)"}, Stdin: strings.NewReader(in.String())})
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimSuffix(string(res), "\n"), "\n")
	for k, a := range asks {
		if k < len(lines) && out[a.i].Snapshot == "" && lines[k] == out[a.i].Blob {
			out[a.i].Snapshot = a.snap.ID
		}
	}
}

// Restore brings back the version of p named by id ("v<seq>") or, when id
// is "", the one that stood at at (the newest not after it), with a
// safety snapshot first as every restore.
func (v *Versions) Restore(ctx context.Context, p, id string, at time.Time, dryRun bool) (RestoreResult, Version, error) {
	var e journal.Entry
	var ok bool
	var err error
	field := "at"
	if id != "" {
		field = "version"
		n, perr := strconv.ParseUint(strings.TrimPrefix(id, "v"), 10, 64)
		if perr != nil || !strings.HasPrefix(id, "v") {
			return RestoreResult{}, Version{}, capsule.Refuse(capsule.CodeInvalidField, "version",
				"%q is no version id: history gives them (v and a number, e.g. v42)", id)
		}
		e, ok, err = v.J.Version(n)
		if ok && e.Path != p {
			return RestoreResult{}, Version{}, capsule.Refuse(capsule.CodeInvalidField, "version",
				"version %s is of another file; `continuityd history %s` lists this one's", id, p)
		}
	} else {
		e, ok, err = v.J.At(p, at)
	}
	if err != nil {
		return RestoreResult{}, Version{}, err
	}
	if !ok {
		return RestoreResult{}, Version{}, capsule.Refuse(capsule.CodeNotFound, field,
			"the version journal holds no such version of %s: `continuityd history %s` lists those kept", p, p)
	}
	ver := versionOf(e)
	switch {
	case ver.Gone:
		return RestoreResult{}, ver, capsule.Refuse(capsule.CodeInvalidField, field,
			"at that time %s was deleted (version %s); give an earlier time or version", p, ver.ID)
	case ver.NotKept != "":
		return RestoreResult{}, ver, capsule.Refuse(capsule.CodeInvalidField, field,
			"version %s of %s was not kept (%s)", ver.ID, p, ver.NotKept)
	}
	res, err := v.restore.RestoreVersion(ctx, restore.Version{Path: e.Path, Blob: repo.OID(e.Blob), Mode: e.Mode}, dryRun)
	return restoreResultOf(res), ver, err
}

// NewestExcept is p's newest kept version not after until whose content
// is none of not (blob ids): work lost asks it for what stood just
// before a file vanished.
func (v *Versions) NewestExcept(p string, until time.Time, not ...string) (id string, at time.Time, ok bool) {
	h, err := v.J.History(p)
	if err != nil {
		return "", time.Time{}, false
	}
	for i := len(h.Versions) - 1; i >= 0; i-- {
		e := h.Versions[i]
		if e.At.After(until) || !e.Kept() {
			continue
		}
		blob := repo.OID(e.Blob).String()
		if slices.Contains(not, blob) {
			continue
		}
		return "v" + strconv.FormatUint(e.Seq, 10), e.At, true
	}
	return "", time.Time{}, false
}

// Settled tells the journal path settled (journal.Journal.Settled).
func (v *Versions) Settled(path string, last time.Time) { v.J.Settled(path, last) }

// SetWho sets who versions are credited to (journal.Journal.SetWho).
func (v *Versions) SetWho(w func(path string, at time.Time) (by, session string, turn time.Time)) {
	v.J.SetWho(w)
}
