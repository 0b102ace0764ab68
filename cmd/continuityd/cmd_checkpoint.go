package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// optString is a string flag that knows whether it was given.
type optString struct {
	set bool
	v   string
}

func (o *optString) String() string     { return o.v }
func (o *optString) Set(v string) error { o.set, o.v = true, v; return nil }

// cmdCheckpoint builds a checkpoint body from flags (or takes one whole from
// --json FILE|-) and posts it. The daemon checks it; the CLI only shapes it.
func cmdCheckpoint(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "checkpoint", "[--agent A] [flags | --json FILE|-] [--sync]")
	var cf clientFlags
	cf.register(fs)
	var focus, next, lastResult, resultRef, waitingFor, chosen, because, passedOver optString
	var phase, statusNext, statusReason, stop optString
	var open, closeOps, drop listFlag
	fs.Var(&focus, "focus", "what the agent is working on")
	fs.Var(&next, "next", "working_state.next_action")
	fs.Var(&lastResult, "last-result", "working_state.last_result")
	fs.Var(&resultRef, "result-ref", "working_state.result_ref (\"\" stays a string; use --json for null)")
	fs.Var(&waitingFor, "waiting-for", "working_state.waiting_for")
	fs.Var(&chosen, "decide", "a decision: what was chosen (needs --because)")
	fs.Var(&because, "because", "why (at least 24 characters)")
	fs.Var(&passedOver, "passed-over", "what the decision passed over")
	fs.Var(&phase, "status-phase", "public_status.phase: acting, waiting or resting")
	fs.Var(&statusNext, "status-next", "public_status.next_action (PUBLIC, ≤ 280 characters)")
	fs.Var(&statusReason, "status-reason", "public_status.reason (PUBLIC, ≤ 140 characters)")
	fs.Var(&open, "open", "open a commitment with this title (repeatable)")
	fs.Var(&closeOps, "close", "close a commitment: ID=post:UUID (repeatable)")
	fs.Var(&drop, "drop", "drop a commitment: ID=REASON (repeatable)")
	fs.Var(&stop, "stop", "record a stop of the residency with this reason")
	resume := fs.Bool("resume-residency", false, "lift a stop (only on a new operator instruction)")
	jsonFile := fs.String("json", "", "take the whole body from FILE, or - for stdin")
	sync := fs.Bool("sync", false, "wait (bounded) for the upstreams and report their answers")
	pos, err := parse(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "continuityd checkpoint: unexpected argument %q\n", pos[0])
		return exitUsage
	}

	var body []byte
	if *jsonFile != "" {
		flagsUsed := false
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "json", "sync", "agent", "socket", "config":
			default:
				flagsUsed = true
			}
		})
		if flagsUsed {
			fmt.Fprintln(e.stderr, "continuityd checkpoint: --json takes the whole body; do not mix it with field flags")
			return exitUsage
		}
		if body, err = readInput(e, *jsonFile); err != nil {
			fmt.Fprintf(e.stderr, "continuityd checkpoint: %v\n", err)
			return exitUsage
		}
	} else {
		b := map[string]any{}
		if focus.set {
			b["focus"] = focus.v
		}
		ws := map[string]any{}
		for k, o := range map[string]optString{"next_action": next, "last_result": lastResult, "result_ref": resultRef, "waiting_for": waitingFor} {
			if o.set {
				ws[k] = o.v
			}
		}
		if len(ws) > 0 {
			b["working_state"] = ws
		}
		if chosen.set || because.set || passedOver.set {
			d := map[string]any{"chosen": chosen.v, "because": because.v}
			if passedOver.set {
				d["passed_over"] = passedOver.v
			}
			b["decide"] = d
		}
		if phase.set || statusNext.set || statusReason.set {
			ps := map[string]any{"phase": phase.v, "next_action": statusNext.v}
			if statusReason.set {
				ps["reason"] = statusReason.v
			}
			b["public_status"] = ps
		}
		ops := map[string]any{}
		if len(open) > 0 {
			var l []map[string]string
			for _, t := range open {
				l = append(l, map[string]string{"title": t})
			}
			ops["open"] = l
		}
		for name, list := range map[string]listFlag{"close": closeOps, "drop": drop} {
			if len(list) == 0 {
				continue
			}
			var l []map[string]string
			for _, kv := range list {
				id, val, ok := strings.Cut(kv, "=")
				if !ok {
					fmt.Fprintf(e.stderr, "continuityd checkpoint: --%s wants ID=VALUE, got %q\n", name, kv)
					return exitUsage
				}
				key := "evidence"
				if name == "drop" {
					key = "reason"
				}
				l = append(l, map[string]string{"id": id, key: val})
			}
			ops[name] = l
		}
		if len(ops) > 0 {
			b["commitments"] = ops
		}
		if stop.set {
			b["stop"] = map[string]string{"reason": stop.v}
		}
		if *resume {
			b["resume_residency"] = true
		}
		if len(b) == 0 {
			fmt.Fprintln(e.stderr, "continuityd checkpoint: nothing to save; give at least one field flag or --json FILE")
			return exitUsage
		}
		body, _ = json.Marshal(b)
	}

	c, err := cf.client(e)
	if err != nil {
		return fail(e, err)
	}
	defer c.Close()
	q := url.Values{}
	if *sync {
		q.Set("sync", "1")
	}
	out, err := c.Do(ctx, http.MethodPost, "/v1/continuity/checkpoint", q, body)
	if err != nil {
		return fail(e, err)
	}
	var ans struct {
		Seq  uint64 `json:"seq"`
		Sync []struct {
			Name      string  `json:"name"`
			Delivered bool    `json:"delivered"`
			State     string  `json:"state"`
			Error     *string `json:"error"`
		} `json:"sync"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		return fail(e, err)
	}
	fmt.Fprintf(e.stdout, "checkpoint saved (seq %d)\n", ans.Seq)
	for _, s := range ans.Sync {
		line := fmt.Sprintf("  %s: delivered", s.Name)
		if !s.Delivered {
			line = fmt.Sprintf("  %s: not yet delivered (%s)", s.Name, s.State)
			if s.Error != nil {
				line += ": " + *s.Error
			}
		}
		fmt.Fprintln(e.stdout, line)
	}
	// The write is saved either way; an upstream that has not taken it yet
	// will, and re-running would only add a duplicate.
	return exitOK
}

// readInput reads a file, or stdin for "-".
func readInput(e *env, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(e.stdin, 1<<20))
	}
	return os.ReadFile(name)
}
