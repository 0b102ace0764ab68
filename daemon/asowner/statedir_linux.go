package asowner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/safefile"
)

// An owner's snapshot stores live where the owner's worker, and only it,
// works: STATE/owners/UID/STORE/snapshots.git, with STATE/owners root's
// (mode 0711: each worker reaches its own directory, no one lists them)
// and STATE/owners/UID the owner's (0700), which the daemon makes and
// never opens anything in. The state directory itself gets o+x (search
// only) for the worker to pass through it.
//
// STORE is the agent's name and a hash of its workdir (the embedded
// default's state is parked per directory, so each place has a store of
// its own), recorded in the agent's state directory (StorePointer): a
// configured agent moved on purpose keeps its snapshots, as its state
// directory, which the pointer is in, follows it.

// OwnersDir is the owners' part of the state directory.
const OwnersDir = "owners"

// StorePointer is the file in an agent's state directory that names its
// store under STATE/owners/UID.
const StorePointer = "owner-store"

// StoreOptions say whose store StoreDir prepares.
type StoreOptions struct {
	StateDir string // the daemon's state directory
	AgentDir string // the agent's state directory: STATE/agents/NAME
	Agent    string
	Workdir  string
	// Old is the store the daemon kept itself before it ran workers
	// (STATE/agents/NAME/snapshots.git): moved to the owner once, so
	// history is kept.
	Old    string
	Owner  Owner
	Logger *slog.Logger
}

// StoreDir prepares the owner's part of the state directory and returns
// where the agent's store is (the worker makes it when missing), after
// moving a store the daemon kept itself there.
func StoreDir(o StoreOptions) (string, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ownerFd, err := prepareOwnerDir(o.StateDir, o.Owner)
	if err != nil {
		return "", fmt.Errorf("the owner's part of the state directory: %w", err)
	}
	defer unix.Close(ownerFd)
	name, err := storeName(o)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(o.StateDir, OwnersDir, strconv.FormatUint(uint64(o.Owner.UID), 10), name)
	if err := moveOld(o, ownerFd, name, dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, "snapshots.git"), nil
}

// storeName is the agent's store's name under STATE/owners/UID, from its
// pointer, or made (and recorded) when it has none.
func storeName(o StoreOptions) (string, error) {
	p := filepath.Join(o.AgentDir, StorePointer)
	b, err := safefile.ReadFile(p, 4096)
	switch {
	case err == nil:
		name := strings.TrimSuffix(string(b), "\n")
		if !validStoreName(name) {
			return "", fmt.Errorf("%s does not name a store (%q); remove it to have the agent's store found again", p, name)
		}
		return name, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	sum := sha256.Sum256([]byte(o.Workdir))
	name := o.Agent + "-" + hex.EncodeToString(sum[:6])
	if !validStoreName(name) {
		return "", fmt.Errorf("agent %q: no store name can be made of it", o.Agent)
	}
	if err := atomicfile.WriteFile(p, []byte(name+"\n"), 0o600); err != nil {
		return "", err
	}
	return name, nil
}

// validStoreName is a plain directory name.
func validStoreName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= 200 && !strings.ContainsAny(s, "/\x00\n")
}

// prepareOwnerDir makes STATE searchable, STATE/owners (root's, 0711) and
// STATE/owners/UID (the owner's, 0700), and returns a descriptor of the
// latter. Nothing is followed: STATE/owners is root's alone, so what is
// found in it is what root left.
func prepareOwnerDir(state string, o Owner) (int, error) {
	fi, err := os.Lstat(state)
	if err != nil {
		return -1, err
	}
	if m := fi.Mode().Perm(); m&0o001 == 0 {
		if err := os.Chmod(state, m|0o001); err != nil {
			return -1, err
		}
	}
	stateFd, err := unix.Open(state, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: state, Err: err}
	}
	defer unix.Close(stateFd)
	ownersFd, err := ensureDir(stateFd, state, OwnersDir, 0o711, 0, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(ownersFd)
	return ensureDir(ownersFd, filepath.Join(state, OwnersDir), strconv.FormatUint(uint64(o.UID), 10), 0o700, o.UID, o.GID)
}

// ensureDir makes name in the directory parent (path, for errors) when
// missing, gives it uid:gid and mode, and returns a descriptor of it. A
// name that is not a directory (a link, a file) is refused.
func ensureDir(parent int, path, name string, mode uint32, uid, gid uint32) (int, error) {
	full := filepath.Join(path, name)
	if err := unix.Mkdirat(parent, name, mode); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, &fs.PathError{Op: "mkdir", Path: full, Err: err}
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: full, Err: fmt.Errorf("%w (it must be a directory, not a link)", err)}
	}
	if err := unix.Fchown(fd, int(uid), int(gid)); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "chown", Path: full, Err: err}
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "chmod", Path: full, Err: err}
	}
	return fd, nil
}

// movingName is where a store the daemon kept itself waits while it is
// given to the owner, in the agent's state directory (root's): a move cut
// short goes on at the next start.
const movingName = ".owner-move"

// moveOld gives the owner the store the daemon kept itself, once: it is
// moved aside (still root's), every entry given to the owner (no link
// followed), and the whole renamed into the owner's directory as name,
// never over anything there.
func moveOld(o StoreOptions, ownerFd int, name, dir string) error {
	if o.Old == "" {
		return nil
	}
	agentFd, err := unix.Open(o.AgentDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: o.AgentDir, Err: err}
	}
	defer unix.Close(agentFd)
	oldName := filepath.Base(o.Old)
	if filepath.Dir(o.Old) != filepath.Clean(o.AgentDir) {
		return fmt.Errorf("the old store %s is not in %s", o.Old, o.AgentDir)
	}
	moving := filepath.Join(o.AgentDir, movingName)
	var st unix.Stat_t
	if err := unix.Fstatat(agentFd, movingName, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		if err := unix.Fstatat(agentFd, oldName, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			return nil // nothing to move
		} else if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("the snapshot store %s is not a directory; move it away", o.Old)
		}
		if err := unix.Mkdirat(agentFd, movingName, 0o700); err != nil {
			return &fs.PathError{Op: "mkdir", Path: moving, Err: err}
		}
		if err := unix.Renameat(agentFd, oldName, agentFd, filepath.Join(movingName, "snapshots.git")); err != nil {
			return &fs.PathError{Op: "rename", Path: o.Old, Err: err}
		}
	} else if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory; move it away", moving)
	}
	if err := chownTree(agentFd, movingName, int(o.Owner.UID), int(o.Owner.GID)); err != nil {
		return fmt.Errorf("giving the snapshot store %s to %s: %w", o.Old, o.Owner, err)
	}
	err = unix.Renameat2(agentFd, movingName, ownerFd, name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EEXIST) {
		o.Logger.Warn("the snapshot store the daemon kept itself was not moved to the owner, who has one already; it is kept aside, and the owner's is used",
			"agent", o.Agent, "kept", filepath.Join(moving, "snapshots.git"), "used", filepath.Join(dir, "snapshots.git"))
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "rename", Path: moving, Err: err}
	}
	o.Logger.Info("moved the agent's snapshot store to its workdir's owner, history and all: the owner's worker keeps it from now on",
		"agent", o.Agent, "from", o.Old, "to", filepath.Join(dir, "snapshots.git"), "uid", o.Owner.UID)
	return nil
}

// chownTree gives name in the directory dirFd, and everything below it,
// to uid:gid, deepest first, through descriptors: no link is followed,
// and a directory is given away only once everything in it is.
func chownTree(dirFd int, name string, uid, gid int) error {
	fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return unix.Fchownat(dirFd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			err = unix.Fchownat(fd, e.Name(), uid, gid, unix.AT_SYMLINK_NOFOLLOW)
		} else {
			err = chownTree(fd, e.Name(), uid, gid)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
	}
	return unix.Fchownat(dirFd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}
