package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/api"
)

// printHealth prints, below status's table, each agent's workdir and how
// its watch, transcripts and snapshots are doing, and how the last
// configuration reload went: what a person needs to see that something
// does not work.
func printHealth(w io.Writer, st *api.Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, a := range st.Agents {
		if a.Damaged != "" {
			continue
		}
		workdir := a.Workdir
		if workdir == "" {
			workdir = "(none: nothing is watched)"
		}
		fmt.Fprintf(tw, "\nagent %s\t%s\n", shown(a.Name), shown(workdir))
		for _, c := range a.Components {
			state := c.State
			if c.Detail != "" {
				state += ": " + c.Detail
			}
			fmt.Fprintf(tw, "  %s\t%s\n", shown(c.Name), shown(state))
		}
	}
	tw.Flush()
	if r := st.LastReload; r != nil {
		at := r.At.UTC().Format(time.RFC3339)
		switch r.Outcome {
		case "ok":
			fmt.Fprintf(w, "\nlast reload: ok at %s\n", at)
		default:
			// A config error may name several problems, one a line.
			lines := strings.Split(strings.TrimRight(r.Error, "\n"), "\n")
			fmt.Fprintf(w, "\nlast reload: %s at %s: %s\n", shown(r.Outcome), at, shown(lines[0]))
			for _, l := range lines[1:] {
				fmt.Fprintf(w, "  %s\n", shown(l))
			}
		}
	}
}

// shown makes text from the daemon safe to print: control and invisible
// formatting characters become their escape (\n, \u202e), the rest is kept.
func shown(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || guard.IsHiddenRune(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) || guard.IsHiddenRune(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// runningDaemon asks the daemon the client flags name for its status, for
// commands that change files the daemon reads and then tell it so
// (recover, delx register). socket is where it asked; st is nil when no
// daemon answered there (err says why).
func runningDaemon(ctx context.Context, e *env, cf clientFlags) (st *api.Status, socket string, err error) {
	c, err := cf.client(e)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := c.Do(ctx, http.MethodGet, "/v1/status", nil, nil)
	if err != nil {
		return nil, c.Socket, err
	}
	st = &api.Status{}
	if err := json.Unmarshal(out, st); err != nil {
		return nil, c.Socket, err
	}
	return st, c.Socket, nil
}
