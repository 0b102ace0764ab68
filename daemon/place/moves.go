package place

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// parkedDir is where earlier versions parked the embedded default's
// state of each directory it was started in (STATE/places/NAME-HASH).
const parkedDir = "places"

// legacyDefault is the embedded default's agent of earlier versions,
// which worked in whichever directory the daemon started in.
const legacyDefault = "default"

// Rescan registers as places the state that belongs to a workdir but to
// no configured agent and no place: an agent taken out of the config, the
// places of a registry that was set aside, the state earlier versions
// kept as agent "default" (renamed after its directory) or parked per
// directory under STATE/places. Nothing is orphaned: each is served
// again when a session reports from its workdir. It returns the places
// it added.
func (r *Registry) Rescan(configured func(name string) bool, now time.Time) ([]Entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var added []Entry
	dirs, err := os.ReadDir(r.AgentsDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, d := range dirs {
		name := d.Name()
		if !d.IsDir() || !ValidName(name) || configured(name) {
			continue
		}
		if _, ok := r.index(name); ok {
			continue
		}
		e, ok, err := r.rescanOne(filepath.Join(r.AgentsDir(), name), name, name == legacyDefault, configured, now)
		if err != nil {
			return added, err
		}
		if ok {
			added = append(added, e)
		}
	}
	parked, err := os.ReadDir(filepath.Join(r.stateDir, parkedDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return added, err
	}
	for _, d := range parked {
		if !d.IsDir() {
			continue
		}
		e, ok, err := r.rescanOne(filepath.Join(r.stateDir, parkedDir, d.Name()), "", true, configured, now)
		if err != nil {
			return added, err
		}
		if ok {
			added = append(added, e)
		}
	}
	os.Remove(filepath.Join(r.stateDir, parkedDir)) // once empty
	if len(added) > 0 {
		return added, r.saveLocked()
	}
	return added, nil
}

// rescanOne registers the state in dir as a place: under name, or, when
// rename is set, under a name made from its workdir (dir is moved to
// STATE/agents/NAME). State without a workdir, or of a workdir that is
// a place already, is left where it is.
func (r *Registry) rescanOne(dir, name string, rename bool, configured func(string) bool, now time.Time) (Entry, bool, error) {
	rec, err := Recorded(dir)
	if err != nil || rec == "" {
		return Entry{}, false, nil
	}
	workdir := Canonical(rec)
	for _, e := range r.places {
		if e.Workdir == workdir {
			r.log.Warn("state of a workdir that is a place already is left where it is", "state", dir, "workdir", workdir, "place", e.Name)
			return Entry{}, false, nil
		}
	}
	if rename {
		from := dir
		if name = r.freeName(workdir, configured); name == "" {
			return Entry{}, false, fmt.Errorf("no free place name for %s", workdir)
		}
		if err := os.MkdirAll(r.AgentsDir(), 0o700); err != nil {
			return Entry{}, false, err
		}
		if err := os.Rename(from, filepath.Join(r.AgentsDir(), name)); err != nil {
			return Entry{}, false, fmt.Errorf("move the state of %s to its place: %w", workdir, err)
		}
		r.noteMove(Move{From: r.shown(from), To: name, Workdir: workdir, At: now.UTC()})
		r.log.Info("state kept by an earlier version is now a place of its own", "from", from, "place", name, "workdir", workdir)
	}
	owner, _ := ownerOf(workdir)
	e := Entry{Name: name, Workdir: workdir, Owner: owner, Adopted: now.UTC()}
	i, _ := r.index(name)
	r.places = append(r.places[:i], append([]Entry{e}, r.places[i:]...)...)
	return e, true, nil
}

// shown is dir as a move names it: relative to the state directory.
func (r *Registry) shown(dir string) string {
	if rel, err := filepath.Rel(r.stateDir, dir); err == nil {
		return filepath.ToSlash(rel)
	}
	return dir
}

// Inherit gives the configured agent name, working in workdir, the state
// its workdir has under another name, when it has no state of its own:
// an adopted place's (the place configured by name) or that of an agent
// no longer configured (an agent renamed). The state directory is moved,
// with everything in it (residency, snapshots, journal, transcripts'
// offsets, the pointer to a root daemon's store in the owner's part), the
// place is forgotten and the move remembered (status shows it). It
// returns the name the state had, "" when nothing moved. The caller has
// stopped the agent or place that had the state.
func (r *Registry) Inherit(name, workdir string, configured func(string) bool, now time.Time) (string, error) {
	if workdir == "" {
		return "", nil
	}
	workdir = Canonical(workdir)
	dest := filepath.Join(r.AgentsDir(), name)
	if !fresh(dest) {
		return "", nil // its own state
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	from := ""
	for _, e := range r.places {
		if e.Workdir == workdir && e.Name != name {
			from = e.Name
			break
		}
	}
	if from == "" {
		dirs, _ := os.ReadDir(r.AgentsDir())
		for _, d := range dirs {
			n := d.Name()
			if n == name || !d.IsDir() || configured(n) {
				continue
			}
			if rec, err := Recorded(filepath.Join(r.AgentsDir(), n)); err == nil && rec != "" && Canonical(rec) == workdir {
				from = n
				break
			}
		}
	}
	if from == "" {
		return "", nil
	}
	// What fresh allowed: nothing, or only the marker of this workdir.
	os.Remove(filepath.Join(dest, MarkerFile))
	if err := os.Remove(dest); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("agent %q: %w", name, err)
	}
	if err := os.Rename(filepath.Join(r.AgentsDir(), from), dest); err != nil {
		return "", fmt.Errorf("agent %q: take over the state of %s from %s: %w", name, workdir, from, err)
	}
	if i, ok := r.index(from); ok {
		r.places = append(r.places[:i], r.places[i+1:]...)
	}
	r.noteMove(Move{From: from, To: name, Workdir: workdir, At: now.UTC()})
	return from, r.saveLocked()
}

// fresh reports whether an agent's state directory holds no state: it
// does not exist, or holds at most the marker of its workdir.
func fresh(dir string) bool {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	return len(ents) == 0 || len(ents) == 1 && ents[0].Name() == MarkerFile
}
