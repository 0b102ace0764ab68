package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/safefile"
)

// The spool is where `continuityd hook` leaves events while the daemon is
// down; the daemon ingests it when it starts, so nothing is lost. The
// last-resume file is what the daemon leaves for a hook to answer
// SessionStart with when the daemon is down.
const (
	spoolDirName   = "spool"
	lastResumeName = "last-resume.json"
	// maxSpooledEvent bounds a spool file: an event is one signal (at most
	// capsule.MaxBodyBytes through the API) and its envelope, so anything
	// much larger was not written by a hook.
	maxSpooledEvent = 256 << 10
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
// daemon shared with a group (setgid, see stateModes) the file is readable
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
	name := fmt.Sprintf("%020d-%s.json", ev.At.UnixNano(), randomToken()[:8])
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
	return filepath.Join(stateDir, "agents", agent, lastResumeName)
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
	if name := agentByCwd(workdirs, cwd); name != "" {
		for _, lr := range all {
			if lr.Agent == name {
				return lr, nil
			}
		}
	}
	if len(all) == 1 {
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

// agentByCwd returns the agent whose workdir is the longest one holding
// cwd, or "".
func agentByCwd(workdirs map[string]string, cwd string) string {
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

// ingestSpool stores the events hooks spooled while the daemon was down, in
// the order they happened, and removes each once stored. An event that no
// agent takes is moved to spool/failed with the reason logged. The spool is
// writable by the socket's group in a shared setup, so an entry is read
// only if it is a regular file within the size limit: a FIFO, a device, a
// symbolic link or an oversized file is never opened for a read that could
// wait or fill memory; it is moved aside to spool/failed for an operator to
// look at.
func (d *Daemon) ingestSpool(ctx context.Context) {
	st := d.snap()
	dir := SpoolDir(st.cfg.Daemon.StateDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	names := []string{}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	stored := 0
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := d.ingestOne(ctx, st, path); err != nil {
			var ce *capsule.Error
			switch {
			case errors.As(err, &ce) && ce.Code == capsule.CodeAgentDamaged:
				continue // kept for when the agent is back
			case errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrSymlink) || errors.Is(err, safefile.ErrTooLarge):
				d.log.Warn("spool entry refused, not read; moved to spool/failed", "file", name, "err", err)
			default:
				d.log.Warn("spooled hook event not stored; kept in spool/failed", "file", name, "err", err)
			}
			os.MkdirAll(filepath.Join(dir, "failed"), 0o700)
			os.Rename(path, filepath.Join(dir, "failed", name))
			continue
		}
		os.Remove(path)
		stored++
	}
	if stored > 0 {
		d.log.Info("stored hook events spooled while the daemon was down", "count", stored)
	}
}

func (d *Daemon) ingestOne(ctx context.Context, st *snapshot, path string) error {
	raw, err := safefile.ReadFile(path, maxSpooledEvent)
	if err != nil {
		return err
	}
	var ev SpooledEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return err
	}
	a, cerr := st.agentFor(ev.Agent, ev.Cwd)
	if cerr != nil {
		return cerr
	}
	// The spool is a file anyone with access to the state directory could
	// write: it passes the same guard as the API.
	body, err := json.Marshal(ev.Signal)
	if err != nil {
		return err
	}
	sig, err := st.guard.DecodeSignal(body)
	if err != nil {
		return err
	}
	_, err = a.store.Signal(ctx, sig)
	return err
}

// writeLastResume leaves the agent's resume on disk for hooks to answer
// with while the daemon is down.
func (a *agent) writeLastResume() {
	r := a.store.Resume(false)
	r.Upstreams = a.upstreamStates()
	raw, err := json.Marshal(LastResume{Agent: a.name, Workdir: a.cfg.Workdir, At: time.Now().UTC(), Markdown: r.Markdown(ResumeMarkdownLimit)})
	if err != nil {
		return
	}
	if err := atomicfile.WriteFile(filepath.Join(a.dir, lastResumeName), raw, a.modes.lastResume); err != nil {
		a.log.Warn("cannot leave the last resume on disk", "err", err)
	}
}
