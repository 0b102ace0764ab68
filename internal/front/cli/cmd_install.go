package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/front/agentconf"
	"github.com/continuityd/continuityd/internal/front/agentfiles"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// cmdInstall is `install claude-code|codex|mcp [--scope user|project]
// [--dry-run]`: continuityd's hooks, status line and MCP server merged
// into the agent's own files, everything else in them kept.
func cmdInstall(_ context.Context, e *Env, args []string) int {
	return installCommand(e, "install", args)
}

// cmdUninstall takes out what install put in, and nothing else.
func cmdUninstall(_ context.Context, e *Env, args []string) int {
	return installCommand(e, "uninstall", args)
}

// agentName is how an agent is called in what the commands print.
func agentName(agent string) string {
	switch agent {
	case "claude-code":
		return "Claude Code"
	case "codex":
		return "Codex"
	}
	return "the MCP clients"
}

func installCommand(e *Env, verb string, args []string) int {
	fs := NewFlagSet(e, verb, strings.Join(agentfiles.Agents, "|")+" [--scope user|project] [--dry-run]")
	scope := fs.String("scope", "user", "`user|project`: your own settings, or the current directory's, to commit with it")
	dry := fs.Bool("dry-run", false, "print what would change, as a diff, and write nothing")
	pos, err := ParseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		return ExitUsage
	}
	switch {
	case len(pos) == 0:
		return Missing(e, verb, "the agent: "+strings.Join(agentfiles.Agents, ", "))
	case len(pos) > 1:
		return TooMany(e, verb, pos[1])
	case !slices.Contains(agentfiles.Agents, pos[0]):
		return UnknownSub(e, verb, pos[0])
	}
	agent, install := pos[0], verb == "install"
	home := e.Getenv("HOME")
	if home == "" {
		if home, err = os.UserHomeDir(); err != nil {
			return Fail(e, fmt.Errorf("no home directory to find the agents' settings in: %w", err))
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return Fail(e, err)
	}
	targets, err := agentfiles.Targets(agent, *scope, agentfiles.Env{Home: home, Dir: dir, Getenv: e.Getenv})
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd: %s\n", termsafe.Line(err.Error()))
		return ExitUsage
	}
	changes, err := agentfiles.Plan(targets, install)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd: %s\n", termsafe.Line(shown(home, err.Error())))
		return ExitFailed
	}
	where := fmt.Sprintf("%s (%s scope)", agentName(agent), *scope)
	if *dry {
		for _, c := range changes {
			if d := c.Diff(shown(home, c.Path)); d != "" {
				fmt.Fprint(e.Stdout, termsafe.Text(d))
			} else {
				fmt.Fprintf(e.Stdout, "%s: nothing to change\n", termsafe.Name(shown(home, c.Path)))
			}
			printNotes(e, c)
		}
		return ExitOK
	}
	changed := 0
	for _, c := range changes {
		if c.Changed() {
			changed++
		}
	}
	switch {
	case changed == 0 && install:
		fmt.Fprintf(e.Stdout, "continuityd is installed for %s already: nothing changed\n", where)
	case changed == 0:
		fmt.Fprintf(e.Stdout, "nothing of continuityd's to take out for %s\n", where)
	case install:
		fmt.Fprintf(e.Stdout, "continuityd installed for %s:\n", where)
	default:
		fmt.Fprintf(e.Stdout, "continuityd taken out for %s:\n", where)
	}
	now := time.Now()
	for i, c := range changes {
		if c.Changed() {
			backup, err := c.Apply(now)
			if err != nil {
				var done []string
				for _, d := range changes[:i] {
					if d.Changed() {
						done = append(done, shown(home, d.Path))
					}
				}
				if len(done) > 0 {
					err = fmt.Errorf("%w (already changed: %s)", err, strings.Join(done, ", "))
				}
				return Fail(e, errors.New(shown(home, err.Error())))
			}
			what := strings.Join(c.Result.Changes, "; ")
			if c.Remove {
				what = "removed: it held nothing but continuityd's"
			} else if install && what != "" {
				what = "added " + what
			} else if what != "" {
				what = "took out " + what
			}
			fmt.Fprintf(e.Stdout, "  %s: %s\n", termsafe.Name(shown(home, c.Path)), termsafe.Line(what))
			if backup != "" {
				fmt.Fprintf(e.Stdout, "    the file as it was: %s\n", termsafe.Name(shown(home, backup)))
			}
		}
		printNotes(e, c)
	}
	if install && changed > 0 {
		for _, s := range nextSteps(agent, *scope) {
			fmt.Fprintln(e.Stdout, s)
		}
		if _, err := exec.LookPath(agentconf.Binary); err != nil {
			fmt.Fprintf(e.Stdout, "note: %s is not on PATH, and the agents run it by name: put its directory on PATH (for `go install`, $(go env GOPATH)/bin)\n", agentconf.Binary)
		}
	}
	return ExitOK
}

func printNotes(e *Env, c agentfiles.Change) {
	for _, n := range c.Result.Notes {
		fmt.Fprintf(e.Stdout, "  note (%s): %s\n", termsafe.Line(filepath.Base(c.Path)), termsafe.Line(n))
	}
}

// nextSteps is what the user does for the agent to take the change up.
func nextSteps(agent, scope string) []string {
	var s []string
	switch agent {
	case "claude-code":
		s = append(s, "Claude Code takes them up in its next session.")
	case "codex":
		s = append(s, "Codex runs a new hook once you trust it: open /hooks in Codex and trust continuityd's.")
		if scope == "project" {
			s = append(s, "Codex reads a project's .codex/ only once the project is trusted.")
		}
	}
	if agent != "codex" && scope == "project" {
		s = append(s, "Claude Code asks once before it starts a server from a project's .mcp.json.")
	}
	return s
}

// shown writes the home directory in text as ~.
func shown(home, text string) string {
	if home == "" || home == "/" {
		return text
	}
	return strings.ReplaceAll(text, strings.TrimSuffix(home, "/")+"/", "~/")
}
