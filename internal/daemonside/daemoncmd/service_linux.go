package daemoncmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/internal/front/cli"
	"github.com/continuityd/continuityd/packaging"
)

// On Linux the service is the systemd unit continuityd.service, in
// /etc/systemd/system, or ~/.config/systemd/user with --user (where
// kardianos writes it).

const (
	managedName = packaging.ServiceName
	unitName    = packaging.ServiceName + ".service"
	// replaceStops: kardianos' systemd Uninstall leaves a running service
	// running, so replacing a unit does not stop it.
	replaceStops = false
)

func checkPlatform(p string) error {
	if p != "linux-systemd" {
		return fmt.Errorf("`continuityd service` works with systemd, and this system runs %s: start `continuityd run` from your init system instead", p)
	}
	return nil
}

func checkPrivileges(sa serviceArgs) error {
	if !sa.user && os.Geteuid() != 0 {
		return fmt.Errorf("the system service needs root: run `sudo continuityd service %s`, or use --user for a service of your own", sa.action)
	}
	return nil
}

// unitPath is where the installed unit lives.
func unitPath(sa serviceArgs) (string, error) {
	if !sa.user {
		return "/etc/systemd/system/" + unitName, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".config", "systemd", "user", unitName), nil
}

func installedDefinition(sa serviceArgs) (path string, current []byte, exists bool, err error) {
	if path, err = unitPath(sa); err != nil {
		return "", nil, false, err
	}
	current, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil, false, nil
	}
	return path, current, err == nil, err
}

func renderDefinition(s *serviceSpec) ([]byte, error) {
	return packaging.Unit{
		UserUnit:         s.user,
		Binary:           s.binary,
		Config:           s.config,
		WorkingDirectory: s.workdir,
		StateDir:         s.cfg.Daemon.StateDir,
		SocketDir:        filepath.Dir(s.cfg.Daemon.Socket),
		Workdirs:         s.workdirs(),
		ReadPaths:        s.readPaths(),
	}.Render()
}

// installNotes are what the system service, running as its own user in a
// sandbox, may trip over.
func installNotes(s *serviceSpec) []string {
	if s.user {
		return nil
	}
	var w []string
	if dirs := s.workdirs(); len(dirs) > 0 {
		w = append(w, fmt.Sprintf("the service runs as the user %s, which must be able to read and write %s (for example: setfacl -R -m u:%[1]s:rwX,d:u:%[1]s:rwX DIR)", packaging.SystemUser, strings.Join(dirs, ", ")))
	}
	if s.config != "" {
		if data, err := os.ReadFile(s.config); err == nil && strings.Contains(string(data), `"~/`) {
			w = append(w, fmt.Sprintf("%s uses ~/ paths, which the service (user %s, whose home is %s) reads differently from you: use absolute paths", s.config, packaging.SystemUser, packaging.SystemStateDir))
		}
		if fi, err := os.Stat(s.config); err == nil && fi.Mode().Perm()&0o044 == 0 {
			w = append(w, fmt.Sprintf("%s is readable by its owner only; let the service read it: chgrp %s %[1]s && chmod 0640 %[1]s", s.config, packaging.SystemUser))
		}
	}
	return w
}

// prepareInstall creates the system service's user when it is missing, from
// the same sysusers.d entry the packages install.
func prepareInstall(e *cli.Env, s *serviceSpec) error {
	if s.user {
		return nil
	}
	if _, err := user.Lookup(packaging.SystemUser); err == nil {
		return nil
	}
	var cmd *exec.Cmd
	if sysusers, err := exec.LookPath("systemd-sysusers"); err == nil {
		conf := "/usr/lib/sysusers.d/continuityd.conf"
		if _, err := os.Stat(conf); err != nil {
			conf = "/etc/sysusers.d/continuityd.conf"
			if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(conf, packaging.Sysusers(), 0o644); err != nil {
				return err
			}
		}
		cmd = exec.Command(sysusers, conf)
	} else {
		cmd = exec.Command("useradd", "--system", "--user-group", "--home-dir", packaging.SystemStateDir,
			"--no-create-home", "--shell", "/usr/sbin/nologin", "--comment", "continuityd daemon", packaging.SystemUser)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot create the user %s (%s): %v: %s", packaging.SystemUser, strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)))
	}
	fmt.Fprintf(e.Stdout, "created the system user %s\n", packaging.SystemUser)
	return nil
}

func installHint(sa serviceArgs) string {
	if sa.user {
		return "to keep it running while you are logged out: loginctl enable-linger \"$USER\""
	}
	return ""
}

// notInstalledNote mentions a packaged unit, which uninstall leaves alone.
func notInstalledNote(sa serviceArgs) string {
	dir := "/usr/lib/systemd/system/"
	if sa.user {
		dir = "/usr/lib/systemd/user/"
	}
	if _, err := os.Stat(dir + unitName); err == nil {
		return fmt.Sprintf(" (%s%s belongs to the continuityd package)", dir, unitName)
	}
	return ""
}

func logHint(sa serviceArgs) string {
	if sa.user {
		return "its log: journalctl --user -u " + unitName + " -n 50"
	}
	return "its log: journalctl -u " + unitName + " -n 50"
}

// queryState asks systemctl, whose answer `service status` reports as given.
func queryState(sa serviceArgs) (serviceState, error) {
	args := []string{"show", unitName, "--property=" + strings.Join(systemdProperties, ",")}
	if sa.user {
		args = append([]string{"--user"}, args...)
	}
	out, err := exec.Command("systemctl", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return serviceState{}, fmt.Errorf("systemctl %s: %s", strings.Join(args, " "), strings.TrimSpace(string(ee.Stderr)))
		}
		return serviceState{}, fmt.Errorf("systemctl %s: %w", strings.Join(args, " "), err)
	}
	return parseSystemctlShow(unitName, sa.scope(), string(out)), nil
}
