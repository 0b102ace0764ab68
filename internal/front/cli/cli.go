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
	"slices"
	"strings"
	"syscall"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/suggest"
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
	// describe, when set, is given each flag set instead of parsing
	// arguments with it (Describe).
	describe func(fs *flag.FlagSet, args string)
	// help is set once a usage was printed for -h or --help: Main exits
	// 0. A pointer, so that a copy of the Env (a service manager's run)
	// shares it.
	help *bool
}

// noteHelp records that the usage was asked for, and printed.
func (e *Env) noteHelp() {
	if e.help == nil {
		e.help = new(bool)
	}
	*e.help = true
}

// helped reports whether a usage was printed for -h or --help.
func (e *Env) helped() bool { return e.help != nil && *e.help }

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
	// Subs are the words its first argument is one of (snapshot's
	// actions, install's agents): "did you mean", the help test and the
	// completion scripts take them from here.
	Subs []string
	// SubsAre says what Subs are in messages ("agent", "shell"); "" is
	// "action".
	SubsAre string
	// Flags are a daemon-side command's flags, for the completion scripts:
	// the front does not link those commands to ask them (Describe asks
	// the others); daemoncmd's tests hold these to the commands' own.
	Flags []string
}

// commands is the command table: the dispatch, the usage text and the
// completion scripts.
func commands() []Command {
	agents := []string{"claude-code", "codex", "mcp"}
	hand := []Command{
		{Name: "run", Summary: "run the daemon in the foreground", Flags: []string{"config", "workdir"}},
		{Name: "install", Summary: "claude-code|codex|mcp [--scope user|project] [--dry-run]: the hooks, status line and MCP server into the agent's files", Run: cmdInstall, Subs: agents, SubsAre: "agent"},
		{Name: "uninstall", Summary: "claude-code|codex|mcp [--scope user|project] [--dry-run]: take them out again, and nothing else", Run: cmdUninstall, Subs: agents, SubsAre: "agent"},
		{Name: "doctor", Summary: "check every part (binaries, daemon, hooks, git, state directory, upstreams), each with the command that fixes it (--json)", Run: cmdDoctor},
		{Name: "ui", Summary: "the local web page: a one-time loopback URL, opened in the browser (--print only prints it; --revoke ends the sessions)", Run: cmdUI},
		{Name: "resume", Summary: "where the agent was (markdown; --json)", Run: cmdResume},
		{Name: "checkpoint", Summary: "save focus, working state, a decision, public status, commitments", Run: cmdCheckpoint},
		{Name: "capsule", Summary: "show | seal | validate FILE | put FILE", Run: cmdCapsule, Subs: opSubs("capsule", "validate")},
		{Name: "signal", Summary: "send a context signal: KIND [key=value ...]", Run: cmdSignal},
		{Name: "hook", Summary: "agent hook payload on stdin (Claude Code, Codex); always exits 0", Run: cmdHook},
		{Name: "statusline", Summary: "Claude Code statusline payload on stdin: forwards context usage, prints one line", Run: cmdStatusline},
		{Name: "mcp", Summary: "MCP server on stdio, backed by the daemon", Flags: []string{"socket", "config", "agent"}},
		{Name: "status", Summary: "the daemon's state (--json)", Run: cmdStatus},
		{Name: "deadletter", Summary: "list | retry | discard writes an upstream refused for good", Run: cmdDeadLetter, Subs: opSubs("deadletter")},
		{Name: "history", Summary: "PATH: a file's versions from the version journal: time, size, lines, who, turn, snapshot (--json)", Run: cmdHistory},
		{Name: "fleet", Summary: "the agents a fleet (nats) upstream knows: machine, last write, context, phase (--json); fleet take AGENT [--force]: this machine writes the agent now", Run: cmdFleet},
		{Name: "snapshot", Summary: "list | show ID | diff [ID [ID2]] [--stat] [-- PATH...] | restore ID [--path P]... [--all] [--dry-run]: the work snapshots, and rewinding", Run: cmdSnapshot, Subs: opSubs("snapshot")},
		{Name: "recover", Summary: "an agent refused for damaged files: what was found; --accept-loss to go on", Flags: []string{"socket", "config", "agent", "accept-loss"}},
		{Name: "delx", Summary: "register [--agent A] [--upstream NAME]: register the agent with Delx ($DELX_REGISTRATION_KEY)", Subs: []string{"register"},
			Flags: []string{"socket", "config", "agent", "upstream", "agent-id", "key-file", "force"}},
		{Name: "config", Summary: "check [FILE] | default", Run: cmdConfig, Subs: []string{"check", "default"}},
		{Name: "service", Summary: "install|uninstall|start|stop|restart|status [--user] [--config FILE]", Subs: []string{"install", "uninstall", "start", "stop", "restart", "status"},
			Flags: []string{"user", "config", "print"}},
		{Name: "socket", Summary: "print the socket the client commands use: S=$(continuityd socket)", Run: cmdSocket},
		{Name: "completion", Summary: "bash|zsh|fish: the shell's completion script", Run: cmdCompletion, Subs: []string{"bash", "zsh", "fish"}, SubsAre: "shell"},
		{Name: "man", Summary: "print the man page, continuityd(1), in roff: continuityd man | man -l -"},
		{Name: "version", Summary: "print the version (also --version)", Run: cmdVersion},
	}
	// The commands the table of operations makes follow doctor, as in
	// the interface's list.
	i := slices.IndexFunc(hand, func(c Command) bool { return c.Name == "doctor" }) + 1
	return slices.Insert(hand, i, opCommands(hand)...)
}

// Commands is the command table, for the tests that go through every
// command.
func Commands() []Command { return commands() }

// lookup is the table's command name.
func lookup(name string) (Command, bool) {
	for _, c := range commands() {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// Main runs the command line and returns the exit status.
func Main(p Program, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv, DefaultPaths: config.DefaultPaths, Version: p.version(),
		CapsuleSchema: p.CapsuleSchema, handOver: p.DaemonSide}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "continuityd: which command?")
		fmt.Fprintln(stderr)
		usage(stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) == 1 || args[0] != "help" {
			usage(stdout)
			return ExitOK
		}
		args = []string{args[1], "--help"} // help COMMAND
	case "--version", "-V":
		args[0] = "version"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, ok := lookup(args[0])
	if !ok {
		return unknownCommand(e, args[0])
	}
	var code int
	switch {
	case c.Run != nil:
		code = c.Run(ctx, e, args[1:])
	case p.DaemonSide != nil:
		code = p.DaemonSide(ctx, e, c.Name, args[1:])
	default:
		fmt.Fprintf(stderr, "continuityd: %s runs in continuityd-daemon, which this program does not reach\n", c.Name)
		return ExitFailed
	}
	if e.helped() {
		return ExitOK // the usage was asked for, and printed
	}
	return code
}

// unknownCommand says that name is no command, and which one the user may
// have meant.
func unknownCommand(e *Env, name string) int {
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(e.Stderr, "continuityd: unknown flag %s: a command's flags come after its name (continuityd --help lists the commands)\n", name)
		return ExitUsage
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.Name)
	}
	msg := fmt.Sprintf("continuityd: unknown command %q", name)
	if best, ok := suggest.Closest(name, names); ok {
		msg += "; did you mean " + best + "?"
	}
	fmt.Fprintf(e.Stderr, "%s (continuityd --help lists the commands)\n", msg)
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
	fmt.Fprintln(w, "\ncontinuityd COMMAND --help prints a command's usage and flags.")
	fmt.Fprintln(w, "client commands find the daemon by --socket, $CONTINUITYD_SOCKET, the socket in --config FILE (else in the config file run reads), or the default socket (continuityd socket prints it).")
	fmt.Fprintln(w, "exit status: 0 done, 1 failed, 2 bad usage or config, 3 daemon unreachable.")
}

// ClientFlags are the flags every client command takes.
type ClientFlags struct {
	Socket, Config, Agent string
}

func (cf *ClientFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&cf.Socket, "socket", "", "the daemon's socket at `PATH`")
	fs.StringVar(&cf.Config, "config", "", "find the socket in this config `FILE`")
	fs.StringVar(&cf.Agent, "agent", "", "the agent by `NAME` (may be left out when the daemon serves one, or in its place)")
}

// Client returns a client of the daemon at socketPath.
func (cf *ClientFlags) Client(e *Env) (*client.Client, error) {
	sock, err := cf.SocketPath(e)
	if err != nil {
		return nil, err
	}
	c := client.New(sock)
	c.Agent = cf.Agent
	if cf.Agent == "" {
		// The daemon acts on the place the current directory lies in.
		c.Cwd, _ = os.Getwd()
	}
	return c, nil
}

// SocketPath resolves the socket: --socket, $CONTINUITYD_SOCKET, --config,
// the config file `run` reads when it exists (UserConfigFile), default.
func (cf *ClientFlags) SocketPath(e *Env) (string, error) {
	if cf.Socket != "" {
		return cf.Socket, nil
	}
	if v := e.Getenv("CONTINUITYD_SOCKET"); v != "" {
		return v, nil
	}
	file := cf.Config
	if file == "" && e.DefaultPaths == nil {
		file = UserConfigFile(e) // the daemon `run` starts reads it too
	}
	if file != "" {
		cfg, err := config.Load(file)
		if err != nil {
			return "", err
		}
		return cfg.Daemon.Socket, nil
	}
	_, sock := e.Paths()
	return sock, nil
}

// LoadConfig loads the config file: path, else the file `run` reads when
// it exists (UserConfigFile), else the embedded default. Only for the
// embedded default, $CONTINUITYD_STATE_DIR and $CONTINUITYD_SOCKET move
// the default state directory and socket (tests, and trying it out without
// touching the real default places).
func LoadConfig(e *Env, path string) (*config.Config, error) {
	if path == "" {
		path = UserConfigFile(e)
	}
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

// UserConfigFile is the config file `run` reads without --config, when it
// exists: $XDG_CONFIG_HOME/continuityd/continuityd.toml (root:
// /etc/continuityd/continuityd.toml); "" when there is none.
func UserConfigFile(e *Env) string {
	p := config.UserFileFor(e.Getenv, os.Geteuid())
	if p == "" {
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// Fail reports an error and maps it to an exit status. Messages carry
// names and text from elsewhere (the daemon, a workdir, a config file), so
// they go through termsafe.
func Fail(e *Env, err error) int {
	var ae *client.APIError
	var ue *client.UnreachableError
	switch {
	case errors.As(err, &ae):
		msg, field := ae.Message, ae.Field
		if ae.Code == capsule.CodeAgentRequired || ae.Code == capsule.CodeUnknownAgent {
			// The daemon names the API's way to pick one; here it is a flag.
			msg, field = strings.ReplaceAll(msg, "with ?agent=", "with --agent NAME"), ""
		}
		if field != "" {
			fmt.Fprintf(e.Stderr, "continuityd: %s (%s): %s\n", termsafe.Line(ae.Code), termsafe.Line(field), termsafe.Text(msg))
		} else {
			fmt.Fprintf(e.Stderr, "continuityd: %s: %s\n", termsafe.Line(ae.Code), termsafe.Text(msg))
		}
		return ExitFailed
	case errors.As(err, &ue) && ue.NoAnswer:
		fmt.Fprintf(e.Stderr, "continuityd: the daemon at %s took the connection but gave no answer within %s (a stuck daemon, or something else listening there); if it stays stuck, its log may say why, and restarting it loses nothing accepted\n",
			termsafe.Name(ue.Socket), ue.Within)
		return ExitUnreachable
	case errors.As(err, &ue):
		fmt.Fprintf(e.Stderr, "continuityd: the daemon is not reachable at %s: %s; start it with `continuityd run` in your project (or `continuityd service start --user` for an installed service), or name its socket with --socket\n",
			termsafe.Name(ue.Socket), termsafe.Line(ue.Reason))
		return ExitUnreachable
	case errors.Is(err, client.ErrUnreachable):
		fmt.Fprintf(e.Stderr, "continuityd: %s; start the daemon with `continuityd run`\n", termsafe.Line(err.Error()))
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
	fs := NewFlagSet(e, "version", "")
	if pos, err := ParseFlags(fs, args); err != nil {
		return ExitUsage
	} else if len(pos) > 0 {
		return TooMany(e, "version", pos[0])
	}
	fmt.Fprintln(e.Stdout, "continuityd", e.Version)
	return ExitOK
}
