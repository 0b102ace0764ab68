package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/daemon/ops"
	"github.com/continuityd/continuityd/internal/socktest"
)

// cliArgs are, for each command line of the table, arguments that make it
// call its operation ({file}: a file holding a valid capsule).
var cliArgs = map[string][]string{
	"resume":             {"resume"},
	"checkpoint":         {"checkpoint", "--focus", "the goal"},
	"capsule show":       {"capsule", "show"},
	"capsule put":        {"capsule", "put", "{file}"},
	"capsule seal":       {"capsule", "seal"},
	"signal":             {"signal", "context", "used_fraction=0.5"},
	"deadletter list":    {"deadletter", "list"},
	"deadletter retry":   {"deadletter", "retry", "--upstream", "qday", "7"},
	"deadletter discard": {"deadletter", "discard", "--upstream", "qday", "--all"},
	"snapshot list":      {"snapshot", "list"},
	"snapshot show":      {"snapshot", "show", "abc1234"},
	"snapshot diff":      {"snapshot", "diff", "abc1234"},
	"snapshot restore":   {"snapshot", "restore", "abc1234", "--dry-run"},
	"status":             {"status"},
	"fleet":              {"fleet"},
}

// notOperations are the commands that are no door of one operation, and
// why: they run the daemon or a server, work offline, or (hook,
// statusline, recover, delx) call several operations for a purpose of
// their own, through the table like any other.
var notOperations = map[string]string{
	"run":        "runs the daemon",
	"hook":       "an agent's hook: a signal, and the resume at a session's start",
	"statusline": "the statusline: the resume, and a signal when context moved",
	"mcp":        "the MCP server on stdio: each tool is its operation's call",
	"recover":    "works on the state files, then tells the daemon",
	"delx":       "registers with Delx, then tells the daemon",
	"config":     "offline",
	"service":    "the service manager",
	"version":    "offline",
}

// Every operation's CLI command calls that operation, and every command is
// either one of the table's or a command that is no door of one operation.
func TestEveryOperationHasItsCommand(t *testing.T) {
	var seen []socktest.Request
	sock, take := socktest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	})
	file := filepath.Join(t.TempDir(), "capsule.json")
	if err := os.WriteFile(file, []byte(`{"version":"1","goal":"g"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	inTable := map[string]bool{}
	for _, o := range ops.Table() {
		for _, line := range o.CLI {
			inTable[strings.Fields(line)[0]] = true
			args, ok := cliArgs[line]
			if !ok {
				t.Errorf("%s: command %q has no arguments here: add them", o.Name, line)
				continue
			}
			args = slices.Clone(args)
			for i, a := range args {
				if a == "{file}" {
					args[i] = file
				}
			}
			var stdout, stderr bytes.Buffer
			code := Main(append(args, "--socket", sock), strings.NewReader(""), &stdout, &stderr)
			seen = take()
			pattern := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(o.Path), `\{id\}`, `[^/]+`) + "$")
			if code != exitOK || !slices.ContainsFunc(seen, func(r socktest.Request) bool {
				return r.Method == o.Method && pattern.MatchString(r.Path) && (o.When == "" || strings.Contains(r.Query, o.When))
			}) {
				t.Errorf("continuityd %s: exit %d, asked %+v, want %s%s\nstdout %s\nstderr %s", strings.Join(args, " "), code, seen, o.Pattern(), o.When, &stdout, &stderr)
			}
		}
	}
	for _, c := range commands() {
		if _, ok := notOperations[c.name]; !ok && !inTable[c.name] {
			t.Errorf("command %s is no door of an operation of the table, nor among the commands that are none", c.name)
		}
	}
}
