// Package spool ingests the hook events `continuityd hook` spooled while
// the daemon was down (internal/statefiles writes them): in the order they
// happened, each handed to the daemon's Store (the agent it names) and
// removed once stored, set aside in spool/failed when no agent takes it.
// It runs off the start-up path, in passes of bounded size, and again when
// the daemon asks (a reload brought an agent back).
//
// The spool is writable by the socket's group in a shared setup, so
// nothing in it is followed or believed: see Ingester.
package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/safefile"
	"github.com/continuityd/continuityd/internal/statefiles"
)

// A pass over the spool handles at most PassFiles entries and reads at
// most passBytes; the ingest goes on pass after pass until the spool
// is done, so a spool of any size never holds much at once. A pass lists at
// most passList names: the earliest of them go first.
const (
	PassFiles = 1000
	passBytes = 32 << 20
	passList  = 100_000
	// failedDir is where entries no agent takes are set aside.
	failedDir = "failed"
)

// Entry is one spooled event as its file gives it, with what the file
// says of who wrote it and when.
type Entry struct {
	Event statefiles.SpooledEvent
	// Owner is the uid of the file's owner, as its fstat gives it (which no
	// one but root can forge); Owned is false when it is not known.
	// Writers are the groups whose members may write in the spool besides
	// the daemon's user. A Store takes an event only from a user the agent
	// it names admits, as the socket would (see ForeignError).
	Owner   uint32
	Owned   bool
	Writers []uint32
	// Made is when the file was made, by the daemon's clock (zero: not
	// known, or later than now): a tool call the event carries is held to
	// that time.
	Made time.Time
}

// Store stores one spooled event. Its error decides what becomes of the
// entry: a capsule.Error with CodeAgentDamaged keeps it in the spool for
// when the agent is back; any other error (a *ForeignError among them)
// moves it to spool/failed, logged; while ctx is cancelled the entry stays
// for the next start.
type Store func(ctx context.Context, e Entry) error

// Ingester stores one state directory's spool through a Store.
type Ingester struct {
	dir   string
	store Store
	log   *slog.Logger
	kick  chan struct{} // asks Loop for another ingest
}

// New is the ingester of the spool in stateDir.
func New(stateDir string, store Store, log *slog.Logger) *Ingester {
	return &Ingester{dir: statefiles.SpoolDir(stateDir), store: store, log: log, kick: make(chan struct{}, 1)}
}

// Loop ingests the spool once the daemon answers, and again each time
// Kick asks, until ctx ends. It runs off the start-up path: a
// large spool never holds off the socket. firstDone runs once, after the
// first pass.
func (in *Ingester) Loop(ctx context.Context, firstDone func()) {
	for {
		in.ingest(ctx)
		if firstDone != nil {
			firstDone()
			firstDone = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-in.kick:
		}
	}
}

// Kick asks Loop for another ingest (after a reload brought agents back);
// it never waits.
func (in *Ingester) Kick() {
	select {
	case in.kick <- struct{}{}:
	default:
	}
}

// ingest stores the events hooks spooled while the daemon was down, in
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
func (in *Ingester) ingest(ctx context.Context) {
	root, writers, err := openSpool(in.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			in.log.Error("spool not read", "err", err)
		}
		return
	}
	defer root.Close()
	stored, after := 0, ""
	for ctx.Err() == nil {
		names, err := spoolNames(root, after)
		if err != nil {
			in.log.Error("spool not read", "err", err)
			break
		}
		done := in.pass(ctx, root, writers, names, &stored)
		if done == 0 || done == len(names) && len(names) < PassFiles {
			break
		}
		after = names[done-1]
	}
	if stored > 0 {
		in.log.Info("stored hook events spooled while the daemon was down", "count", stored)
	}
}

// pass handles the first of names within the pass's bounds and
// returns how many it went through. writers are the groups whose members
// may write in the spool (see Entry).
func (in *Ingester) pass(ctx context.Context, root *os.Root, writers []uint32, names []string, stored *int) int {
	read := int64(0)
	for i, name := range names {
		if i == PassFiles || read >= passBytes || ctx.Err() != nil {
			return i
		}
		n, err := in.ingestOne(ctx, root, writers, name)
		read += n
		if err != nil {
			if ctx.Err() != nil {
				return i // shutting down: the entry stays for the next start
			}
			var ce *capsule.Error
			var foreign *ForeignError
			switch {
			case errors.As(err, &ce) && ce.Code == capsule.CodeAgentDamaged:
				continue // kept for when the agent is back
			case errors.As(err, &foreign):
				in.log.Warn("spooled hook event refused: its file's owner may not use the agent it names; moved to spool/failed",
					"file", name, "uid", foreign.UID, "agent", foreign.Agent)
			case errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrSymlink) || errors.Is(err, safefile.ErrTooLarge):
				in.log.Warn("spool entry refused, not read; moved to spool/failed", "file", name, "err", err)
			default:
				in.log.Warn("spooled hook event not stored; kept in spool/failed", "file", name, "err", err)
			}
			if err := setAside(root, name); err != nil {
				in.log.Error("spool entry not moved to spool/failed; left in the spool", "file", name, "err", err)
			}
			continue
		}
		if err := root.Remove(name); err != nil {
			in.log.Warn("stored spooled hook event not removed from the spool", "file", name, "err", err)
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

// ForeignError is a Store's answer for a spooled event whose file's owner
// may not use the agent it names: someone who may write in the spool
// wrote for an agent that is not theirs.
type ForeignError struct {
	UID   uint32
	Agent string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("the spool file's owner, uid %d, may not use agent %q", e.UID, e.Agent)
}

// spoolNames lists the spooled events after the name after, earliest first
// (their names start with the time they were spooled), at most
// passList of them. Hidden files are a hook's writes in progress.
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
		if len(names) > 2*passList {
			slices.Sort(names)
			names = names[:passList]
		}
		if errors.Is(err, io.EOF) || err == nil && len(entries) == 0 {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(names)
	if len(names) > passList {
		names = names[:passList]
	}
	return names, nil
}

// setAside moves a spool entry into spool/failed, making it (private) if
// it is missing and refusing it if it is not the daemon's own directory.
func setAside(root *os.Root, name string) error {
	path := root.Name() + string(os.PathSeparator) + failedDir
	fi, err := root.Lstat(failedDir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := root.Mkdir(failedDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err = root.Lstat(failedDir)
	}
	if err != nil {
		return err
	}
	if err := safefile.CheckOwnDir(fi, path); err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o700 {
		if err := root.Chmod(failedDir, 0o700); err != nil {
			return err
		}
	}
	return root.Rename(name, failedDir+string(os.PathSeparator)+name)
}

// ingestOne stores one spooled event and returns how many bytes it read.
// The event's user is the owner of the file opened (its fstat; nothing is
// looked up by path again).
func (in *Ingester) ingestOne(ctx context.Context, root *os.Root, writers []uint32, name string) (int64, error) {
	raw, fi, err := safefile.ReadFileInNoFollow(root, name, statefiles.MaxSpooledEvent)
	if err != nil {
		return 0, err
	}
	n := int64(len(raw))
	e := Entry{Writers: writers}
	if err := json.Unmarshal(raw, &e.Event); err != nil {
		return n, err
	}
	e.Owner, _, e.Owned = safefile.Owner(fi)
	if made, ok := safefile.ChangeTime(fi); ok && made.Before(time.Now()) {
		e.Made = made
	}
	return n, in.store(ctx, e)
}
