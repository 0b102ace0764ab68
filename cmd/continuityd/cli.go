package main

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
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2 // bad usage or bad config
	exitUnreachable = 3 // the daemon could not be reached
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise
// the module version from the build info is used.
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// env is what a command may touch of the process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// defaultPaths is config.DefaultPaths; tests give another user's.
	defaultPaths func() (stateDir, socket string)
}

// paths is where state and socket are when nothing names them.
func (e *env) paths() (stateDir, socket string) {
	if e.defaultPaths != nil {
		return e.defaultPaths()
	}
	return config.DefaultPaths()
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) int
}

func commands() []command {
	return []command{
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
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, defaultPaths: config.DefaultPaths}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(stderr, "continuityd: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: continuityd COMMAND [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nclient commands find the daemon by --socket, $CONTINUITYD_SOCKET, the socket in --config FILE, or the default socket.")
	fmt.Fprintln(w, "exit status: 0 done, 1 failed, 2 bad usage or config, 3 daemon unreachable.")
}

// clientFlags are the flags every client command takes.
type clientFlags struct {
	socket, config, agent string
}

func (cf *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&cf.socket, "socket", "", "the daemon's socket")
	fs.StringVar(&cf.config, "config", "", "find the socket in this config file")
	fs.StringVar(&cf.agent, "agent", "", "the agent (may be left out when the daemon serves one)")
}

// client returns a client of the daemon at socketPath.
func (cf *clientFlags) client(e *env) (*client.Client, error) {
	sock, err := cf.socketPath(e)
	if err != nil {
		return nil, err
	}
	c := client.New(sock)
	c.Agent = cf.agent
	return c, nil
}

// socketPath resolves the socket: --socket, $CONTINUITYD_SOCKET, --config,
// default.
func (cf *clientFlags) socketPath(e *env) (string, error) {
	if cf.socket != "" {
		return cf.socket, nil
	}
	if v := e.getenv("CONTINUITYD_SOCKET"); v != "" {
		return v, nil
	}
	if cf.config != "" {
		cfg, err := config.Load(cf.config)
		if err != nil {
			return "", err
		}
		return cfg.Daemon.Socket, nil
	}
	_, sock := e.paths()
	return sock, nil
}

// newFlagSet returns a flag set that reports to stderr and does not exit.
func newFlagSet(e *env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: continuityd %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags that may come before or after positional arguments,
// and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
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

// fail reports an error and maps it to an exit status. Messages carry
// names and text from elsewhere (the daemon, a workdir, a config file), so
// they go through termsafe.
func fail(e *env, err error) int {
	var ae *client.APIError
	switch {
	case errors.As(err, &ae):
		if ae.Field != "" {
			fmt.Fprintf(e.stderr, "continuityd: %s (%s): %s\n", termsafe.Line(ae.Code), termsafe.Line(ae.Field), termsafe.Text(ae.Message))
		} else {
			fmt.Fprintf(e.stderr, "continuityd: %s: %s\n", termsafe.Line(ae.Code), termsafe.Text(ae.Message))
		}
		return exitFailed
	case errors.Is(err, client.ErrNoAnswer):
		fmt.Fprintf(e.stderr, "continuityd: %s\n(if the daemon stays stuck, its log may say why; restarting it loses nothing accepted)\n", termsafe.Text(err.Error()))
		return exitUnreachable
	case errors.Is(err, client.ErrUnreachable):
		fmt.Fprintf(e.stderr, "continuityd: %s\n(is the daemon running? start it with `continuityd run`)\n", termsafe.Text(err.Error()))
		return exitUnreachable
	default:
		var cerr config.Errors
		var one *config.Error
		if errors.As(err, &cerr) || errors.As(err, &one) {
			fmt.Fprintf(e.stderr, "continuityd: %s\n", termsafe.Text(err.Error()))
			return exitUsage
		}
		fmt.Fprintf(e.stderr, "continuityd: %s\n", termsafe.Text(strings.TrimSpace(err.Error())))
		return exitFailed
	}
}

func cmdVersion(_ context.Context, e *env, args []string) int {
	fmt.Fprintln(e.stdout, "continuityd", buildVersion())
	return exitOK
}
