package daemoncmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/internal/front/cli"
	"github.com/continuityd/continuityd/packaging"
)

// On macOS the service is the launchd job dev.continuityd: a LaunchAgent in
// ~/Library/LaunchAgents with --user (it runs while the user is logged in),
// else a LaunchDaemon in /Library/LaunchDaemons (run as root).

const (
	managedName = packaging.LaunchdLabel
	// replaceStops: kardianos' launchd Uninstall unloads (stops) the job.
	replaceStops = true
)

func checkPlatform(p string) error {
	if p != "darwin-launchd" {
		return fmt.Errorf("`continuityd service` works with launchd, and this system runs %s", p)
	}
	return nil
}

func checkPrivileges(sa serviceArgs) error {
	if !sa.user && os.Geteuid() != 0 {
		return fmt.Errorf("the system service (a LaunchDaemon) needs root: run `sudo continuityd service %s`, or use --user for a LaunchAgent", sa.action)
	}
	return nil
}

func plistPath(sa serviceArgs) (string, error) {
	if !sa.user {
		return "/Library/LaunchDaemons/" + packaging.LaunchdLabel + ".plist", nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "Library", "LaunchAgents", packaging.LaunchdLabel+".plist"), nil
}

func installedDefinition(sa serviceArgs) (path string, current []byte, exists bool, err error) {
	if path, err = plistPath(sa); err != nil {
		return "", nil, false, err
	}
	current, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil, false, nil
	}
	return path, current, err == nil, err
}

// logPath is where the job's output goes.
func logPath(sa serviceArgs) string {
	if sa.user {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, "Library", "Logs", "continuityd.log")
		}
	}
	return "/Library/Logs/continuityd.log"
}

func renderDefinition(s *serviceSpec) ([]byte, error) {
	return packaging.Plist{
		Binary:           s.binary,
		Config:           s.config,
		WorkingDirectory: s.workdir,
		LogPath:          logPath(s.serviceArgs),
	}.Render()
}

func installNotes(*serviceSpec) []string          { return nil }
func prepareInstall(*cli.Env, *serviceSpec) error { return nil }
func installHint(serviceArgs) string              { return "" }
func notInstalledNote(serviceArgs) string         { return "" }

func logHint(sa serviceArgs) string {
	return "its log: " + logPath(sa)
}

// launchdTarget is the job's service target for launchctl.
func launchdTarget(sa serviceArgs) string {
	if sa.user {
		return "gui/" + strconv.Itoa(os.Getuid()) + "/" + packaging.LaunchdLabel
	}
	return "system/" + packaging.LaunchdLabel
}

// queryState asks `launchctl print`, whose answer `service status` reports
// as given. launchctl knows only loaded jobs: an installed plist that is not
// loaded is reported as installed but not running.
func queryState(sa serviceArgs) (serviceState, error) {
	target := launchdTarget(sa)
	out, err := exec.Command("launchctl", "print", target).Output()
	if err == nil {
		return parseLaunchctlPrint(target, string(out)), nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return serviceState{}, fmt.Errorf("launchctl print %s: %w", target, err)
	}
	path, _, exists, perr := installedDefinition(sa)
	if perr != nil {
		return serviceState{}, perr
	}
	if exists {
		return serviceState{code: statusNotRunning, summary: fmt.Sprintf("%s: not loaded (%s is installed; launchctl: %s)", target, path, strings.TrimSpace(string(ee.Stderr)))}, nil
	}
	return serviceState{code: statusNotInstalled, summary: fmt.Sprintf("%s: not installed (no %s)", target, path)}, nil
}
