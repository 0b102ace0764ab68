package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// The states of a check.
const (
	checkOK   = "ok"
	checkWarn = "warn" // works, but something is worth knowing or fixing
	checkFail = "fail" // broken: doctor exits 1
	checkSkip = "skip" // could not be checked (the daemon is down)
)

// check is one line of doctor's answer.
type check struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Detail string `json:"detail"`
	// Fix is the command that fixes it, when there is one.
	Fix string `json:"fix,omitempty"`
}

// doctorAnswer is doctor's answer, as --json prints it.
type doctorAnswer struct {
	OK     bool    `json:"ok"`
	Checks []check `json:"checks"`
}

// cmdDoctor checks every part continuityd needs, from here: the binaries
// on PATH, the daemon and its socket, the place this directory is in, the
// hooks each agent has installed and whether their commands run, a hook's
// round trip, transcripts, git, the state directory and its free space,
// inotify's limits, the upstreams' health. Each line says ok or not and
// the command that fixes it; it exits 1 when something is broken. It
// changes nothing, and runs no hook that would tell the daemon anything.
func cmdDoctor(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "doctor", "[--json] [--socket PATH | --config FILE] [--agent NAME]")
	var cf ClientFlags
	cf.Register(fs)
	asJSON := fs.Bool("json", false, "the checks as JSON: {\"ok\": …, \"checks\": [{\"name\", \"state\", \"detail\", \"fix\"}]}")
	if pos, err := ParseFlags(fs, args); err != nil {
		return ExitUsage
	} else if len(pos) > 0 {
		return TooMany(e, "doctor", pos[0])
	}
	d := &doctor{e: e, cf: cf}
	d.run(ctx)
	ans := doctorAnswer{OK: true, Checks: d.checks}
	for _, c := range d.checks {
		if c.State == checkFail {
			ans.OK = false
		}
	}
	if *asJSON {
		out, _ := json.MarshalIndent(ans, "", "  ")
		e.Stdout.Write(append(out, '\n'))
	} else {
		printChecks(e.Stdout, ans)
	}
	if !ans.OK {
		return ExitFailed
	}
	return ExitOK
}

// printChecks prints one line a check, its fix below it.
func printChecks(w io.Writer, ans doctorAnswer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var broken []string
	for _, c := range ans.Checks {
		state := c.State
		if state == checkFail {
			state = "FAIL"
			broken = append(broken, c.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", state, c.Name, termsafe.Line(c.Detail))
		if c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", termsafe.Line(c.Fix))
		}
	}
	tw.Flush()
	if len(broken) == 0 {
		fmt.Fprintln(w, "\nnothing is broken")
		return
	}
	fmt.Fprintf(w, "\nbroken: %s\n", strings.Join(broken, ", "))
}

// doctor gathers the checks.
type doctor struct {
	e      *Env
	cf     ClientFlags
	checks []check
	// status is the daemon's answer, nil when it could not be reached;
	// peerUID is who answered.
	status  *ops.StatusAnswer
	peerUID uint32
	cwd     string
}

func (d *doctor) add(name, state, detail, fix string) {
	d.checks = append(d.checks, check{Name: name, State: state, Detail: detail, Fix: fix})
}

func (d *doctor) run(ctx context.Context) {
	d.cwd, _ = os.Getwd()
	d.binaries()
	d.daemon(ctx)
	d.place()
	d.hooks()
	d.roundTrip(ctx)
	d.components()
	d.git(ctx)
	d.stateDir()
	d.inotify()
	d.upstreams()
}
