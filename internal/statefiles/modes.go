package statefiles

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Modes are the modes of the state directory and of what hooks use
// while the daemon is down: the spool they leave events in and the agents'
// last-resume files they answer SessionStart with. They are private unless
// the socket lets its group read and write it (daemon.socket_mode =
// "0660", as packaging/README.md advises for a system service shared by a
// group): the group's members are then clients of the daemon, and their
// hooks must still find their way in when it is down.
type Modes struct {
	Dir        fs.FileMode // state_dir (when shared) and each agent's directory
	Agents     fs.FileMode // state_dir/agents
	Spool      fs.FileMode // state_dir/spool
	LastResume fs.FileMode // agents/NAME/last-resume.json
}

// ModesFor returns the modes a socket of mode socketPerm calls for. Shared,
// the group may search the directories but list only the agents (a hook
// finds its agent by reading their last resumes), drop events into the
// spool (setgid: a spooled file takes the daemon's group, so the daemon can
// read it; sticky: a member cannot remove another's) and read the last
// resumes, which the socket would show it anyway.
func ModesFor(socketPerm fs.FileMode) Modes {
	if socketPerm&0o060 == 0o060 {
		return Modes{Dir: 0o710, Agents: 0o750, Spool: fs.ModeSetgid | fs.ModeSticky | 0o770, LastResume: 0o640}
	}
	return Modes{Dir: 0o700, Agents: 0o700, Spool: 0o700, LastResume: 0o600}
}

// Prepare creates the state directory, its agents directory and
// its spool, and gives them the modes the socket calls for whatever the
// umask (the systemd unit runs with 0077). A private state directory that
// exists keeps its mode; the daemon's own subdirectories always get theirs,
// so a socket no longer shared also closes the spool again.
func Prepare(state string, m Modes) error {
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	if m.Dir != 0o700 {
		if err := os.Chmod(state, m.Dir); err != nil {
			return err
		}
	}
	if err := ensureDir(filepath.Join(state, "agents"), m.Agents); err != nil {
		return err
	}
	return ensureDir(SpoolDir(state), m.Spool)
}

// ensureDir creates dir if it is missing and sets its mode.
func ensureDir(dir string, mode fs.FileMode) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}
