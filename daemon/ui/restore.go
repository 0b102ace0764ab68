package ui

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// fileHistory is the file view's data.
type fileHistory struct {
	Agent    string
	Path     string
	Versions []Version
	Err      string
	// Journal says the versions are the version journal's.
	Journal bool
}

// fileView lists a file's versions (History), each with its diff and a
// restore.
func (s *Server) fileView(w http.ResponseWriter, r *http.Request) {
	name, p := r.PathValue("agent"), r.URL.Query().Get("path")
	fh := fileHistory{Agent: name, Path: p}
	if p != "" {
		vs, err := s.history.Versions(r.Context(), name, p)
		var noJournal errNoJournal
		if err != nil && len(vs) == 0 && !errors.As(err, &noJournal) {
			s.fail(w, r, err)
			return
		}
		if err != nil {
			fh.Err = err.Error()
		}
		fh.Versions = vs
		fh.Journal = err == nil
	}
	s.render(w, r, http.StatusOK, "file", page{Title: "History of " + termsafe.Name(p), Nav: "timeline", Agent: name, Data: fh})
}

// restoreView is a restore's confirmation (its dry run) or its outcome.
type restoreView struct {
	Agent  string
	Path   string // a file's restore: the file
	Lost   *capsule.WorkLost
	Action string // where the confirmation posts
	Fields url.Values
	Answer *ops.RestoreAnswer
	Done   bool
	Undo   string
}

// fileRestoreView is the dry run of restoring one file from a snapshot,
// with the button that does it.
func (s *Server) fileRestoreView(w http.ResponseWriter, r *http.Request) {
	name, q := r.PathValue("agent"), r.URL.Query()
	id, version, p := q.Get("snapshot"), q.Get("version"), q.Get("path")
	ans, err := s.restoreFile(r, name, id, version, p, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fields := url.Values{"snapshot": {id}, "path": {p}}
	if version != "" {
		fields = url.Values{"version": {version}, "path": {p}}
	}
	s.render(w, r, http.StatusOK, "restore", page{Title: "Restore " + termsafe.Name(p), Nav: "timeline", Agent: name,
		Data: restoreView{Agent: name, Path: p, Action: "/ui/a/" + url.PathEscape(name) + "/file/restore",
			Fields: fields, Answer: ans}})
}

// restoreFile restores (or, dryRun, tells what would change) file p: the
// journal's version when one is named (history_restore), else the file
// as snapshot id holds it (snapshot_restore of that path).
func (s *Server) restoreFile(r *http.Request, name, id, version, p string, dryRun bool) (*ops.RestoreAnswer, error) {
	if version != "" {
		ans, err := call(r.Context(), s, ops.HistoryRestore, ops.Args{Query: agentQuery(name),
			Body: bodyOf(ops.VersionRestoreRequest{Path: p, Version: version, DryRun: dryRun})})
		if err != nil {
			return nil, err
		}
		return &ans.RestoreAnswer, nil
	}
	return call(r.Context(), s, ops.SnapshotRestore, ops.Args{ID: id, Query: agentQuery(name),
		Body: bodyOf(ops.RestoreRequest{Paths: []string{p}, DryRun: dryRun})})
}

// fileRestore restores one file from a snapshot (the confirmation's POST,
// behind the CSRF token), after the daemon's safety snapshot, and says
// how to undo it.
func (s *Server) fileRestore(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("agent")
	id, version, p := r.PostFormValue("snapshot"), r.PostFormValue("version"), r.PostFormValue("path")
	ans, err := s.restoreFile(r, name, id, version, p, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := restoreView{Agent: name, Path: p, Answer: ans, Done: true}
	if ans.Safety != "" {
		v.Undo = "continuityd snapshot restore " + shortID(ans.Safety) + " --agent " + termsafe.Name(name) + " --path " + termsafe.Name(p)
	}
	s.render(w, r, http.StatusOK, "restore", page{Title: "Restored " + termsafe.Name(p), Nav: "timeline", Agent: name, Data: v})
}

// lostView lists the place's lost work, each with what its restore would
// bring back (its dry run) and the button that does it.
func (s *Server) lostView(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("agent")
	res, err := call(r.Context(), s, ops.Resume, ops.Args{Query: agentQuery(name, "peek", "1", "local", "1")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var entries []restoreView
	for i := len(res.WorkLost) - 1; i >= 0; i-- { // newest first
		wl := res.WorkLost[i]
		v := restoreView{Agent: name, Lost: &wl, Action: "/ui/a/" + url.PathEscape(name) + "/lost/" + url.PathEscape(wl.ID) + "/restore"}
		if ans, err := call(r.Context(), s, ops.WorkLostRestore, ops.Args{ID: wl.ID, Query: agentQuery(name),
			Body: bodyOf(ops.LostRestoreRequest{DryRun: true})}); err == nil {
			v.Answer = ans
		}
		entries = append(entries, v)
	}
	s.render(w, r, http.StatusOK, "lost", page{Title: "Work lost in " + name, Nav: "lost", Agent: name, Data: entries})
}

// lostRestore brings one loss back (the confirmation's POST).
func (s *Server) lostRestore(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("agent"), r.PathValue("id")
	ans, err := call(r.Context(), s, ops.WorkLostRestore, ops.Args{ID: id, Query: agentQuery(name), Body: bodyOf(ops.LostRestoreRequest{})})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := restoreView{Agent: name, Answer: ans, Done: true}
	if ans.Safety != "" {
		v.Undo = "continuityd snapshot restore " + shortID(ans.Safety) + " --agent " + termsafe.Name(name) + " --all"
	}
	s.render(w, r, http.StatusOK, "restore", page{Title: "Work brought back", Nav: "lost", Agent: name, Data: v})
}
