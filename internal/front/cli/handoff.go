package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/continuityd/continuityd/internal/termsafe"
)

// DaemonBinary is the binary that runs the daemon-side commands
// (cmd/continuityd-daemon).
const DaemonBinary = "continuityd-daemon"

// HandToDaemon is the continuityd front's Program.DaemonSide: it hands
// the command to continuityd-daemon, beside this executable or on $PATH.
// On Unix the front becomes it (exec), so the process keeps its PID: a
// service manager, and whoever started `continuityd run`, sees and signals
// the daemon itself. Elsewhere the daemon runs as a child with the same
// standard streams, is passed the interrupts, and its exit status is this
// process's.
//
// `continuityd mcp` first hands the client's stdio to the running daemon
// itself (handMCPStdio: GET /mcp/stdio on its socket, then the descriptors
// over it), which serves the MCP session in process: no process stands
// between the client and the daemon, and this one waits, reading nothing,
// until the session ends. Only when that cannot be done (no daemon yet, one
// without the endpoint or at its session bound, stdio not a pipe or
// socket, a system that cannot pass descriptors) does it become
// `continuityd-daemon mcp`, which serves the client over the socket's API,
// as before.
func HandToDaemon(ctx context.Context, e *Env, name string, args []string) int {
	if name == "mcp" {
		if code, handed := handMCPStdio(ctx, e, args); handed {
			return code
		}
	}
	path, err := findDaemon(os.Executable, exec.LookPath)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd: %s runs in %s: %s\n", name, DaemonBinary, termsafe.Text(err.Error()))
		return ExitFailed
	}
	return handOff(ctx, e, path, append([]string{name}, args...))
}

// findDaemon finds continuityd-daemon: beside the running executable
// (self, with symlinks resolved, so a link to continuityd elsewhere finds
// the binary it was installed with), then on $PATH (lookPath). The error
// names both places and how to build the binary.
func findDaemon(self func() (string, error), lookPath func(string) (string, error)) (string, error) {
	name := DaemonBinary
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	beside := "beside this executable (it could not be found)"
	if exe, err := self(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		p := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
		beside = p
	}
	p, err := lookPath(DaemonBinary)
	if err == nil {
		return p, nil
	}
	if errors.Is(err, exec.ErrDot) {
		err = fmt.Errorf("the one $PATH names is in the current directory, which is not trusted (%w)", err)
	} else {
		err = errors.New("not on $PATH")
	}
	return "", fmt.Errorf("found neither at %s nor on $PATH (%v); build and install both binaries with `go install ./cmd/...` from a clone of continuityd (or install the package, which ships both)", beside, err)
}
