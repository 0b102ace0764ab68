package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/internal/suggest"
)

// flagOutput is a flag set's output and what its usage needs. The flag
// package's own messages (Go's "flag provided but not defined: -x" and
// its -x string lines) are dropped: ParseFlags says what went wrong in a
// sentence, and usage lists the flags the GNU way (--agent NAME).
type flagOutput struct {
	e          *Env
	name, args string // the command, and its usage after the name
}

func (o *flagOutput) Write(p []byte) (int, error) { return len(p), nil }

// errDescribed ends a command run only to list its flags (Describe).
var errDescribed = errors.New("described")

// NewFlagSet returns the flag set of command name, whose usage after the
// name is args (alternatives separated by " | "). It does not exit, and
// prints nothing of its own: ParseFlags reports a mistake, and prints
// the usage to stdout for --help; fs.Usage() prints it to stderr, for a
// command that finds its arguments wrong (once --help printed it, not
// again).
func NewFlagSet(e *Env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o := &flagOutput{e: e, name: name, args: args}
	fs.SetOutput(o)
	fs.Usage = func() {
		if !e.helped() {
			o.usage(e.Stderr, fs, nil)
		}
	}
	return fs
}

// ParseFlags parses flags that may come before or after positional arguments,
// and returns the positional ones (those after "--" too).
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, after, err := ParseFlagsSplit(fs, args)
	return append(pos, after...), err
}

// ParseFlagsSplit is ParseFlags for a command that tells the arguments
// after "--" (paths, say) from those before it. -h and --help print the
// usage on stdout and return flag.ErrHelp, which the command answers
// like any error of its arguments: Main exits 0 after a help. Any other
// mistake is said on stderr in one line, with the flag the user may have
// meant.
func ParseFlagsSplit(fs *flag.FlagSet, args []string) (pos, after []string, err error) {
	o, _ := fs.Output().(*flagOutput)
	if o != nil && o.e.describe != nil {
		o.e.describe(fs, o.args)
		return nil, nil, errDescribed
	}
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	for {
		err := fs.Parse(args)
		if err != nil {
			if o != nil {
				o.failed(fs, pos, err)
			}
			return nil, nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return pos, rest, nil
		}
		if rest[0] == "--" { // flag stops at a "--" it reaches as a flag
			return pos, rest[1:], nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// failed reports a parse error: the usage, on stdout, for a help; else the
// mistake in one line.
func (o *flagOutput) failed(fs *flag.FlagSet, pos []string, err error) {
	if errors.Is(err, flag.ErrHelp) {
		o.e.noteHelp()
		o.usage(o.e.Stdout, fs, pos)
		return
	}
	cmd := "continuityd " + o.name
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag provided but not defined: "), "-")
		var known []string
		fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
		msg = "unknown flag --" + name
		if best, ok := suggest.Closest(name, known); ok {
			msg += "; did you mean --" + best + "?"
		}
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-")
		msg = "--" + name + " needs a value"
		if f := fs.Lookup(name); f != nil {
			msg = flagSyntax(f) + ": the value is missing"
		}
	default:
		// invalid value "x" for flag -n: parse error
		msg = strings.Replace(msg, "for flag -", "for --", 1)
	}
	fmt.Fprintf(o.e.Stderr, "%s: %s (%s --help lists its flags)\n", cmd, msg, cmd)
}

// usage prints the command's usage: its forms (only those of the
// subcommand pos names, when it names one), its summary from the command
// table, and its flags.
func (o *flagOutput) usage(w io.Writer, fs *flag.FlagSet, pos []string) {
	forms := splitForms(o.args)
	if len(pos) > 0 {
		var of []string
		for _, f := range forms {
			first, _, _ := strings.Cut(f, " ")
			if slices.Contains(strings.Split(first, "|"), pos[0]) {
				of = append(of, f)
			}
		}
		if len(of) > 0 {
			forms = of
		}
	}
	for i, f := range forms {
		lead := "usage:"
		if i > 0 {
			lead = "      "
		}
		fmt.Fprintf(w, "%s continuityd %s %s\n", lead, o.name, f)
	}
	if c, ok := lookup(o.name); ok && c.about() != "" {
		fmt.Fprintf(w, "\n%s\n", c.about())
	}
	fmt.Fprintln(w, "\nflags:")
	type row struct{ syntax, text string }
	var rows []row
	width := len("-h, --help")
	fs.VisitAll(func(f *flag.Flag) {
		_, text := flag.UnquoteUsage(f)
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "[]" {
			text += " (default " + d + ")"
		}
		rows = append(rows, row{flagSyntax(f), text})
		width = max(width, len(rows[len(rows)-1].syntax))
	})
	rows = append(rows, row{"-h, --help", "print this help"})
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.syntax, r.text)
	}
}

// flagSyntax is how a flag is written: --json, --agent NAME. The value's
// name is the usage's `back-quoted` word, else TEXT for a text field of
// checkpoint's, else the flag's name in capitals.
func flagSyntax(f *flag.Flag) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return "--" + f.Name
	}
	name, _ := flag.UnquoteUsage(f)
	if _, text := f.Value.(*optString); text && !strings.Contains(f.Usage, "`") {
		name = "TEXT"
	} else if !strings.Contains(f.Usage, "`") {
		name = strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
	}
	return "--" + f.Name + " " + name
}

// splitForms splits a usage into its alternatives: at each " | " outside
// brackets and parentheses ("retry|discard (SEQ | --all)" is one).
func splitForms(args string) []string {
	var forms []string
	depth, start := 0, 0
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '|':
			if depth == 0 && i > 0 && args[i-1] == ' ' && i+1 < len(args) && args[i+1] == ' ' {
				forms = append(forms, strings.TrimSpace(args[start:i]))
				start = i + 1
			}
		}
	}
	return append(forms, strings.TrimSpace(args[start:]))
}

// Describe lists the flags of a command run (RunFunc) without running it:
// the command stops at its ParseFlags. The commands parse their flags
// before they do anything, which the completion scripts rely on.
func Describe(run RunFunc) (flags []string, args string) {
	e := &Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	e.describe = func(fs *flag.FlagSet, a string) {
		fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
		args = a
	}
	run(context.Background(), e, nil)
	return flags, args
}

// about is what the command does, for its usage: the summary without the
// forms it may start with ("list | show ID: the work snapshots"), which
// the usage lists already.
func (c Command) about() string {
	if before, after, ok := strings.Cut(c.Summary, ": "); ok && strings.ContainsAny(before, "|[") {
		return after
	}
	if strings.Contains(c.Summary, "|") {
		return ""
	}
	return c.Summary
}

// UnknownSub says that sub is not one of command's subcommands (the
// table's), with the one the user may have meant, and returns ExitUsage.
func UnknownSub(e *Env, command, sub string) int {
	c, _ := lookup(command)
	what := c.SubsAre
	if what == "" {
		what = "action"
	}
	msg := fmt.Sprintf("continuityd %s: unknown %s %q", command, what, sub)
	if best, ok := suggest.Closest(sub, c.Subs); ok {
		msg += "; did you mean " + best + "?"
	} else if len(c.Subs) > 0 {
		msg += "; it takes " + strings.Join(c.Subs, ", ")
	}
	fmt.Fprintln(e.Stderr, msg)
	return ExitUsage
}

// Missing says what argument command needs and was not given (what, such
// as "the snapshot ID (continuityd snapshot list lists them)"), and
// returns ExitUsage.
func Missing(e *Env, command, what string) int {
	fmt.Fprintf(e.Stderr, "continuityd %s: missing %s; see continuityd %s --help\n", command, what, strings.Fields(command)[0])
	return ExitUsage
}

// TooMany says that command takes no more arguments than it was given
// before extra, and returns ExitUsage.
func TooMany(e *Env, command, extra string) int {
	fmt.Fprintf(e.Stderr, "continuityd %s: unexpected argument %q; see continuityd %s --help\n", command, extra, strings.Fields(command)[0])
	return ExitUsage
}
