package ops

import (
	"fmt"
	"time"
)

// HistoryAnswer is GET /v1/history?path=P: a file's versions from the
// version journal, oldest first.
type HistoryAnswer struct {
	Agent    string           `json:"agent"`
	Path     string           `json:"path"`
	Versions []HistoryVersion `json:"versions"`
	// Thinned says what retention dropped of this file's versions
	// ("thinned: N versions between T1 and T2: why"); "" when none.
	// ThinnedByAge of them went for their age (keep_all, then the newest
	// of each hour, then of each day), ThinnedByBytes to keep the journal
	// within its share of keep_bytes.
	Thinned        string     `json:"thinned,omitempty"`
	ThinnedCount   int        `json:"thinned_count,omitempty"`
	ThinnedByAge   int        `json:"thinned_by_age,omitempty"`
	ThinnedByBytes int        `json:"thinned_by_bytes,omitempty"`
	ThinnedFrom    *time.Time `json:"thinned_from,omitempty"`
	ThinnedTo      *time.Time `json:"thinned_to,omitempty"`
	// Damaged counts entries of the journal that did not check and are
	// not listed.
	Damaged int `json:"damaged,omitempty"`
	// Covered says since when the journal watched this workdir (the
	// oldest version it holds of any file is no older).
	Note string `json:"note,omitempty"`
}

// HistoryVersion is one version of a file.
type HistoryVersion struct {
	ID         string    `json:"id"` // --version takes it
	At         time.Time `json:"at"`
	Size       int64     `json:"size"`
	Lines      int       `json:"lines"`
	LinesDelta int       `json:"lines_delta"`
	By         string    `json:"by"`                // agent, agent:NAME, outside
	Session    string    `json:"session,omitempty"` // the agent's session it was made in, when its hooks said
	// Turn is when the agent's turn it was made in began (the prompt
	// its UserPromptSubmit hook reported), absent when not known.
	Turn       *time.Time `json:"turn,omitempty"`
	Snapshot   string     `json:"snapshot,omitempty"`
	Blob       string     `json:"blob,omitempty"`
	Gone       bool       `json:"gone,omitempty"`
	NotKept    string     `json:"not_kept,omitempty"`
	Executable bool       `json:"executable,omitempty"`
}

// Lines is the history as a person reads it, one version a line.
func (h HistoryAnswer) Lines() []string {
	out := []string{}
	if len(h.Versions) == 0 {
		out = append(out, "no versions of "+h.Path+" in the version journal")
	}
	for _, v := range h.Versions {
		what := fmt.Sprintf("%d bytes, %d lines (%+d)", v.Size, v.Lines, v.LinesDelta)
		switch {
		case v.Gone:
			what = "deleted"
		case v.NotKept != "":
			what = fmt.Sprintf("%d bytes, not kept (%s)", v.Size, v.NotKept)
		}
		line := fmt.Sprintf("%s  %s  %s  by %s", v.ID, v.At.Local().Format("2006-01-02 15:04:05.000"), what, v.By)
		if v.Session != "" {
			line += "  session " + v.Session
		}
		if v.Turn != nil {
			line += "  turn of " + v.Turn.Local().Format("15:04:05")
		}
		if v.Snapshot != "" {
			line += "  in snapshot " + short12(v.Snapshot)
		}
		out = append(out, line)
	}
	if h.Thinned != "" {
		out = append(out, h.Thinned)
	}
	if h.Damaged > 0 {
		out = append(out, fmt.Sprintf("%d damaged entries of the journal are not listed", h.Damaged))
	}
	if h.Note != "" {
		out = append(out, h.Note)
	}
	return out
}

func short12(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// VersionRestoreRequest is the body of POST /v1/history/restore: one
// version of one file, by its id or by a time (the version that stood
// then).
type VersionRestoreRequest struct {
	Path    string `json:"path"`
	At      string `json:"at,omitempty"`      // RFC 3339
	Version string `json:"version,omitempty"` // a history id, e.g. v42
	DryRun  bool   `json:"dry_run,omitempty"`
}

// VersionRestoreAnswer is what a version's restore changed.
type VersionRestoreAnswer struct {
	RestoreAnswer
	Version HistoryVersion `json:"version"`
}
