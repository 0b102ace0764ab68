package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// cmdResume prints where the agent was: markdown, or the JSON document.
// It counts as the agent's visit (since_last_visit resets) unless --peek.
func cmdResume(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "resume", "[--agent A] [--json] [--peek]")
	var cf ClientFlags
	cf.Register(fs)
	asJSON := fs.Bool("json", false, "print the resume document as JSON")
	peek := fs.Bool("peek", false, "do not reset since_last_visit")
	if pos, err := ParseFlags(fs, args); err != nil {
		return ExitUsage
	} else if len(pos) > 0 {
		return TooMany(e, "resume", pos[0])
	}
	c, err := cf.Client(e)
	if err != nil {
		return Fail(e, err)
	}
	defer c.Close()
	q := url.Values{}
	if *peek {
		q.Set("peek", "1")
	}
	if *asJSON {
		out, err := ops.Resume.Do(ctx, c, ops.Args{Query: q})
		return printRaw(e, out, err)
	}
	r, _, err := ops.Resume.Call(ctx, c, ops.Args{Query: q})
	if err != nil {
		return Fail(e, err)
	}
	fmt.Fprint(e.Stdout, r.Markdown(0))
	return ExitOK
}

// printRaw prints an answer as the daemon sent it (--json), or the failure.
func printRaw(e *Env, out []byte, err error) int {
	if err != nil {
		return Fail(e, err)
	}
	e.Stdout.Write(out)
	return ExitOK
}

// cmdCapsule is `capsule show|seal|validate FILE|put FILE`.
func cmdCapsule(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "capsule", "show [--fleet-member AGENT_ID [--upstream NAME]] | seal | validate FILE | put FILE [--agent A]")
	var cf ClientFlags
	cf.Register(fs)
	member := fs.String("fleet-member", "", "show: the capsule of this fellow Delx fleet member (its Delx `AGENT_ID`), read through the agent's fleet")
	up := fs.String("upstream", "", "show --fleet-member: the delx upstream by `NAME` (needed when the agent is in fleets at several)")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) == 0 {
		return Missing(e, "capsule", "the action: show, seal, validate FILE or put FILE")
	}
	sub, rest := pos[0], pos[1:]
	wantArgs := map[string]int{"show": 0, "seal": 0, "validate": 1, "put": 1}
	n, ok := wantArgs[sub]
	switch {
	case !ok:
		return UnknownSub(e, "capsule", sub)
	case len(rest) < n:
		return Missing(e, "capsule "+sub, "the capsule's FILE (- for stdin)")
	case len(rest) > n:
		return TooMany(e, "capsule "+sub, rest[n])
	case sub != "show" && (*member != "" || *up != ""):
		fmt.Fprintf(e.Stderr, "continuityd capsule %s: --fleet-member and --upstream go with capsule show\n", sub)
		return ExitUsage
	case *up != "" && *member == "":
		fmt.Fprintln(e.Stderr, "continuityd capsule show: --upstream goes with --fleet-member")
		return ExitUsage
	}
	if sub == "validate" {
		// Offline: the same guard the daemon runs, no daemon needed; its
		// schema validator is continuityd-daemon's to link.
		if e.CapsuleSchema == nil {
			if e.handOver == nil {
				fmt.Fprintln(e.Stderr, "continuityd: capsule validate runs in continuityd-daemon, which this program does not reach")
				return ExitFailed
			}
			return e.handOver(ctx, e, "capsule", args)
		}
		body, err := readInput(e, rest[0])
		if err != nil {
			fmt.Fprintf(e.Stderr, "continuityd capsule validate: %v\n", err)
			return ExitUsage
		}
		sch, err := e.CapsuleSchema()
		if err != nil {
			return Fail(e, err)
		}
		g, err := guard.New(guard.Options{CapsuleSchema: sch})
		if err != nil {
			return Fail(e, err)
		}
		if _, err := g.DecodeCapsule(body); err != nil {
			fmt.Fprintf(e.Stderr, "%s: invalid: %v\n", rest[0], err)
			return ExitFailed
		}
		fmt.Fprintf(e.Stdout, "%s: a valid Continuity Capsule v1\n", rest[0])
		return ExitOK
	}
	c, err := cf.Client(e)
	if err != nil {
		return Fail(e, err)
	}
	defer c.Close()
	var ans *ops.CapsuleAnswer
	switch sub {
	case "show":
		q := url.Values{}
		if *member != "" {
			q.Set("fleet_member", *member)
			if *up != "" {
				q.Set("upstream", *up)
			}
		}
		rec, _, err := ops.CapsuleGet.Call(ctx, c, ops.Args{Query: q})
		if err != nil {
			return Fail(e, err)
		}
		if fm := rec.FleetMember; fm != nil {
			// Where it came from, for people; stdout stays the capsule.
			fmt.Fprintf(e.Stderr, "%s (fleet %s, written %s)\n", termsafe.Line(fm.Source), termsafe.Name(fm.FleetID), rec.StoredAt.Format(time.RFC3339))
		}
		out, err := json.MarshalIndent(rec.Capsule, "", "  ")
		if err != nil {
			return Fail(e, err)
		}
		e.Stdout.Write(append(out, '\n'))
		return ExitOK
	case "seal":
		ans, _, err = ops.Seal.Call(ctx, c, ops.Args{})
	case "put":
		var body []byte
		if body, err = readInput(e, rest[0]); err != nil {
			fmt.Fprintf(e.Stderr, "continuityd capsule put: %v\n", err)
			return ExitUsage
		}
		ans, _, err = ops.CapsulePut.Call(ctx, c, ops.Args{Body: body})
	}
	if err != nil {
		return Fail(e, err)
	}
	verb := map[string]string{"seal": "sealed", "put": "stored"}[sub]
	fmt.Fprintf(e.Stdout, "capsule %s (seq %d)\n", verb, ans.Seq)
	return ExitOK
}

// cmdSignal is `signal KIND [key=value ...]`: numbers and booleans are sent
// as such, everything else as strings.
func cmdSignal(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "signal", "[--agent A] KIND [key=value ...]   e.g. signal context used_fraction=0.83")
	var cf ClientFlags
	cf.Register(fs)
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) == 0 {
		return Missing(e, "signal", "the signal's KIND (context, compaction, session, …)")
	}
	body := map[string]any{"kind": pos[0]}
	for _, kv := range pos[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(e.Stderr, "continuityd signal: want key=value, got %q\n", kv)
			return ExitUsage
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			body[k] = f
		} else if b, err := strconv.ParseBool(v); err == nil {
			body[k] = b
		} else {
			body[k] = v
		}
	}
	if _, ok := body["via"]; !ok {
		body["via"] = "cli"
	}
	raw, _ := json.Marshal(body)
	c, err := cf.Client(e)
	if err != nil {
		return Fail(e, err)
	}
	defer c.Close()
	if _, _, err := ops.Signal.Call(ctx, c, ops.Args{Body: raw}); err != nil {
		return Fail(e, err)
	}
	fmt.Fprintf(e.Stdout, "signal %s recorded\n", pos[0])
	return ExitOK
}

// cmdStatus prints the daemon's state.
func cmdStatus(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "status", "[--json]")
	var cf ClientFlags
	cf.Register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if pos, err := ParseFlags(fs, args); err != nil {
		return ExitUsage
	} else if len(pos) > 0 {
		return TooMany(e, "status", pos[0])
	}
	st, code, ok := callOrPrint(ctx, e, cf, ops.Status, ops.Args{}, *asJSON)
	if !ok {
		return code
	}
	fmt.Fprintf(e.Stdout, "continuityd %s, pid %d, up %s\nsocket %s\nstate  %s\nconfig %s\n\n",
		termsafe.Line(st.Version), st.PID, (time.Duration(st.UptimeSec) * time.Second).String(), termsafe.Name(st.Socket), termsafe.Name(st.StateDir), termsafe.Name(st.Config))
	if st.UI != nil {
		fmt.Fprintf(e.Stdout, "web page %s (%s)\n\n", termsafe.Name(st.UI.URL), pageListener(st.UI.OwnListener))
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSEQ\tSTOPPED\tLAST WRITE\tUPSTREAM\tSTATE\tPENDING\tDEAD\tLAST ERROR")
	var damaged []ops.AgentStatus
	for _, a := range st.Agents {
		if a.Damaged != "" {
			damaged = append(damaged, a)
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tdamaged\t-\t-\tnot served (below)\n", termsafe.Name(a.Name))
			continue
		}
		last := "never"
		if a.LastWriteAt != nil {
			last = time.Since(*a.LastWriteAt).Round(time.Second).String() + " ago"
		}
		if len(a.Upstreams) == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%v\t%s\t-\t-\t-\t-\t-\n", termsafe.Name(a.Name), a.Seq, a.Stopped, last)
		}
		for _, u := range a.Upstreams {
			le := "-"
			if u.LastError != nil {
				le = termsafe.Line(*u.LastError)
			}
			fmt.Fprintf(tw, "%s\t%d\t%v\t%s\t%s\t%s\t%d\t%d\t%s\n", termsafe.Name(a.Name), a.Seq, a.Stopped, last, termsafe.Name(u.Name), termsafe.Name(u.State), u.Pending, u.DeadLetter, le)
		}
	}
	tw.Flush()
	printHealth(e.Stdout, st)
	printPlaces(e.Stdout, st)
	for _, a := range damaged {
		fmt.Fprintf(e.Stdout, "\nagent %s is not served: %s\n", termsafe.Name(a.Name), termsafe.Text(a.Damaged))
	}
	for _, a := range st.Agents {
		if a.SnapshotProblem != "" {
			fmt.Fprintf(e.Stdout, "\nagent %s: degraded [\"snapshots\"]: %s\n", a.Name, a.SnapshotProblem)
		}
		if a.RestoreInterrupted != nil {
			fmt.Fprintf(e.Stdout, "\nagent %s: %s", termsafe.Name(a.Name), termsafe.Text(a.RestoreInterrupted.Summary(time.Now())))
		}
	}
	return ExitOK
}

// callOrPrint calls the operation ep on the daemon. With raw set it prints
// the JSON answer as it came and the command is done (ok false, code
// ExitOK); a failure is reported and ends the command too. Otherwise ans is
// the answer for the command to render.
func callOrPrint[Req, Ans any](ctx context.Context, e *Env, cf ClientFlags, ep ops.Endpoint[Req, Ans], a ops.Args, raw bool) (ans *Ans, code int, ok bool) {
	c, err := cf.Client(e)
	if err != nil {
		return nil, Fail(e, err), false
	}
	defer c.Close()
	if raw {
		out, err := ep.Do(ctx, c, a)
		return nil, printRaw(e, out, err), false
	}
	ans, _, err = ep.Call(ctx, c, a)
	if err != nil {
		return nil, Fail(e, err), false
	}
	return ans, ExitOK, true
}
