package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/testkit/socktest"
)

// cliArgs are, for each command line of the table, arguments that make it
// call its operation ({file}: a file holding a valid capsule).
var cliArgs = map[string][]string{
	"resume":                  {"resume"},
	"checkpoint":              {"checkpoint", "--focus", "the goal"},
	"capsule show":            {"capsule", "show"},
	"capsule put":             {"capsule", "put", "{file}"},
	"capsule seal":            {"capsule", "seal"},
	"signal":                  {"signal", "context", "used_fraction=0.5"},
	"deadletter list":         {"deadletter", "list"},
	"deadletter retry":        {"deadletter", "retry", "--upstream", "qday", "7"},
	"deadletter discard":      {"deadletter", "discard", "--upstream", "qday", "--all"},
	"snapshot list":           {"snapshot", "list"},
	"snapshot take":           {"snapshot", "take", "--message", "before the rewrite"},
	"snapshot show":           {"snapshot", "show", "abc1234"},
	"snapshot diff":           {"snapshot", "diff", "abc1234"},
	"snapshot restore":        {"snapshot", "restore", "abc1234", "--dry-run"},
	"snapshot restore --lost": {"snapshot", "restore", "--lost", "wl-0123456789ab", "--dry-run"},
	"status":                  {"status"},
	"fleet":                   {"fleet"},
	"fleet take":              {"fleet", "take", "builder", "--force"},
	"log":                     {"log"},
	"ui":                      {"ui", "--print"},
	"ui --revoke":             {"ui", "--revoke"},
	"history":                 {"history", "main.go"},
	"snapshot restore --at":   {"snapshot", "restore", "--path", "main.go", "--at", "5m", "--dry-run"},
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
	"install":    "offline: the agents' own files",
	"uninstall":  "offline: the agents' own files",
	"service":    "the service manager",
	"version":    "offline",
	"doctor":     "checks every part: the status and a hook's round trip, the files, git, the state directory",
	"socket":     "offline: where the client commands look",
	"completion": "offline",
	"man":        "offline",
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
			code := Main(Program{}, append(args, "--socket", sock), strings.NewReader(""), &stdout, &stderr)
			seen = take()
			pattern := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(o.Path), `\{id\}`, `[^/]+`) + "$")
			if code != ExitOK || !slices.ContainsFunc(seen, func(r socktest.Request) bool {
				return r.Method == o.Method && pattern.MatchString(r.Path) && (o.When == "" || strings.Contains(r.Query, o.When))
			}) {
				t.Errorf("continuityd %s: exit %d, asked %+v, want %s%s\nstdout %s\nstderr %s", strings.Join(args, " "), code, seen, o.Pattern(), o.When, &stdout, &stderr)
			}
		}
	}
	for _, c := range commands() {
		if _, ok := notOperations[c.Name]; !ok && !inTable[c.Name] {
			t.Errorf("command %s is no door of an operation of the table, nor among the commands that are none", c.Name)
		}
	}
}

// The checkpoint's field flags build the operation's request type: each
// flag its field, nothing else.
func TestCheckpointFlagsBody(t *testing.T) {
	sock, take := socktest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"seq":1,"state":{}}`)
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--focus", "f", "--next", "n", "--result-ref", "", "--waiting-for", "w",
			"--decide", "c", "--because", "b", "--passed-over", "p",
			"--status-phase", "acting", "--status-next", "sn", "--status-reason", "r",
			"--open", "t1", "--open", "t2", "--close", "id1=post:x", "--drop", "id2=no longer needed"},
			`{"focus":"f","working_state":{"next_action":"n","result_ref":"","waiting_for":"w"},
			"decide":{"chosen":"c","because":"b","passed_over":"p"},
			"public_status":{"phase":"acting","next_action":"sn","reason":"r"},
			"commitments":{"open":[{"title":"t1"},{"title":"t2"}],"close":[{"id":"id1","evidence":"post:x"}],"drop":[{"id":"id2","reason":"no longer needed"}]}}`},
		{[]string{"--stop", "told to"}, `{"stop":{"reason":"told to"}}`},
		{[]string{"--resume-residency"}, `{"resume_residency":true}`},
		{[]string{"--last-result", "ok"}, `{"working_state":{"last_result":"ok"}}`},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(Program{}, append(append([]string{"checkpoint"}, tc.args...), "--socket", sock), strings.NewReader(""), &stdout, &stderr); code != ExitOK {
			t.Fatalf("checkpoint %v: exit %d: %s", tc.args, code, &stderr)
		}
		seen := take()
		var got, want any
		if len(seen) != 1 || json.Unmarshal([]byte(seen[0].Body), &got) != nil || json.Unmarshal([]byte(tc.want), &want) != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("checkpoint %v sent %+v, want the body %s", tc.args, seen, tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Main(Program{}, []string{"checkpoint", "--close", "nothing", "--socket", sock}, strings.NewReader(""), &stdout, &stderr); code != ExitUsage || !strings.Contains(stderr.String(), "--close wants ID=VALUE") {
		t.Errorf("a malformed --close: exit %d: %s", code, &stderr)
	}
}
