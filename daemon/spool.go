package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/statefiles"
	"github.com/continuityd/continuityd/internal/safefile"
)

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
	dir := statefiles.SpoolDir(st.cfg.Daemon.StateDir)
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
	raw, err := safefile.ReadFile(path, statefiles.MaxSpooledEvent)
	if err != nil {
		return err
	}
	var ev statefiles.SpooledEvent
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
	_, err = a.Store().Signal(ctx, sig)
	return err
}
