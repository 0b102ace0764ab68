package place

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/safefile"
)

// RegistryFile is the file in the state directory that lists the places
// the daemon adopted and where moved state went.
const RegistryFile = "places.json"

// maxRegistry bounds what is read of the registry: a few hundred bytes a
// place.
const maxRegistry = 16 << 20

// maxMoves bounds the moves remembered (status shows them).
const maxMoves = 64

// Entry is one adopted place: the agent state, watcher, snapshots and
// transcripts of one project, under STATE/agents/NAME.
type Entry struct {
	Name    string    `json:"name"`
	Workdir string    `json:"workdir"`
	Owner   uint32    `json:"owner"`
	Adopted time.Time `json:"adopted"`
	// Session is when a session last reported from the place (zero:
	// never since it was adopted).
	Session time.Time `json:"last_session"`
}

// Move is state that went to another name: a place configured by name
// (an [[agent]] with its workdir), or an agent renamed in the config.
type Move struct {
	From    string    `json:"from"`
	To      string    `json:"to"`
	Workdir string    `json:"workdir"`
	At      time.Time `json:"at"`
}

type registryFile struct {
	Places []Entry `json:"places"`
	Moves  []Move  `json:"moves,omitempty"`
}

// Registry is the places a daemon adopted, kept in STATE/places.json
// (rewritten whole and atomically at each change). Safe for concurrent
// use.
type Registry struct {
	stateDir string
	log      *slog.Logger

	mu     sync.Mutex
	places []Entry // by name
	moves  []Move  // oldest first
}

// OpenRegistry reads the registry of stateDir. A file that does not
// decode is set aside (.damaged-TIME, named in the log) and the places
// are found again from the agents' state directories (Rescan): no place's
// state is lost with it.
func OpenRegistry(stateDir string, log *slog.Logger) (*Registry, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{stateDir: stateDir, log: log}
	path := filepath.Join(stateDir, RegistryFile)
	b, err := safefile.ReadFile(path, maxRegistry)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var f registryFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || r.check(f) != nil {
		if err == nil {
			err = r.check(f)
		}
		aside := fmt.Sprintf("%s.damaged-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, fmt.Errorf("%s is damaged (%v) and cannot be set aside: %w", path, err, rerr)
		}
		log.Warn("the places' registry is damaged: set aside; the places are found again from their state directories",
			"file", path, "set_aside", aside, "err", err)
		return r, nil
	}
	r.places, r.moves = f.Places, f.Moves
	slices.SortFunc(r.places, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return r, nil
}

// check refuses a registry whose entries could not have been written by
// the daemon (a name that is no agent name, a relative workdir, a name
// twice).
func (r *Registry) check(f registryFile) error {
	seen := map[string]bool{}
	for _, e := range f.Places {
		switch {
		case !ValidName(e.Name):
			return fmt.Errorf("place %q: not a place name", e.Name)
		case !filepath.IsAbs(e.Workdir):
			return fmt.Errorf("place %q: workdir %q is not absolute", e.Name, e.Workdir)
		case seen[e.Name]:
			return fmt.Errorf("place %q is listed twice", e.Name)
		}
		seen[e.Name] = true
	}
	return nil
}

// AgentsDir is where the agents' and places' state directories are.
func (r *Registry) AgentsDir() string { return filepath.Join(r.stateDir, "agents") }

// Places are the places adopted, by name.
func (r *Registry) Places() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.places)
}

// Moves are the moves remembered, oldest first.
func (r *Registry) Moves() []Move {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.moves)
}

// Get is the place called name.
func (r *Registry) Get(name string) (Entry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.index(name)
	if !ok {
		return Entry{}, false
	}
	return r.places[i], true
}

// ByWorkdir is the place whose workdir is workdir.
func (r *Registry) ByWorkdir(workdir string) (Entry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.places {
		if e.Workdir == workdir {
			return e, true
		}
	}
	return Entry{}, false
}

func (r *Registry) index(name string) (int, bool) {
	return slices.BinarySearchFunc(r.places, name, func(e Entry, n string) int { return strings.Compare(e.Name, n) })
}

// Add adopts workdir as a place owned by owner and saves the registry:
// named after the directory, with a number when the name is taken (by a
// place, by taken, or by state in the agents' directory that is not
// workdir's). A workdir adopted already keeps its place.
func (r *Registry) Add(workdir string, owner uint32, taken func(name string) bool, now time.Time) (Entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.places {
		if e.Workdir == workdir {
			return e, nil
		}
	}
	name := r.freeName(workdir, taken)
	if name == "" {
		return Entry{}, fmt.Errorf("no free place name for %s", workdir)
	}
	e := Entry{Name: name, Workdir: workdir, Owner: owner, Adopted: now.UTC(), Session: now.UTC()}
	i, _ := r.index(name)
	r.places = slices.Insert(r.places, i, e)
	if err := r.saveLocked(); err != nil {
		r.places = slices.Delete(r.places, i, i+1)
		return Entry{}, err
	}
	return e, nil
}

// freeName is the first of NAME, NAME-2, NAME-3, … (NAME: NameFor) that
// no place, no taken name and no other workdir's state has.
func (r *Registry) freeName(workdir string, taken func(string) bool) string {
	base := NameFor(workdir)
	for i := 1; i < 10_000; i++ {
		name := base
		if i > 1 {
			suffix := "-" + strconv.Itoa(i)
			name = strings.TrimRight(base[:min(len(base), 63-len(suffix))], "-_") + suffix
		}
		if _, used := r.index(name); used || (taken != nil && taken(name)) {
			continue
		}
		if rec, err := Recorded(filepath.Join(r.AgentsDir(), name)); err != nil || (rec != "" && Canonical(rec) != workdir) {
			continue // another workdir's state (or state that cannot be read)
		}
		return name
	}
	return ""
}

// Remove forgets the place called name (its state is not touched: the
// caller moved it, or it is another's now) and saves the registry.
func (r *Registry) Remove(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.index(name)
	if !ok {
		return nil
	}
	r.places = slices.Delete(r.places, i, i+1)
	return r.saveLocked()
}

// Touch records a session in the place called name at at. It is kept in
// memory; Save writes it.
func (r *Registry) Touch(name string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.index(name); ok && at.After(r.places[i].Session) {
		r.places[i].Session = at.UTC()
	}
}

// noteMove remembers m (the caller holds the lock and saves).
func (r *Registry) noteMove(m Move) {
	r.moves = append(r.moves, m)
	if n := len(r.moves) - maxMoves; n > 0 {
		r.moves = slices.Delete(r.moves, 0, n)
	}
}

// Save writes the registry.
func (r *Registry) Save() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saveLocked()
}

func (r *Registry) saveLocked() error {
	b, err := json.MarshalIndent(registryFile{Places: r.places, Moves: r.moves}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(r.stateDir, RegistryFile), append(b, '\n'), 0o600)
}

// NameFor is the name a place in workdir is given: its directory's name
// in lower case, what an agent name may not hold turned into '-', at
// most 40 characters; "place" when nothing is left.
func NameFor(workdir string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(filepath.Base(workdir)) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-_")
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "-_")
	}
	if name == "" {
		return "place"
	}
	return name
}

// ValidName reports whether name may name an agent or a place (it names
// a directory: config's rule).
func ValidName(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || i > 0 && (r == '_' || r == '-')
		if !ok {
			return false
		}
	}
	return true
}
