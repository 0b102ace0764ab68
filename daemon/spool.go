package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/internal/safefile"
	"github.com/continuityd/continuityd/internal/statefiles"
)

// A pass over the spool handles at most spoolPassFiles entries and reads at
// most spoolPassBytes; the ingest goes on pass after pass until the spool
// is done, so a spool of any size never holds much at once. A pass lists at
// most spoolPassList names: the earliest of them go first.
const (
	spoolPassFiles = 1000
	spoolPassBytes = 32 << 20
	spoolPassList  = 100_000
	// spoolFailed is where entries no agent takes are set aside.
	spoolFailed = "failed"
)

// spoolLoop ingests the spool once the daemon answers, and again each time
// a reload kicks it, until ctx ends. It runs off the start-up path: a
// large spool never holds off the socket. firstDone runs once, after the
// first pass.
func (d *Daemon) spoolLoop(ctx context.Context, firstDone func()) {
	for {
		d.ingestSpool(ctx)
		if firstDone != nil {
			firstDone()
			firstDone = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-d.spoolKick:
		}
	}
}

// kickSpool asks spoolLoop for another ingest (after a reload brought
// agents back); it never waits.
func (d *Daemon) kickSpool() {
	select {
	case d.spoolKick <- struct{}{}:
	default:
	}
}

// ingestSpool stores the events hooks spooled while the daemon was down, in
// the order they happened, and removes each once stored. An event that no
// agent takes is moved to spool/failed with the reason logged.
//
// The spool is writable by the socket's group in a shared setup, so
// nothing in it is followed: every entry is opened, moved and removed
// relative to the spool directory (an os.Root, which no symbolic link or
// ".." leads out of); an entry is read only if it is a regular file within
// the size limit (a FIFO, a device, a symbolic link or an oversized file is
// moved aside to spool/failed unread); spool/failed is created by the
// daemon, private, and used only while it is the daemon's own directory: a
// symbolic link or another user's directory in its place is refused and
// logged, and the entries stay where they are.
func (d *Daemon) ingestSpool(ctx context.Context) {
	st := d.snap()
	dir := statefiles.SpoolDir(st.cfg.Daemon.StateDir)
	root, writers, err := openSpool(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			d.log.Error("spool not read", "err", err)
		}
		return
	}
	defer root.Close()
	stored, after := 0, ""
	for ctx.Err() == nil {
		names, err := spoolNames(root, after)
		if err != nil {
			d.log.Error("spool not read", "err", err)
			break
		}
		done := d.spoolPass(ctx, root, writers, names, &stored)
		if done == 0 || done == len(names) && len(names) < spoolPassFiles {
			break
		}
		after = names[done-1]
	}
	if stored > 0 {
		d.log.Info("stored hook events spooled while the daemon was down", "count", stored)
	}
}

// spoolPass handles the first of names within the pass's bounds and
// returns how many it went through. writers are the groups whose members
// may write in the spool (see ingestOne).
func (d *Daemon) spoolPass(ctx context.Context, root *os.Root, writers []uint32, names []string, stored *int) int {
	st := d.snap()
	read := int64(0)
	for i, name := range names {
		if i == spoolPassFiles || read >= spoolPassBytes || ctx.Err() != nil {
			return i
		}
		n, err := d.ingestOne(ctx, st, root, writers, name)
		read += n
		if err != nil {
			if ctx.Err() != nil {
				return i // shutting down: the entry stays for the next start
			}
			var ce *capsule.Error
			var foreign *foreignSpoolEntry
			switch {
			case errors.As(err, &ce) && ce.Code == capsule.CodeAgentDamaged:
				continue // kept for when the agent is back
			case errors.As(err, &foreign):
				d.log.Warn("spooled hook event refused: its file's owner may not use the agent it names; moved to spool/failed",
					"file", name, "uid", foreign.uid, "agent", foreign.agent)
			case errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrSymlink) || errors.Is(err, safefile.ErrTooLarge):
				d.log.Warn("spool entry refused, not read; moved to spool/failed", "file", name, "err", err)
			default:
				d.log.Warn("spooled hook event not stored; kept in spool/failed", "file", name, "err", err)
			}
			if err := setAside(root, name); err != nil {
				d.log.Error("spool entry not moved to spool/failed; left in the spool", "file", name, "err", err)
			}
			continue
		}
		if err := root.Remove(name); err != nil {
			d.log.Warn("stored spooled hook event not removed from the spool", "file", name, "err", err)
		}
		*stored++
	}
	return len(names)
}

// openSpool opens the spool directory, which must be the daemon's own, and
// says which groups' members may write in it besides the daemon's user
// (its group, when the group may write: a shared socket's spool).
func openSpool(dir string) (*os.Root, []uint32, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, nil, err
	}
	if err := safefile.CheckOwnDir(fi, dir); err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	// The directory opened is the one checked.
	if opened, err := root.Stat("."); err != nil || !os.SameFile(fi, opened) {
		root.Close()
		return nil, nil, &safefile.Error{Path: dir, Reason: safefile.ErrSymlink, Detail: "changed while it was opened; it is not read"}
	}
	var writers []uint32
	if _, gid, ok := safefile.Owner(fi); ok && fi.Mode().Perm()&0o020 != 0 {
		writers = []uint32{gid}
	}
	return root, writers, nil
}

// foreignSpoolEntry is a spooled event whose file's owner may not use the
// agent it names: someone who may write in the spool wrote for an agent
// that is not theirs.
type foreignSpoolEntry struct {
	uid   uint32
	agent string
}

func (e *foreignSpoolEntry) Error() string {
	return fmt.Sprintf("the spool file's owner, uid %d, may not use agent %q", e.uid, e.agent)
}

// spoolNames lists the spooled events after the name after, earliest first
// (their names start with the time they were spooled), at most
// spoolPassList of them. Hidden files are a hook's writes in progress.
func spoolNames(root *os.Root, after string) ([]string, error) {
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	for {
		entries, err := f.ReadDir(1024)
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() && strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".") && name > after {
				names = append(names, name)
			}
		}
		if len(names) > 2*spoolPassList {
			slices.Sort(names)
			names = names[:spoolPassList]
		}
		if errors.Is(err, io.EOF) || err == nil && len(entries) == 0 {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(names)
	if len(names) > spoolPassList {
		names = names[:spoolPassList]
	}
	return names, nil
}

// setAside moves a spool entry into spool/failed, making it (private) if
// it is missing and refusing it if it is not the daemon's own directory.
func setAside(root *os.Root, name string) error {
	path := root.Name() + string(os.PathSeparator) + spoolFailed
	fi, err := root.Lstat(spoolFailed)
	if errors.Is(err, fs.ErrNotExist) {
		if err := root.Mkdir(spoolFailed, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err = root.Lstat(spoolFailed)
	}
	if err != nil {
		return err
	}
	if err := safefile.CheckOwnDir(fi, path); err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o700 {
		if err := root.Chmod(spoolFailed, 0o700); err != nil {
			return err
		}
	}
	return root.Rename(name, spoolFailed+string(os.PathSeparator)+name)
}

// ingestOne stores one spooled event and returns how many bytes it read.
//
// A spooled event is taken only from a user the agent it names admits, as
// the socket would take it: the user is the owner of the file opened (its
// fstat, which no one but root can forge; nothing is looked up by path
// again), and its groups are those the user database gives it and the
// spool's writers (only their members may write in it). Anyone else's
// event, a tool claim among them, is set aside (foreignSpoolEntry).
func (d *Daemon) ingestOne(ctx context.Context, st *snapshot, root *os.Root, writers []uint32, name string) (int64, error) {
	raw, fi, err := safefile.ReadFileInNoFollow(root, name, statefiles.MaxSpooledEvent)
	if err != nil {
		return 0, err
	}
	n := int64(len(raw))
	var ev statefiles.SpooledEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return n, err
	}
	a, cerr := st.agentFor(ev.Agent, ev.Cwd)
	if cerr != nil {
		return n, cerr
	}
	if uid, _, ok := safefile.Owner(fi); ok {
		if !api.AdmitsOwner(a.Config(), uid, writers...) {
			return n, &foreignSpoolEntry{uid: uid, agent: a.Name()}
		}
		ctx = agent.WithCaller(ctx, uid)
	}
	// Its time by the daemon's clock: when its file was made (a tool call
	// it carries is held to that), never later than now.
	if made, ok := safefile.ChangeTime(fi); ok && made.Before(time.Now()) {
		ctx = agent.WithReceipt(ctx, made)
	}
	// The spool is a file anyone with access to the state directory could
	// write: it is the agent's Signal operation, the same guard as the API.
	body, err := json.Marshal(ev.Signal)
	if err != nil {
		return n, err
	}
	_, err = a.Signal(ctx, st.guard, body)
	return n, err
}
