package cli

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// cmdDeadLetter is `deadletter list|retry|discard`: the writes an upstream
// refused for good, and what an operator does about them.
func cmdDeadLetter(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "deadletter", "list [--upstream U] | retry|discard --upstream U (SEQ | --all) [--agent A]")
	var cf ClientFlags
	cf.Register(fs)
	up := fs.String("upstream", "", "the upstream by `NAME`")
	all := fs.Bool("all", false, "every entry of the upstream")
	asJSON := fs.Bool("json", false, "list as JSON")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) == 0 {
		return Missing(e, "deadletter", "the action: list, retry or discard")
	}
	if c, _ := lookup("deadletter"); !slices.Contains(c.Subs, pos[0]) {
		return UnknownSub(e, "deadletter", pos[0])
	}
	c, err := cf.Client(e)
	if err != nil {
		return Fail(e, err)
	}
	defer c.Close()
	switch sub := pos[0]; sub {
	case "list":
		if len(pos) != 1 {
			return TooMany(e, "deadletter list", pos[1])
		}
		return deadLetterList(ctx, e, c, *up, *asJSON)
	case "retry", "discard":
		seq, ok := deadLetterSeq(e, sub, *up, *all, pos[1:])
		if !ok {
			return ExitUsage
		}
		code := deadLetterAct(ctx, e, c, sub, *up, seq)
		if code == ExitFailed && *up != "" {
			explainMissingUpstream(ctx, e, cf, "deadletter "+sub, *up)
		}
		return code
	default:
		return UnknownSub(e, "deadletter", sub)
	}
}

// explainMissingUpstream adds, after a refusal, that a daemon running the
// embedded default has no upstream named up: dead letters come from a
// qday or delx upstream, which takes a config.
func explainMissingUpstream(ctx context.Context, e *Env, cf ClientFlags, command, up string) {
	st, _, _, err := RunningDaemon(ctx, e, cf)
	if err != nil || st.Config != "(embedded default)" {
		return
	}
	for _, a := range st.Agents {
		for _, u := range a.Upstreams {
			if u.Name == up {
				return
			}
		}
	}
	kind := "qday"
	if up == "delx" {
		kind = "delx"
	}
	NeedsConfig(e.Stderr, command, kind)
}

// deadLetterList prints the dead letters (of one upstream, or all) as a
// table, or as the daemon's JSON.
func deadLetterList(ctx context.Context, e *Env, c *client.Client, up string, asJSON bool) int {
	q := url.Values{}
	if up != "" {
		q.Set("upstream", up)
	}
	if asJSON {
		out, err := ops.DeadLetters.Do(ctx, c, ops.Args{Query: q})
		return printRaw(e, out, err)
	}
	ans, _, err := ops.DeadLetters.Call(ctx, c, ops.Args{Query: q})
	if err != nil {
		return Fail(e, err)
	}
	if len(ans.Entries) == 0 {
		fmt.Fprintln(e.Stdout, "no dead letters")
		return ExitOK
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPSTREAM\tSEQ\tKIND\tREFUSED\tATTEMPTS\tRETRY QUEUED\tERROR")
	for _, d := range ans.Entries {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%v\t%s\n", termsafe.Name(d.Upstream), d.Write.Seq, termsafe.Name(string(d.Write.Kind)), d.At.Format(time.RFC3339), d.Attempts, d.Retry, termsafe.Line(d.Error))
	}
	tw.Flush()
	return ExitOK
}

// deadLetterSeq checks the arguments of retry or discard (sub): --upstream,
// and one SEQ (args) or --all, which is seq 0. ok is false, with the reason
// on stderr, when they are wrong.
func deadLetterSeq(e *Env, sub, up string, all bool, args []string) (seq uint64, ok bool) {
	switch {
	case up == "":
		fmt.Fprintf(e.Stderr, "continuityd deadletter %s: --upstream is required\n", sub)
		return 0, false
	case all && len(args) == 0:
	case !all && len(args) == 1:
		var err error
		if seq, err = strconv.ParseUint(args[0], 10, 64); err != nil || seq == 0 {
			fmt.Fprintf(e.Stderr, "continuityd deadletter %s: SEQ must be a positive integer, got %q\n", sub, args[0])
			return 0, false
		}
	default:
		fmt.Fprintf(e.Stderr, "continuityd deadletter %s: give one SEQ (continuityd deadletter list shows them) or --all\n", sub)
		return 0, false
	}
	return seq, true
}

// deadLetterAct asks the daemon to retry or discard (sub) dead letters of
// upstream up (seq 0: all of them) and says how many it did.
func deadLetterAct(ctx context.Context, e *Env, c *client.Client, sub, up string, seq uint64) int {
	body, err := ops.DeadLetterRetry.Encode(&guard.DeadLetterRequest{Upstream: up, Seq: seq})
	if err != nil {
		return Fail(e, err)
	}
	var n int
	if sub == "retry" {
		var ans *ops.DeadLettersRetried
		if ans, _, err = ops.DeadLetterRetry.Call(ctx, c, ops.Args{Body: body}); ans != nil {
			n = ans.Retried
		}
	} else {
		var ans *ops.DeadLettersDiscarded
		if ans, _, err = ops.DeadLetterDiscard.Call(ctx, c, ops.Args{Body: body}); ans != nil {
			n = ans.Discarded
		}
	}
	if err != nil {
		return Fail(e, err)
	}
	verb := map[string]string{"retry": "retried", "discard": "discarded"}[sub]
	fmt.Fprintf(e.Stdout, "%d dead letter(s) %s\n", n, verb)
	return ExitOK
}
