package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// Exit statuses, fixed by the interface.
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitUsage       = 2 // bad usage or bad config
	ExitUnreachable = 3 // the daemon could not be reached
)

// Program is what a main wires into Main.
type Program struct {
	// Version is the build's version, main's own variable set with
	// -ldflags "-X main.version=…"; when it is empty the module version from
	// the build info is used.
	Version string
}

// version is p.Version, or the module version from the build info.
func (p Program) version() string {
	if p.Version != "" {
		return p.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// Env is what a command may touch of the process.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// DefaultPaths is config.DefaultPaths; tests give another user's.
	DefaultPaths func() (stateDir, socket string)
	// Version is the program's version, as `continuityd version` prints it.
	Version string
}

// Paths is where state and socket are when nothing names them.
func (e *Env) Paths() (stateDir, socket string) {
	if e.DefaultPaths != nil {
		return e.DefaultPaths()
	}
	return config.DefaultPaths()
}

// RunFunc runs one command with the arguments after its name and returns
// the exit status.
type RunFunc func(ctx context.Context, e *Env, args []string) int

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string
	Run     RunFunc
}

// commands is the command table: the dispatch and the usage text.
func commands() []Command {
	return []Command{
		{"run", "run the daemon in the foreground", cmdRun},
		{"resume", "where the agent was (markdown; --json)", cmdResume},
		{"checkpoint", "save focus, working state, a decision, public status, commitments", cmdCheckpoint},
		{"capsule", "show | seal | validate FILE | put FILE", cmdCapsule},
		{"signal", "send a context signal: KIND [key=value ...]", cmdSignal},
		{"hook", "agent hook payload on stdin (Claude Code, Codex); always exits 0", cmdHook},
		{"statusline", "Claude Code statusline payload on stdin: forwards context usage, prints one line", cmdStatusline},
		{"mcp", "MCP server on stdio, backed by the daemon", cmdMCP},
		{"status", "the daemon's state (--json)", cmdStatus},
		{"deadletter", "list | retry | discard writes an upstream refused for good", cmdDeadLetter},
		{"fleet", "the agents a fleet (nats) upstream knows: machine, last write, context, phase (--json)", cmdFleet},
		{"snapshot", "list | show ID | diff [ID [ID2]] | restore ID [--path P]... [--all] [--dry-run]: the work snapshots, and rewinding", cmdSnapshot},
		{"recover", "an agent refused for damaged files: what was found; --accept-loss to go on", cmdRecover},
		{"delx", "register [--agent A] [--upstream NAME]: register the agent with Delx ($DELX_REGISTRATION_KEY)", cmdDelx},
		{"config", "check [FILE] | default", cmdConfig},
		{"service", "install|uninstall|start|stop|restart|status [--user] [--config FILE]", cmdService},
		{"version", "print the version", cmdVersion},
	}
}

// Main runs the command line and returns the exit status.
func Main(p Program, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv, DefaultPaths: config.DefaultPaths, Version: p.version()}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands() {
		if c.Name == args[0] {
			return c.Run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(stderr, "continuityd: unknown command %q\n\n", args[0])
	usage(stderr)
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: continuityd COMMAND [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nclient commands find the daemon by --socket, $CONTINUITYD_SOCKET, the socket in --config FILE, or the default socket.")
	fmt.Fprintln(w, "exit status: 0 done, 1 failed, 2 bad usage or config, 3 daemon unreachable.")
}

// ClientFlags are the flags every client command takes.
type ClientFlags struct {
	socket, config, agent string
}

func (cf *ClientFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&cf.socket, "socket", "", "the daemon's socket")
	fs.StringVar(&cf.config, "config", "", "find the socket in this config file")
	fs.StringVar(&cf.agent, "agent", "", "the agent (may be left out when the daemon serves one)")
}

// Client returns a client of the daemon at socketPath.
func (cf *ClientFlags) Client(e *Env) (*client.Client, error) {
	sock, err := cf.SocketPath(e)
	if err != nil {
		return nil, err
	}
	c := client.New(sock)
	c.Agent = cf.agent
	return c, nil
}

// SocketPath resolves the socket: --socket, $CONTINUITYD_SOCKET, --config,
// default.
func (cf *ClientFlags) SocketPath(e *Env) (string, error) {
	if cf.socket != "" {
		return cf.socket, nil
	}
	if v := e.Getenv("CONTINUITYD_SOCKET"); v != "" {
		return v, nil
	}
	if cf.config != "" {
		cfg, err := config.Load(cf.config)
		if err != nil {
			return "", err
		}
		return cfg.Daemon.Socket, nil
	}
	_, sock := e.Paths()
	return sock, nil
}

// NewFlagSet returns a flag set that reports to stderr and does not exit.
func NewFlagSet(e *Env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.Stderr, "usage: continuityd %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// ParseFlags parses flags that may come before or after positional arguments,
// and returns the positional ones.
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// Fail reports an error and maps it to an exit status. Messages carry
// names and text from elsewhere (the daemon, a workdir, a config file), so
// they go through termsafe.
func Fail(e *Env, err error) int {
	var ae *client.APIError
	switch {
	case errors.As(err, &ae):
		if ae.Field != "" {
			fmt.Fprintf(e.Stderr, "continuityd: %s (%s): %s\n", termsafe.Line(ae.Code), termsafe.Line(ae.Field), termsafe.Text(ae.Message))
		} else {
			fmt.Fprintf(e.Stderr, "continuityd: %s: %s\n", termsafe.Line(ae.Code), termsafe.Text(ae.Message))
		}
		return ExitFailed
	case errors.Is(err, client.ErrNoAnswer):
		fmt.Fprintf(e.Stderr, "continuityd: %s\n(if the daemon stays stuck, its log may say why; restarting it loses nothing accepted)\n", termsafe.Text(err.Error()))
		return ExitUnreachable
	case errors.Is(err, client.ErrUnreachable):
		fmt.Fprintf(e.Stderr, "continuityd: %s\n(is the daemon running? start it with `continuityd run`)\n", termsafe.Text(err.Error()))
		return ExitUnreachable
	default:
		var cerr config.Errors
		var one *config.Error
		if errors.As(err, &cerr) || errors.As(err, &one) {
			fmt.Fprintf(e.Stderr, "continuityd: %s\n", termsafe.Text(err.Error()))
			return ExitUsage
		}
		fmt.Fprintf(e.Stderr, "continuityd: %s\n", termsafe.Text(strings.TrimSpace(err.Error())))
		return ExitFailed
	}
}

func cmdVersion(_ context.Context, e *Env, args []string) int {
	fmt.Fprintln(e.Stdout, "continuityd", e.Version)
	return ExitOK
}
