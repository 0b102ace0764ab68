// Package place keeps each agent to its workdir. An agent's state directory
// records the workdir it belongs to (the file "workdir"), so its state,
// snapshots and transcripts are never shown, continued or restored in
// another directory: a configured agent whose workdir changed is refused
// with the way out, and the embedded default agent, which belongs to
// whatever directory the daemon was started in, keeps one parked state per
// directory and brings back the one of the directory it runs in.
//
// The projects agent sessions report from are places too: Rules decide
// which directory a session adopts (its git top-level, only under the
// roots, only the caller's own), the Registry names each place and keeps
// the list, and moves a place's state whole when an agent is configured
// for its workdir, so no history is orphaned.
package place

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/safefile"
)

// MarkerFile is the file in an agent's state directory that names the
// workdir the state belongs to, as one line.
const MarkerFile = "workdir"

// lastResumeFile is statefiles.LastResumeName, read only to place state
// written before the marker existed (it records the workdir too).
const lastResumeFile = "last-resume.json"

// maxMarker bounds what is read of a marker: a path, at most PATH_MAX.
const maxMarker = 4096 + 1

// MovedError refuses an agent whose state belongs to another workdir.
type MovedError struct {
	Agent    string
	Dir      string // the agent's state directory
	Recorded string // the workdir the state belongs to
	Workdir  string // the workdir it is configured with now
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("agent %q: its state in %s belongs to workdir %s, not %s; it is not served, so nothing of %s is shown or restored in %s. "+
		"Set the agent's workdir back to %s; or move the agent on purpose (its state and snapshots follow it) by writing %s into %s and reloading; "+
		"or start it afresh by moving %s aside and reloading",
		e.Agent, e.Dir, e.Recorded, e.Workdir, e.Recorded, e.Workdir, e.Recorded, e.Workdir, filepath.Join(e.Dir, MarkerFile), e.Dir)
}

// Canonical is workdir as places compare it: absolute, clean, with its
// symbolic links resolved when it exists.
func Canonical(workdir string) string {
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return filepath.Clean(workdir)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// Recorded is the workdir dir's state belongs to: its marker, else (state
// written before markers) the workdir its last resume names, else "".
func Recorded(dir string) (string, error) {
	b, err := safefile.ReadFile(filepath.Join(dir, MarkerFile), maxMarker)
	switch {
	case err == nil:
		w := strings.TrimSuffix(string(b), "\n")
		if w == "" || !filepath.IsAbs(w) || strings.ContainsAny(w, "\n\x00") {
			return "", fmt.Errorf("%s does not hold an absolute workdir; remove it to let the agent record its workdir again", filepath.Join(dir, MarkerFile))
		}
		return w, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read %s: %w", filepath.Join(dir, MarkerFile), err)
	}
	b, err = safefile.ReadFile(filepath.Join(dir, lastResumeFile), 8<<20)
	if err != nil {
		return "", nil
	}
	var lr struct {
		Workdir string `json:"workdir"`
	}
	if json.Unmarshal(b, &lr) == nil && filepath.IsAbs(lr.Workdir) {
		return filepath.Clean(lr.Workdir), nil
	}
	return "", nil
}

// Check is called before an agent's state is opened: state that belongs
// to workdir, or new state, is the agent's (the marker is written when
// missing); state that belongs to another workdir is a *MovedError.
func Check(agent, dir, workdir string) error {
	if workdir == "" {
		return nil // an agent with no workdir has no place to keep to
	}
	workdir = Canonical(workdir)
	rec, err := Recorded(dir)
	if err != nil {
		return fmt.Errorf("agent %q: %w", agent, err)
	}
	if rec != "" && rec != workdir && Canonical(rec) != workdir {
		return &MovedError{Agent: agent, Dir: dir, Recorded: rec, Workdir: workdir}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(dir, MarkerFile)); err == nil {
		return nil
	}
	return atomicfile.WriteFile(filepath.Join(dir, MarkerFile), []byte(workdir+"\n"), 0o600)
}

// Switched says what Switch moved: the state it parked and where, and the
// parked state it brought back.
type Switched struct {
	Parked, ParkedTo, ParkedFrom string // ParkedFrom: the workdir the parked state belongs to
	Restored                     string // the parked directory brought back, "" when none
}

// Switch makes dir the state of workdir, for an agent that belongs to
// whichever directory it is started in (the embedded default): state in
// dir that belongs to another workdir is parked under parkDir, named after
// that workdir, and the state parked earlier for workdir, if any, is moved
// back into dir. Nothing is deleted. The caller holds the state
// directory's lock, so no other daemon has dir open.
func Switch(dir, parkDir, workdir string) (Switched, error) {
	var sw Switched
	workdir = Canonical(workdir)
	rec, err := Recorded(dir)
	if err != nil {
		return sw, err
	}
	if rec == "" || rec == workdir || Canonical(rec) == workdir {
		return sw, nil // new state, or state of unknown place (adopted), or already workdir's
	}
	if err := os.MkdirAll(parkDir, 0o700); err != nil {
		return sw, err
	}
	to, err := freeName(parkDir, ParkName(rec))
	if err != nil {
		return sw, err
	}
	// The parked state says whose it is, also when it was placed by its
	// last resume rather than a marker.
	if _, err := os.Lstat(filepath.Join(dir, MarkerFile)); errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.WriteFile(filepath.Join(dir, MarkerFile), []byte(rec+"\n"), 0o600); err != nil {
			return sw, err
		}
	}
	if err := os.Rename(dir, to); err != nil {
		return sw, fmt.Errorf("park the state of %s: %w", rec, err)
	}
	sw.Parked, sw.ParkedTo, sw.ParkedFrom = dir, to, rec
	back := filepath.Join(parkDir, ParkName(workdir))
	if r, err := Recorded(back); err == nil && r != "" && Canonical(r) == workdir {
		if err := os.Rename(back, dir); err != nil {
			return sw, fmt.Errorf("bring back the state of %s from %s: %w", workdir, back, err)
		}
		sw.Restored = back
	}
	return sw, nil
}

// ParkName is the directory name a workdir's parked state gets: the
// workdir's last element (for people) and a hash of the whole path.
func ParkName(workdir string) string {
	sum := sha256.Sum256([]byte(workdir))
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, filepath.Base(workdir))
	if len(base) > 40 {
		base = base[:40]
	}
	return strings.TrimLeft(base, ".") + "-" + hex.EncodeToString(sum[:6])
}

// freeName is parkDir/name, or name with a counter when that is taken by
// state that belongs elsewhere (a hash collision, or state parked twice).
func freeName(parkDir, name string) (string, error) {
	for i := 0; i < 1000; i++ {
		p := filepath.Join(parkDir, name)
		if i > 0 {
			p = fmt.Sprintf("%s.%d", p, i)
		}
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no free name for %s in %s", name, parkDir)
}
