package daemoncmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kardianos/service"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/mgr"

	"github.com/continuityd/continuityd/internal/front/cli"
	"github.com/continuityd/continuityd/packaging"
)

// On Windows the service is the SCM service "continuityd", which runs
// `continuityd run --config FILE` as LocalSystem and restarts it 2 s after a
// failure. There are no per-user services, and the embedded default's
// places do not fit a service, so --config is required.

const (
	managedName = packaging.ServiceName
	// replaceStops: a running service cannot be deleted, only marked for
	// deletion, so a replacement stops it first (and starts it again).
	replaceStops = true
)

func checkPlatform(p string) error {
	if p != "windows-service" {
		return fmt.Errorf("`continuityd service` works with the Windows service control manager, not %s", p)
	}
	return nil
}

// checkPrivileges leaves the check to the SCM, which refuses with "Access is
// denied" when the console is not elevated.
func checkPrivileges(serviceArgs) error { return nil }

// renderDefinition is the command line the SCM starts, as mgr.CreateService
// (used by kardianos) records it.
func renderDefinition(s *serviceSpec) ([]byte, error) {
	words := []string{syscall.EscapeArg(s.binary)}
	for _, a := range s.runArgs() {
		words = append(words, syscall.EscapeArg(a))
	}
	return []byte(strings.Join(words, " ")), nil
}

func installedDefinition(serviceArgs) (path string, current []byte, exists bool, err error) {
	path = "Windows service " + managedName
	h, err := windows.OpenSCManager(nil, nil, windows.SC_MANAGER_CONNECT)
	if err != nil {
		return path, nil, false, fmt.Errorf("cannot open the service control manager: %w", err)
	}
	m := &mgr.Mgr{Handle: h}
	defer m.Disconnect()
	name, _ := syscall.UTF16PtrFromString(managedName)
	sh, err := windows.OpenService(m.Handle, name, windows.SERVICE_QUERY_CONFIG)
	if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
		return path, nil, false, nil
	}
	if err != nil {
		return path, nil, false, err
	}
	s := &mgr.Service{Handle: sh, Name: managedName}
	defer s.Close()
	c, err := s.Config()
	if err != nil {
		return path, nil, true, err
	}
	return path, []byte(c.BinaryPathName), true, nil
}

func installNotes(*serviceSpec) []string          { return nil }
func prepareInstall(*cli.Env, *serviceSpec) error { return nil }
func installHint(serviceArgs) string              { return "" }
func notInstalledNote(serviceArgs) string         { return "" }
func logHint(serviceArgs) string {
	return "its log: Event Viewer, Windows Logs > Application, source " + managedName
}

// queryState asks the SCM through kardianos, whose three states are all
// Windows reports here.
func queryState(sa serviceArgs) (serviceState, error) {
	s, err := newManagedService(sa, nil, nil)
	if err != nil {
		return serviceState{}, err
	}
	st, err := s.Status()
	switch {
	case errors.Is(err, service.ErrNotInstalled):
		return serviceState{code: statusNotInstalled, summary: managedName + " (Windows service): not installed"}, nil
	case err != nil:
		return serviceState{}, err
	case st == service.StatusRunning:
		return serviceState{code: statusRunning, summary: managedName + " (Windows service): running"}, nil
	case st == service.StatusStopped:
		return serviceState{code: statusNotRunning, summary: managedName + " (Windows service): stopped"}, nil
	default:
		return serviceState{code: statusNotRunning, summary: managedName + " (Windows service): state unknown"}, nil
	}
}

// scmKey marks a context whose daemon already runs under the SCM.
type scmKey struct{}

// runUnderServiceManager runs the daemon (run) under the Windows service
// control manager when that started this process: the SCM's stop and
// shutdown requests cancel run's context, and the service reports stopped
// once run returns. A daemon that ends on its own ends the process with its
// exit status, so that the SCM sees a failure and applies the recovery
// action (restart after 2 s). Started from a console, or from within run
// itself, it reports handled = false and the caller runs the daemon.
func runUnderServiceManager(ctx context.Context, run func(ctx context.Context, logTo io.Writer) int) (code int, handled bool) {
	if ctx.Value(scmKey{}) != nil {
		return 0, false
	}
	if is, err := svc.IsWindowsService(); err != nil || !is {
		return 0, false
	}
	p := &scmProgram{parent: context.WithValue(ctx, scmKey{}, true), run: run}
	s, err := service.New(p, &service.Config{Name: managedName})
	if err != nil {
		return cli.ExitFailed, true
	}
	if err := s.Run(); err != nil {
		return cli.ExitFailed, true
	}
	return p.code, true
}

// scmProgram is the daemon as a kardianos program.
type scmProgram struct {
	parent context.Context
	run    func(ctx context.Context, logTo io.Writer) int

	mu       sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{}
	stopping bool
	code     int
}

func (p *scmProgram) Start(s service.Service) error {
	// A service's stderr goes nowhere: the log goes to the event log.
	var logTo io.Writer
	if lg, err := s.Logger(nil); err == nil {
		logTo = &serviceLogWriter{log: lg}
	}
	ctx, cancel := context.WithCancel(p.parent)
	p.mu.Lock()
	p.cancel, p.done = cancel, make(chan struct{})
	p.mu.Unlock()
	go func() {
		code := p.run(ctx, logTo)
		p.mu.Lock()
		p.code = code
		stopping := p.stopping
		p.mu.Unlock()
		close(p.done)
		if !stopping {
			os.Exit(max(code, cli.ExitFailed))
		}
	}()
	return nil
}

// stopWait bounds the wait for the daemon; the SCM itself gives a service
// about 20 s.
const stopWait = 18 * time.Second

func (p *scmProgram) Stop(service.Service) error {
	p.mu.Lock()
	p.stopping = true
	cancel, done := p.cancel, p.done
	p.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-time.After(stopWait):
		return errors.New("the daemon did not stop in time")
	}
}
