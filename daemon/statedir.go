package daemon

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/continuityd/continuityd/config"
)

// stateModes are the modes of the state directory and of what hooks use
// while the daemon is down: the spool they leave events in and the agents'
// last-resume files they answer SessionStart with. They are private unless
// the socket lets its group read and write it (daemon.socket_mode =
// "0660", as packaging/README.md advises for a system service shared by a
// group): the group's members are then clients of the daemon, and their
// hooks must still find their way in when it is down.
type stateModes struct {
	dir        fs.FileMode // state_dir (when shared) and each agent's directory
	agents     fs.FileMode // state_dir/agents
	spool      fs.FileMode // state_dir/spool
	lastResume fs.FileMode // agents/NAME/last-resume.json
}

// modesFor returns the modes a socket of mode socketPerm calls for. Shared,
// the group may search the directories but list only the agents (a hook
// finds its agent by reading their last resumes), drop events into the
// spool (setgid: a spooled file takes the daemon's group, so the daemon can
// read it; sticky: a member cannot remove another's) and read the last
// resumes, which the socket would show it anyway.
func modesFor(socketPerm fs.FileMode) stateModes {
	if socketPerm&0o060 == 0o060 {
		return stateModes{dir: 0o710, agents: 0o750, spool: fs.ModeSetgid | fs.ModeSticky | 0o770, lastResume: 0o640}
	}
	return stateModes{dir: 0o700, agents: 0o700, spool: 0o700, lastResume: 0o600}
}

// prepareStateDir creates the state directory, its agents directory and
// its spool, and gives them the modes the socket calls for whatever the
// umask (the systemd unit runs with 0077). A private state directory that
// exists keeps its mode; the daemon's own subdirectories always get theirs,
// so a socket no longer shared also closes the spool again.
func prepareStateDir(cfg *config.Config) error {
	m := modesFor(cfg.Daemon.SocketPerm())
	state := cfg.Daemon.StateDir
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	if m.dir != 0o700 {
		if err := os.Chmod(state, m.dir); err != nil {
			return err
		}
	}
	if err := ensureDir(filepath.Join(state, "agents"), m.agents); err != nil {
		return err
	}
	return ensureDir(SpoolDir(state), m.spool)
}

// ensureDir creates dir if it is missing and sets its mode.
func ensureDir(dir string, mode fs.FileMode) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}
