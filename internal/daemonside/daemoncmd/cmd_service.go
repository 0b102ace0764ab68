package daemoncmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/kardianos/service"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/place"
	"github.com/continuityd/continuityd/internal/front/cli"
)

// `continuityd service ACTION [--user] [--config FILE]` installs and controls
// continuityd as a service of the host's service manager: systemd (system
// or --user) on Linux, launchd (a LaunchDaemon, or a LaunchAgent with --user)
// on macOS, the service control manager on Windows. Install, uninstall,
// start, stop and restart go through github.com/kardianos/service, with the
// unit or plist rendered from the templates in packaging/; status asks
// systemctl or launchctl directly, because kardianos' Status misreads
// states (failed, auto-restart, not installed).
//
// Exit status of `service status`: 0 running; 1 installed but not running
// (also: the service manager could not be asked); 3 not installed; 2 bad
// usage. The other actions exit 0 done, 1 failed, 2 bad usage or config.

const serviceUsage = "install|uninstall|start|stop|restart|status [--user] [--config FILE] [--print]"

// Exit statuses of `service status`.
const (
	statusRunning      = cli.ExitOK
	statusNotRunning   = cli.ExitFailed
	statusNotInstalled = 3
)

var serviceActions = []string{"install", "uninstall", "start", "stop", "restart", "status"}

// serviceArgs are the parsed arguments of `continuityd service`.
type serviceArgs struct {
	action string
	user   bool   // a per-user service instead of a system one
	config string // install: the config file, "" for the embedded default
	print  bool   // install: print the definition instead of installing it
}

func parseServiceArgs(e *cli.Env, args []string) (serviceArgs, bool) {
	var sa serviceArgs
	fs := cli.NewFlagSet(e, "service", serviceUsage)
	fs.BoolVar(&sa.user, "user", false, "a per-user service (systemd --user, a launchd LaunchAgent) instead of a system service")
	fs.StringVar(&sa.config, "config", "", "install: the config `FILE` the service runs with (without it: the embedded default)")
	fs.BoolVar(&sa.print, "print", false, "install: print the unit (or plist) that would be installed, and install nothing")
	pos, err := cli.ParseFlags(fs, args)
	if err != nil {
		return sa, false
	}
	switch {
	case len(pos) == 0:
		cli.Missing(e, "service", "the action: "+strings.Join(serviceActions, ", "))
		return sa, false
	case !slices.Contains(serviceActions, pos[0]):
		cli.UnknownSub(e, "service", pos[0])
		return sa, false
	case len(pos) > 1:
		cli.TooMany(e, "service "+pos[0], pos[1])
		return sa, false
	}
	sa.action = pos[0]
	if sa.print && sa.action != "install" {
		fmt.Fprintln(e.Stderr, "continuityd service: --print goes with install")
		return sa, false
	}
	return sa, true
}

func cmdService(_ context.Context, e *cli.Env, args []string) int {
	sa, ok := parseServiceArgs(e, args)
	if !ok {
		return cli.ExitUsage
	}
	if sa.user && runtime.GOOS == "windows" {
		fmt.Fprintln(e.Stderr, "continuityd service: Windows has no per-user services; leave out --user (and run as Administrator)")
		return cli.ExitUsage
	}
	switch sa.action {
	case "install":
		return serviceInstall(e, sa)
	case "uninstall":
		return serviceUninstall(e, sa)
	case "status":
		return serviceStatus(e, sa)
	default:
		return serviceControl(e, sa)
	}
}

// scope names the kind of service in messages.
func (sa serviceArgs) scope() string {
	if sa.user {
		return "user"
	}
	return "system"
}

// userFlag is " --user" for a per-user service, for the hints printed.
func (sa serviceArgs) userFlag() string {
	if sa.user {
		return " --user"
	}
	return ""
}

// serviceSpec is what an installed service runs: this binary, with the
// config resolved as the service will resolve it.
type serviceSpec struct {
	serviceArgs
	binary  string         // absolute path of the running executable
	cfg     *config.Config // the config, loaded and checked
	workdir string         // the daemon's working directory, "" for the manager's default
}

// errUsage marks an install that cannot be made from these arguments.
type errUsage struct{ error }

// newServiceSpec resolves the binary and loads the config.
func newServiceSpec(sa serviceArgs) (*serviceSpec, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this executable: %w", err)
	}
	s := &serviceSpec{serviceArgs: sa, binary: bin}
	if sa.config == "" {
		if !sa.user && runtime.GOOS != "linux" {
			return nil, errUsage{errors.New("give the system service a config with --config FILE: the embedded default's state and socket places fit only Linux system services and per-user services")}
		}
		s.cfg, err = config.Default()
	} else {
		if s.config, err = filepath.Abs(sa.config); err != nil {
			return nil, err
		}
		s.cfg, err = config.Load(s.config)
	}
	if err != nil {
		return nil, errUsage{err} // as `run` would refuse it
	}
	// Without [[agent]] tables the config serves agent "default" in the
	// current directory: the service must start there too. From / or the
	// home, which are never a place, it starts where its manager starts
	// it (/ or the home) and serves only the places sessions adopt.
	cwd, err := os.Getwd()
	if err == nil && len(s.cfg.Agents) == 1 && s.cfg.Agents[0].Name == config.DefaultAgent && s.cfg.Agents[0].Workdir == filepath.Clean(cwd) {
		home, _ := os.UserHomeDir()
		if wd := place.Canonical(cwd); wd != "/" && (home == "" || wd != place.Canonical(home)) {
			s.workdir = cwd
		}
	}
	return s, nil
}

// workdirs are the agents' work directories.
func (s *serviceSpec) workdirs() []string {
	var out []string
	for _, a := range s.cfg.Agents {
		if a.Workdir != "" {
			out = append(out, a.Workdir)
		}
	}
	return out
}

// readPaths are the files the daemon reads: the config and the token files.
func (s *serviceSpec) readPaths() []string {
	var out []string
	if s.config != "" {
		out = append(out, s.config)
	}
	var tokens []string
	for _, u := range s.cfg.Upstreams {
		if filepath.IsAbs(u.TokenFile) {
			tokens = append(tokens, u.TokenFile)
		}
	}
	slices.Sort(tokens) // the unit must not change from one install to the next
	return append(out, tokens...)
}

// runArgs are the arguments the service manager starts the binary with.
func (s *serviceSpec) runArgs() []string {
	if s.config == "" {
		return []string{"run"}
	}
	return []string{"run", "--config", s.config}
}

// noProgram satisfies service.Interface for the control actions; the
// daemon itself runs under the manager through `continuityd run`.
type noProgram struct{}

func (noProgram) Start(service.Service) error { return nil }
func (noProgram) Stop(service.Service) error  { return nil }

// newManagedService is the kardianos service for sa, with the definition
// def (the unit or plist text; nil for control actions).
func newManagedService(sa serviceArgs, s *serviceSpec, def []byte) (service.Service, error) {
	c := &service.Config{
		Name:        managedName,
		DisplayName: "continuityd",
		Description: "continuityd, the continuity daemon for AI agents",
		Option: service.KeyValue{
			"UserService": sa.user,
			"Restart":     "on-failure",
			// Windows: restart 2 s after a failure.
			"OnFailure":              "restart",
			"OnFailureDelayDuration": "2s",
			"OnFailureResetPeriod":   60,
		},
	}
	if s != nil {
		c.Executable, c.Arguments, c.WorkingDirectory = s.binary, s.runArgs(), s.workdir
	}
	if def != nil {
		// kardianos renders these with its own small template engine; the
		// text is already rendered, and must not look like a template.
		if bytes.Contains(def, []byte("{{")) {
			return nil, errors.New(`a path holds "{{", which the service installer would take for a template`)
		}
		c.Option["SystemdScript"] = string(def)
		c.Option["LaunchdConfig"] = string(def)
	}
	svc, err := service.New(noProgram{}, c)
	if err != nil {
		return nil, fmt.Errorf("no service manager found: %w", err)
	}
	if err := checkPlatform(svc.Platform()); err != nil {
		return nil, err
	}
	return svc, nil
}

func serviceInstall(e *cli.Env, sa serviceArgs) int {
	s, err := newServiceSpec(sa)
	if err != nil {
		return serviceFail(e, err)
	}
	def, err := renderDefinition(s)
	if err != nil {
		return serviceFail(e, err)
	}
	if sa.print {
		e.Stdout.Write(def)
		return cli.ExitOK
	}
	if strings.Contains(s.binary, "go-build") {
		return serviceFail(e, fmt.Errorf("%s is a temporary build (go run): build or install continuityd first, then install the service from that binary", s.binary))
	}
	if err := checkPrivileges(sa); err != nil {
		return serviceFail(e, err)
	}
	svc, err := newManagedService(sa, s, def)
	if err != nil {
		return serviceFail(e, err)
	}
	path, current, exists, err := installedDefinition(sa)
	if err != nil {
		return serviceFail(e, err)
	}
	if exists && bytes.Equal(current, def) {
		fmt.Fprintf(e.Stdout, "the %s service is already installed as %s, unchanged\n", sa.scope(), path)
		return cli.ExitOK
	}
	for _, n := range installNotes(s) {
		fmt.Fprintf(e.Stderr, "continuityd: note: %s\n", n)
	}
	if err := prepareInstall(e, s); err != nil {
		return serviceFail(e, err)
	}
	running := false
	if exists {
		// kardianos refuses to install over an existing service: replace it.
		st, err := queryState(sa)
		running = err == nil && st.code == statusRunning
		if running && replaceStops {
			svc.Stop()
		}
		if err := svc.Uninstall(); err != nil {
			return serviceFail(e, fmt.Errorf("cannot replace the installed service: %w", err))
		}
	}
	if err := svc.Install(); err != nil {
		return serviceFail(e, fmt.Errorf("install: %w", err))
	}
	switch {
	case exists && running && replaceStops:
		if err := svc.Start(); err != nil {
			return serviceFail(e, fmt.Errorf("replaced the service, but could not start it again: %w", err))
		}
		fmt.Fprintf(e.Stdout, "replaced the %s service %s, and started it again\n", sa.scope(), path)
	case exists && running:
		fmt.Fprintf(e.Stdout, "replaced the %s service %s; it still runs the old definition: continuityd service restart%s\n", sa.scope(), path, sa.userFlag())
	case exists:
		fmt.Fprintf(e.Stdout, "replaced the %s service %s\n", sa.scope(), path)
	default:
		fmt.Fprintf(e.Stdout, "installed the %s service %s; start it with: continuityd service start%s\n", sa.scope(), path, sa.userFlag())
		if hint := installHint(sa); hint != "" {
			fmt.Fprintln(e.Stdout, hint)
		}
	}
	return cli.ExitOK
}

func serviceUninstall(e *cli.Env, sa serviceArgs) int {
	if err := checkPrivileges(sa); err != nil {
		return serviceFail(e, err)
	}
	path, _, exists, err := installedDefinition(sa)
	if err != nil {
		return serviceFail(e, err)
	}
	if !exists {
		fmt.Fprintf(e.Stdout, "no %s service installed by `continuityd service install`: nothing to remove%s\n", sa.scope(), notInstalledNote(sa))
		return cli.ExitOK
	}
	svc, err := newManagedService(sa, nil, nil)
	if err != nil {
		return serviceFail(e, err)
	}
	svc.Stop() // an error here means it was not running
	if err := svc.Uninstall(); err != nil {
		return serviceFail(e, fmt.Errorf("uninstall: %w", err))
	}
	fmt.Fprintf(e.Stdout, "stopped and removed the %s service %s; its state directory is kept\n", sa.scope(), path)
	return cli.ExitOK
}

// serviceControl is start, stop and restart.
func serviceControl(e *cli.Env, sa serviceArgs) int {
	if err := checkPrivileges(sa); err != nil {
		return serviceFail(e, err)
	}
	svc, err := newManagedService(sa, nil, nil)
	if err != nil {
		return serviceFail(e, err)
	}
	switch sa.action {
	case "start":
		err = svc.Start()
	case "stop":
		err = svc.Stop()
	case "restart":
		err = svc.Restart()
	}
	if err != nil {
		// kardianos reports only the exit status of systemctl or
		// launchctl: show what the service manager says.
		fmt.Fprintf(e.Stderr, "continuityd: service %s: %v\n", sa.action, err)
		serviceStatusTo(e, e.Stderr, sa)
		if hint := logHint(sa); hint != "" {
			fmt.Fprintln(e.Stderr, hint)
		}
		return cli.ExitFailed
	}
	fmt.Fprintf(e.Stdout, "%s: done\n", sa.action)
	return cli.ExitOK
}

func serviceStatus(e *cli.Env, sa serviceArgs) int {
	return serviceStatusTo(e, e.Stdout, sa)
}

// serviceStatusTo writes the service manager's view of the service to w and
// returns the status exit code; when the manager cannot be asked, it says so
// on stderr and returns statusNotRunning.
func serviceStatusTo(e *cli.Env, w io.Writer, sa serviceArgs) int {
	st, err := queryState(sa)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd: service status: cannot ask the service manager whether the service is installed or running: %v\n", err)
		return statusNotRunning
	}
	fmt.Fprint(w, st)
	return st.code
}

func serviceFail(e *cli.Env, err error) int {
	var ue errUsage
	if errors.As(err, &ue) {
		fmt.Fprintf(e.Stderr, "continuityd: %v\n", err)
		return cli.ExitUsage
	}
	return cli.Fail(e, err)
}

// serviceState is a service manager's answer, reduced to what `service
// status` reports: its exit status and a one-line summary in plain words
// (installed or not, running, starting or stopped, and why), not the
// manager's own properties.
type serviceState struct {
	code    int
	summary string
}

func (st serviceState) String() string { return st.summary + "\n" }

// systemdProperties are the properties `service status` asks systemctl for.
var systemdProperties = []string{"LoadState", "ActiveState", "SubState", "MainPID", "Result", "NRestarts", "ExecMainStatus", "UnitFileState", "FragmentPath"}

// parseSystemctlShow reads the output of `systemctl show --property=…`.
func parseSystemctlShow(unit, scope, out string) serviceState {
	var st serviceState
	v := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		v[k] = val
	}
	head := fmt.Sprintf("%s (%s)", unit, scope)
	switch load := v["LoadState"]; load {
	case "loaded":
	case "not-found", "":
		st.code, st.summary = statusNotInstalled, head+": not installed"
		return st
	case "masked":
		st.code, st.summary = statusNotRunning, head+": installed, stopped: masked (systemctl unmask "+unit+")"
		return st
	default: // bad-setting, error
		st.code, st.summary = statusNotRunning, head+": installed, stopped: the unit file cannot be loaded ("+load+")"
		return st
	}
	failed := ""
	if r := v["Result"]; r != "" && r != "success" {
		failed = " (" + r + ")"
	}
	switch v["ActiveState"] {
	case "active", "reloading":
		st.code = statusRunning
		st.summary = fmt.Sprintf("%s: installed, running, pid %s", head, v["MainPID"])
	case "activating":
		st.code = statusNotRunning
		if v["SubState"] == "auto-restart" {
			st.summary = head + ": installed, stopped: restarting after a failure" + failed
		} else {
			st.summary = head + ": installed, starting"
		}
	case "failed":
		st.code = statusNotRunning
		st.summary = head + ": installed, stopped: failed" + failed
	case "deactivating":
		st.code = statusNotRunning
		st.summary = head + ": installed, stopping"
	default: // inactive
		st.code = statusNotRunning
		st.summary = head + ": installed, stopped"
		if failed != "" {
			st.summary += ": last run failed" + failed
		}
	}
	if n := v["NRestarts"]; n != "" && n != "0" {
		st.summary += ", restarted " + n + " times"
	}
	return st
}

// parseLaunchctlPrint reads the output of `launchctl print DOMAIN/LABEL`:
// its top-level "key = value" lines.
func parseLaunchctlPrint(target, out string) serviceState {
	var st serviceState
	v := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "\t\t") {
			continue
		}
		k, val, ok := strings.Cut(strings.TrimSpace(line), " = ")
		if !ok || strings.HasSuffix(val, "{") {
			continue
		}
		v[k] = val
	}
	switch {
	case v["state"] == "running" && v["pid"] != "":
		st.code = statusRunning
		st.summary = fmt.Sprintf("%s: installed, running, pid %s", target, v["pid"])
	default:
		st.code = statusNotRunning
		st.summary = fmt.Sprintf("%s: installed, stopped (%s)", target, orUnknown(v["state"]))
		if c := v["last exit code"]; c != "" {
			st.summary += ", last exit code " + c
		}
	}
	if n := v["runs"]; n != "" {
		st.summary += ", runs " + n
	}
	return st
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown state"
	}
	return s
}
