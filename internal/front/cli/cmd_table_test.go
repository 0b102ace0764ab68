package cli

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/testkit/socktest"
)

// A command the table makes (log) calls its operation with the agent
// asked for, prints the answer's lines made safe for a terminal, or its
// JSON as it came with --json, and has a usage made from the operation.
func TestTableMadeCommand(t *testing.T) {
	const answer = `{"agent":"builder","entries":[{"at":"2026-12-01T10:00:00Z","trigger":"quiet\u001b[31m","snapshot":"0123456789abcdef","seq":7,` +
		`"added":2,"modified":1,"deleted":0,"who":"builder","session":"sess-0123456789abcdef","message":"msg-42"}]}`
	sock, take := socktest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	})
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main(Program{}, append(args, "--socket", sock), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := run("log", "--agent", "builder")
	seen := take()
	if code != ExitOK || len(seen) != 1 || seen[0].Path != "/v1/log" || !strings.Contains(seen[0].Query, "agent=builder") {
		t.Fatalf("log --agent builder: exit %d, asked %+v: %s", code, seen, errOut)
	}
	for _, want := range []string{"+2 ~1 -0", "builder", "seq 7", "0123456789ab", "session sess-0123456/msg-42"} {
		if !strings.Contains(out, want) {
			t.Errorf("log's line lacks %q: %q", want, out)
		}
	}
	if strings.ContainsRune(out, 0x1b) || strings.Count(out, "\n") != 1 {
		t.Errorf("log printed a raw control character, or not one line: %q", out)
	}

	if code, out, errOut := run("log", "--json"); code != ExitOK || out != answer {
		t.Errorf("log --json: exit %d, %q (%s), want the answer as it came", code, out, errOut)
	}
	if code, out, _ := run("log", "--help"); code != ExitOK || !strings.Contains(out, "continuityd log [--agent A] [--json]") {
		t.Errorf("log --help: exit %d: %q", code, out)
	}
	if code, _, errOut := run("log", "extra"); code != ExitUsage || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Errorf("log extra: exit %d: %s", code, errOut)
	}
	var usage bytes.Buffer
	Main(Program{}, []string{"--help"}, strings.NewReader(""), &usage, io.Discard)
	if !strings.Contains(usage.String(), "  log ") {
		t.Errorf("the usage lists no log command:\n%s", &usage)
	}
}
