package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// cmdCompletion prints the completion script of a shell: the commands with
// their summaries, each command's subcommands and flags, all from the
// command table and the commands' own flag sets, so a new command or flag
// completes without anyone editing a script.
func cmdCompletion(_ context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "completion", "bash|zsh|fish")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return ExitUsage
	}
	switch {
	case len(pos) == 0:
		return Missing(e, "completion", "the shell: bash, zsh or fish")
	case len(pos) > 1:
		return TooMany(e, "completion", pos[1])
	}
	if !CompletionScript(e.Stdout, pos[0]) {
		return UnknownSub(e, "completion", pos[0])
	}
	return ExitOK
}

// CompletionShells are the shells CompletionScript writes for, in the order
// the packages install them.
var CompletionShells = []string{"bash", "zsh", "fish"}

// CompletionScript writes shell's completion script to w, and reports
// whether the shell is one it knows. The packages carry the same scripts
// (packaging/gen), so a packaged install completes without a user sourcing
// anything.
func CompletionScript(w io.Writer, shell string) bool {
	gen := map[string]func(io.Writer, []completionEntry){"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}[shell]
	if gen == nil {
		return false
	}
	gen(w, completionEntries())
	return true
}

// completionEntry is what a script completes of one command.
type completionEntry struct {
	name, summary string
	subs, flags   []string // flags without their dashes
}

// completionEntries are the table's commands with their flags: those of the
// commands this program runs asked of them (Describe), the daemon side's
// from the table.
func completionEntries() []completionEntry {
	var out []completionEntry
	for _, c := range commands() {
		flags := c.Flags
		if c.Run != nil {
			flags, _ = Describe(c.Run)
		}
		out = append(out, completionEntry{c.Name, c.Summary, c.Subs, flags})
	}
	return out
}

func (c completionEntry) dashed() string {
	words := make([]string, 0, len(c.flags)+1)
	for _, f := range c.flags {
		words = append(words, "--"+f)
	}
	return strings.Join(append(words, "--help"), " ")
}

// bashCompletion: the command, then its subcommand or flags; files
// otherwise (capsule validate FILE, config check FILE, --json FILE).
func bashCompletion(w io.Writer, cs []completionEntry) {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	fmt.Fprintf(w, `# bash completion for continuityd: source <(continuityd completion bash)
# or write it to ~/.local/share/bash-completion/completions/continuityd
_continuityd() {
    local cur=${COMP_WORDS[COMP_CWORD]} cmd= sub= i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -*) ;;
        *)
            if [[ -z $cmd ]]; then
                cmd=${COMP_WORDS[i]}
            elif [[ -z $sub ]]; then
                sub=${COMP_WORDS[i]}
            fi
            ;;
        esac
    done
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W '%s --help --version' -- "$cur"))
        return
    fi
    local subs= flags=
    case $cmd in
`, strings.Join(names, " "))
	for _, c := range cs {
		fmt.Fprintf(w, "    %s) subs='%s' flags='%s' ;;\n", c.name, strings.Join(c.subs, " "), c.dashed())
	}
	fmt.Fprint(w, `    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ -n $subs && -z $sub ]]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -o filenames -F _continuityd continuityd
`)
}

// zshCompletion: the commands with their summaries, then as bash.
func zshCompletion(w io.Writer, cs []completionEntry) {
	fmt.Fprint(w, `#compdef continuityd
# zsh completion for continuityd: save as _continuityd in a directory of
# $fpath, or source <(continuityd completion zsh) after compinit.
_continuityd() {
    local -a commands subs flags
    commands=(
`)
	for _, c := range cs {
		fmt.Fprintf(w, "        %s\n", shQuote(c.name+":"+c.summary))
	}
	fmt.Fprint(w, `    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'continuityd command' commands
        return
    fi
    case $words[2] in
`)
	for _, c := range cs {
		fmt.Fprintf(w, "    %s) subs=(%s) flags=(%s) ;;\n", c.name, strings.Join(c.subs, " "), c.dashed())
	}
	fmt.Fprint(w, `    esac
    if [[ $PREFIX == -* ]]; then
        compadd -a flags
    elif (( CURRENT == 3 && $#subs )); then
        compadd -a subs
    else
        _files
    fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _continuityd "$@"
else
    compdef _continuityd continuityd
fi
`)
}

// fishCompletion: the commands with their summaries, each command's
// subcommands and flags once its name is on the line.
func fishCompletion(w io.Writer, cs []completionEntry) {
	fmt.Fprint(w, `# fish completion for continuityd: continuityd completion fish > ~/.config/fish/completions/continuityd.fish
function __continuityd_command
    set -l words (commandline -opc)
    set -e words[1]
    for w in $words
        string match -q -- '-*' $w; and continue
        echo $w
        return 0
    end
    return 1
end
function __continuityd_using -a name
    set -l command (__continuityd_command)
    and test "$command" = $name
end
complete -c continuityd -n 'not __continuityd_command' -l help -d 'print the usage'
complete -c continuityd -n 'not __continuityd_command' -l version -d 'print the version'
`)
	for _, c := range cs {
		fmt.Fprintf(w, "complete -c continuityd -n 'not __continuityd_command' -f -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	for _, c := range cs {
		using := fishQuote("__continuityd_using " + c.name)
		if len(c.subs) > 0 {
			fmt.Fprintf(w, "complete -c continuityd -n %s -f -a %s\n", using, fishQuote(strings.Join(c.subs, " ")))
		}
		for _, f := range append(c.flags, "help") {
			fmt.Fprintf(w, "complete -c continuityd -n %s -l %s\n", using, f)
		}
	}
}

// shQuote quotes s for sh and zsh: in single quotes, each single quote as '\”.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fishQuote quotes s for fish: in single quotes, with \\ and \' escaped.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
