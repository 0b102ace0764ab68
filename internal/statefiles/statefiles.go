// Package statefiles is what the daemon and the hooks share on disk while
// the daemon may be down: the spool where ` + "`continuityd hook`" + ` leaves events
// (the daemon stores them at its next start), the last-resume file each
// agent leaves for a hook to answer SessionStart with, and the modes of
// the state directory that let a group's hooks in when the socket does.
package statefiles

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/atomicfile"
)

// The spool is where `continuityd hook` leaves events while the daemon is
// down; the daemon ingests it when it starts, so nothing is lost. The
// last-resume file is what the daemon leaves for a hook to answer
// SessionStart with when the daemon is down.
const (
	spoolDirName = "spool"
	// LastResumeName is the last-resume file in an agent's directory.
	LastResumeName = "last-resume.json"
	// maxSpooledEvent bounds a spool file: an event is one signal (at most
	// capsule.MaxBodyBytes through the API) and its envelope, so anything
	// much larger was not written by a hook.
	MaxSpooledEvent = 256 << 10
	// ResumeMarkdownLimit bounds the resume a hook adds to an agent's
	// context.
	ResumeMarkdownLimit = 10000
)

// SpoolDir is the spool directory under a state directory.
func SpoolDir(stateDir string) string { return filepath.Join(stateDir, spoolDirName) }

// SpooledEvent is one event in the spool.
type SpooledEvent struct {
	Agent  string         `json:"agent,omitempty"` // as given to the hook; else resolved by Cwd
	Cwd    string         `json:"cwd,omitempty"`
	At     time.Time      `json:"at"`
	Signal capsule.Signal `json:"signal"`
}

// Spool writes an event durably into the spool (a file per event, written
// whole and synced, so a crash leaves no half event). In the spool of a
// daemon shared with a group (setgid, see Modes) the file is readable
// by the group, which is the daemon's: the hook's user may be another.
func Spool(stateDir string, ev SpooledEvent) error {
	dir := SpoolDir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	perm := os.FileMode(0o600)
	if fi, err := os.Stat(dir); err == nil && fi.Mode()&os.ModeSetgid != 0 {
		perm = 0o640
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%020d-%s.json", ev.At.UnixNano(), randomSuffix())
	return atomicfile.WriteFile(filepath.Join(dir, name), raw, perm)
}

// LastResume is what the daemon leaves on disk for each agent.
type LastResume struct {
	Agent    string    `json:"agent"`
	Workdir  string    `json:"workdir"`
	At       time.Time `json:"at"`
	Markdown string    `json:"markdown"`
}

// LastResumePath is an agent's last-resume file.
func LastResumePath(stateDir, agent string) string {
	return filepath.Join(stateDir, "agents", agent, LastResumeName)
}

// ReadLastResume finds the last resume the daemon left for the agent named,
// or for the agent whose workdir holds cwd (or the only one).
func ReadLastResume(stateDir, agent, cwd string) (*LastResume, error) {
	if agent != "" {
		return readLastResume(LastResumePath(stateDir, agent))
	}
	entries, err := os.ReadDir(filepath.Join(stateDir, "agents"))
	if err != nil {
		return nil, err
	}
	var all []*LastResume
	for _, e := range entries {
		if lr, err := readLastResume(LastResumePath(stateDir, e.Name())); err == nil {
			all = append(all, lr)
		}
	}
	workdirs := map[string]string{}
	for _, lr := range all {
		workdirs[lr.Agent] = lr.Workdir
	}
	if name := AgentByCwd(workdirs, cwd); name != "" {
		for _, lr := range all {
			if lr.Agent == name {
				return lr, nil
			}
		}
	}
	// The only agent answers for a hook that does not say where it runs;
	// for one that does, only when its workdir holds cwd (above): an agent
	// is its place, and another directory's resume is not this one's.
	if len(all) == 1 && (cwd == "" || all[0].Workdir == "") {
		return all[0], nil
	}
	return nil, fmt.Errorf("no last resume for %s in %s", cwd, stateDir)
}

func readLastResume(path string) (*LastResume, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lr LastResume
	if err := json.Unmarshal(raw, &lr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &lr, nil
}

// AgentByCwd returns the agent whose workdir is the longest one holding
// cwd, or "".
func AgentByCwd(workdirs map[string]string, cwd string) string {
	if cwd == "" {
		return ""
	}
	cwd = filepath.Clean(cwd)
	best, bestLen := "", -1
	for name, wd := range workdirs {
		if wd == "" {
			continue
		}
		wd = filepath.Clean(wd)
		if (cwd == wd || strings.HasPrefix(cwd, wd+string(filepath.Separator))) && len(wd) > bestLen {
			best, bestLen = name, len(wd)
		}
	}
	return best
}

// randomSuffix keeps two events spooled in the same nanosecond apart.
func randomSuffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
