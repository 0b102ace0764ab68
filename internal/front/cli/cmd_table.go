package cli

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// The table of operations (package ops) names the command lines that call
// each operation (Op.CLI). A line whose command the command table has
// (snapshot list, capsule show) is that command's action: the command's
// actions are the table's lines (opSubs). A line naming a command of its
// own that the command table does not have (log) is a command the table
// makes whole (opCommands): adding a read-only operation with such a line
// adds its command, its help, its completions and its --json.

// opSubs are the actions of command name that call an operation, as the
// table's command lines give them, in the table's order, then extra (the
// actions that call none, such as capsule validate).
func opSubs(name string, extra ...string) []string {
	var subs []string
	for _, o := range ops.Table() {
		for _, line := range o.CLI {
			if f := strings.Fields(line); len(f) > 1 && f[0] == name && !slices.Contains(subs, f[1]) {
				subs = append(subs, f[1])
			}
		}
	}
	return append(subs, extra...)
}

// opCommands are the commands the table makes: one per operation whose
// command line is one word that hand names no command of (its summary is
// the operation's).
func opCommands(hand []Command) []Command {
	var out []Command
	for _, o := range ops.Table() {
		for _, line := range o.CLI {
			if strings.Contains(line, " ") || slices.ContainsFunc(hand, func(c Command) bool { return c.Name == line }) {
				continue
			}
			out = append(out, Command{Name: line, Summary: o.Summary, Run: opRun(line, o)})
		}
	}
	return out
}

// liner is an answer that prints itself, one line each.
type liner interface{ Lines() []string }

// opRun runs command name, which calls o: its flags are the client's, one
// per query parameter of o (agent and cwd aside) and --json; the answer is
// printed as its lines (liner), or as its JSON when it has none or --json
// asks for it.
func opRun(name string, o ops.Op) RunFunc {
	return func(ctx context.Context, e *Env, args []string) int {
		fs := NewFlagSet(e, name, opUsage(o))
		var cf ClientFlags
		cf.Register(fs)
		asJSON := fs.Bool("json", false, "print the answer as JSON")
		set := map[string]func() (string, bool){}
		for _, p := range o.Params {
			if p.In != "query" || p.Name == "agent" || p.Name == "cwd" {
				continue
			}
			set[p.Name] = paramFlag(fs, p)
		}
		pos, err := ParseFlags(fs, args)
		if err != nil {
			return ExitUsage
		} else if len(pos) > 0 {
			return TooMany(e, name, pos[0])
		}
		q := url.Values{}
		for k, get := range set {
			if v, ok := get(); ok {
				q.Set(k, v)
			}
		}
		c, err := cf.Client(e)
		if err != nil {
			return Fail(e, err)
		}
		defer c.Close()
		return printAnswer(ctx, e, c, o, ops.Args{Query: q}, *asJSON)
	}
}

// printAnswer calls o and prints its answer: its JSON as it came, or the
// lines of its Go type's value.
func printAnswer(ctx context.Context, e *Env, c *client.Client, o ops.Op, a ops.Args, asJSON bool) int {
	out, err := o.Do(ctx, c, a)
	if _, ok := o.Answer.(liner); asJSON || !ok || err != nil {
		return printRaw(e, out, err)
	}
	v, err := o.Decode(out)
	if err != nil {
		return Fail(e, err)
	}
	for _, l := range v.(liner).Lines() {
		fmt.Fprintln(e.Stdout, termsafe.Line(l))
	}
	return ExitOK
}

// opUsage is the usage after the command's name: [--agent A] for an
// operation on one agent, each parameter's flag, [--json].
func opUsage(o ops.Op) string {
	var u []string
	if o.Agent {
		u = append(u, "[--agent A]")
	}
	for _, p := range o.Params {
		if p.In == "query" && p.Name != "agent" && p.Name != "cwd" {
			u = append(u, "[--"+flagName(p.Name)+"]")
		}
	}
	return strings.Join(append(u, "[--json]"), " ")
}

// flagName is a parameter's flag: max_bytes is --max-bytes.
func flagName(param string) string { return strings.ReplaceAll(param, "_", "-") }

// paramFlag registers p's flag on fs and returns what to send for it:
// its value, and whether it was given.
func paramFlag(fs *flag.FlagSet, p ops.Param) func() (string, bool) {
	name := flagName(p.Name)
	switch p.Type {
	case "boolean":
		v := fs.Bool(name, false, p.Summary)
		return func() (string, bool) { return strconv.FormatBool(*v), *v }
	case "integer":
		v := fs.Int64(name, 0, p.Summary)
		return func() (string, bool) { return strconv.FormatInt(*v, 10), isSet(fs, name) }
	default:
		v := fs.String(name, "", p.Summary)
		return func() (string, bool) { return *v, isSet(fs, name) }
	}
}

// isSet reports whether the flag name was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
