package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

// cmdDeadLetter is `deadletter list|retry|discard`: the writes an upstream
// refused for good, and what an operator does about them.
func cmdDeadLetter(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "deadletter", "list [--upstream U] | retry|discard --upstream U (SEQ | --all) [--agent A]")
	var cf clientFlags
	cf.register(fs)
	up := fs.String("upstream", "", "the upstream")
	all := fs.Bool("all", false, "every entry of the upstream")
	asJSON := fs.Bool("json", false, "list as JSON")
	pos, err := parse(fs, args)
	if err != nil || len(pos) == 0 {
		fs.Usage()
		return exitUsage
	}
	c, err := cf.client(e)
	if err != nil {
		return fail(e, err)
	}
	defer c.Close()
	switch sub := pos[0]; sub {
	case "list":
		if len(pos) != 1 {
			fs.Usage()
			return exitUsage
		}
		q := url.Values{}
		if *up != "" {
			q.Set("upstream", *up)
		}
		out, err := c.Do(ctx, http.MethodGet, "/v1/deadletter", q, nil)
		if err != nil {
			return fail(e, err)
		}
		if *asJSON {
			e.stdout.Write(out)
			return exitOK
		}
		var ans struct {
			Entries []struct {
				Upstream string    `json:"upstream"`
				Error    string    `json:"error"`
				At       time.Time `json:"at"`
				Retry    bool      `json:"retry"`
				Attempts int       `json:"attempts"`
				Write    struct {
					Seq  uint64 `json:"seq"`
					Kind string `json:"kind"`
				} `json:"write"`
			} `json:"entries"`
		}
		if err := json.Unmarshal(out, &ans); err != nil {
			return fail(e, err)
		}
		if len(ans.Entries) == 0 {
			fmt.Fprintln(e.stdout, "no dead letters")
			return exitOK
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "UPSTREAM\tSEQ\tKIND\tREFUSED\tATTEMPTS\tRETRY QUEUED\tERROR")
		for _, d := range ans.Entries {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%v\t%s\n", d.Upstream, d.Write.Seq, d.Write.Kind, d.At.Format(time.RFC3339), d.Attempts, d.Retry, d.Error)
		}
		tw.Flush()
		return exitOK
	case "retry", "discard":
		var seq uint64
		switch {
		case *up == "":
			fmt.Fprintf(e.stderr, "continuityd deadletter %s: --upstream is required\n", sub)
			return exitUsage
		case *all && len(pos) == 1:
		case !*all && len(pos) == 2:
			if seq, err = strconv.ParseUint(pos[1], 10, 64); err != nil || seq == 0 {
				fmt.Fprintf(e.stderr, "continuityd deadletter %s: SEQ must be a positive integer, got %q\n", sub, pos[1])
				return exitUsage
			}
		default:
			fmt.Fprintf(e.stderr, "continuityd deadletter %s: give one SEQ or --all\n", sub)
			return exitUsage
		}
		body, _ := json.Marshal(map[string]any{"upstream": *up, "seq": seq})
		out, err := c.Do(ctx, http.MethodPost, "/v1/deadletter/"+sub, nil, body)
		if err != nil {
			return fail(e, err)
		}
		var ans map[string]int
		json.Unmarshal(out, &ans)
		verb := map[string]string{"retry": "retried", "discard": "discarded"}[sub]
		fmt.Fprintf(e.stdout, "%d dead letter(s) %s\n", ans[verb], verb)
		return exitOK
	default:
		fs.Usage()
		return exitUsage
	}
}
