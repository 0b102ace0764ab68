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

	"github.com/continuityd/continuityd/capsule/guard"
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
	// DaemonSide runs the daemon-side commands, the table's entries with no
	// Run: they link the daemon and what only it needs (metrics, NATS, the
	// service managers, the MCP SDK), whose package initialisation every
	// process of a binary pays, and an agent starts `continuityd hook` many
	// times a session. continuityd-daemon runs them itself
	// (daemoncmd.Run); the continuityd front hands them to it (HandToDaemon).
	DaemonSide func(ctx context.Context, e *Env, name string, args []string) int
	// CapsuleSchema compiles the published capsule schema for `capsule
	// validate` (capsule/schema, which links a JSON Schema library). The
	// front leaves it nil and hands that command to continuityd-daemon
	// through DaemonSide.
	CapsuleSchema func() (guard.CapsuleSchema, error)
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
	// CapsuleSchema is Program.CapsuleSchema; with it nil, `capsule
	// validate` is handed over (handOver).
	CapsuleSchema func() (guard.CapsuleSchema, error)
	// handOver is Program.DaemonSide: a command this program cannot run
	// itself is handed to it by name.
	handOver func(ctx context.Context, e *Env, name string, args []string) int
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
	Run     RunFunc // nil for a daemon-side command: Program.DaemonSide runs it
}

// commands is the command table: the dispatch and the usage text.
func commands() []Command {
	return []Command{
		{"run", "run the daemon in the foreground", nil},
		{"install", "claude-code|codex|mcp [--scope user|project] [--dry-run]: the hooks, status line and MCP server into the agent's files", cmdInstall},
		{"uninstall", "claude-code|codex|mcp [--scope user|project] [--dry-run]: take them out again, and nothing else", cmdUninstall},
		{"resume", "where the agent was (markdown; --json)", cmdResume},
		{"checkpoint", "save focus, working state, a decision, public status, commitments", cmdCheckpoint},
		{"capsule", "show | seal | validate FILE | put FILE", cmdCapsule},
		{"signal", "send a context signal: KIND [key=value ...]", cmdSignal},
		{"hook", "agent hook payload on stdin (Claude Code, Codex); always exits 0", cmdHook},
		{"statusline", "Claude Code statusline payload on stdin: forwards context usage, prints one line", cmdStatusline},
		{"mcp", "MCP server on stdio, backed by the daemon", nil},
		{"status", "the daemon's state (--json)", cmdStatus},
		{"deadletter", "list | retry | discard writes an upstream refused for good", cmdDeadLetter},
		{"fleet", "the agents a fleet (nats) upstream knows: machine, last write, context, phase (--json)", cmdFleet},
		{"snapshot", "list | show ID | diff [ID [ID2]] | restore ID [--path P]... [--all] [--dry-run]: the work snapshots, and rewinding", cmdSnapshot},
		{"recover", "an agent refused for damaged files: what was found; --accept-loss to go on", cmdRecover},
		{"delx", "register [--agent A] [--upstream NAME]: register the agent with Delx ($DELX_REGISTRATION_KEY)", nil},
		{"config", "check [FILE] | default", cmdConfig},
		{"service", "install|uninstall|start|stop|restart|status [--user] [--config FILE]", nil},
		{"version", "print the version", cmdVersion},
	}
}

// Main runs the command line and returns the exit status.
func Main(p Program, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv, DefaultPaths: config.DefaultPaths, Version: p.version(),
		CapsuleSchema: p.CapsuleSchema, handOver: p.DaemonSide}
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
		switch {
		case c.Name != args[0]:
		case c.Run != nil:
			return c.Run(ctx, e, args[1:])
		case p.DaemonSide != nil:
			return p.DaemonSide(ctx, e, c.Name, args[1:])
		default:
			fmt.Fprintf(stderr, "continuityd: %s runs in continuityd-daemon, which this program does not reach\n", c.Name)
			return ExitFailed
		}
	}
	fmt.Fprintf(stderr, "continuityd: unknown command %q\n\n", args[0])
	usage(stderr)
	return ExitUsage
}

// DaemonSideNames are the commands Program.DaemonSide runs.
func DaemonSideNames() []string {
	var names []string
	for _, c := range commands() {
		if c.Run == nil {
			names = append(names, c.Name)
		}
	}
	return names
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
	Socket, Config, Agent string
}

func (cf *ClientFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&cf.Socket, "socket", "", "the daemon's socket")
	fs.StringVar(&cf.Config, "config", "", "find the socket in this config file")
	fs.StringVar(&cf.Agent, "agent", "", "the agent (may be left out when the daemon serves one)")
}

// Client returns a client of the daemon at socketPath.
func (cf *ClientFlags) Client(e *Env) (*client.Client, error) {
	sock, err := cf.SocketPath(e)
	if err != nil {
		return nil, err
	}
	c := client.New(sock)
	c.Agent = cf.Agent
	return c, nil
}

// SocketPath resolves the socket: --socket, $CONTINUITYD_SOCKET, --config,
// default.
func (cf *ClientFlags) SocketPath(e *Env) (string, error) {
	if cf.Socket != "" {
		return cf.Socket, nil
	}
	if v := e.Getenv("CONTINUITYD_SOCKET"); v != "" {
		return v, nil
	}
	if cf.Config != "" {
		cfg, err := config.Load(cf.Config)
		if err != nil {
			return "", err
		}
		return cfg.Daemon.Socket, nil
	}
	_, sock := e.Paths()
	return sock, nil
}

// LoadConfig loads the config file, or the embedded default when there is
// none. Without a file, $CONTINUITYD_STATE_DIR and $CONTINUITYD_SOCKET move
// the default state directory and socket (tests, and trying it out without
// touching the real default places).
func LoadConfig(e *Env, path string) (*config.Config, error) {
	if path != "" {
		return config.Load(path)
	}
	cfg, err := config.Default()
	if err != nil {
		return nil, err
	}
	if v := e.Getenv("CONTINUITYD_STATE_DIR"); v != "" {
		cfg.Daemon.StateDir = v
	}
	if v := e.Getenv("CONTINUITYD_SOCKET"); v != "" {
		cfg.Daemon.Socket = v
	}
	return cfg, nil
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
