package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// cmdFleet lists the agents a fleet (nats) upstream's bucket knows: which
// machine writes each, its last write, context used, public status phase,
// and the health of its upstreams as its daemon reported them.
func cmdFleet(ctx context.Context, e *Env, args []string) int {
	if len(args) > 0 && args[0] == "take" {
		return cmdFleetTake(ctx, e, args[1:])
	}
	fs := NewFlagSet(e, "fleet", "[--upstream NAME] [--json] | take AGENT [--force]")
	var cf ClientFlags
	cf.Register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	up := fs.String("upstream", "", "the nats upstream by `NAME` (needed when the daemon has several)")
	if pos, err := ParseFlags(fs, args); err != nil {
		return ExitUsage
	} else if len(pos) > 0 {
		return TooMany(e, "fleet", pos[0])
	}
	q := url.Values{}
	if *up != "" {
		q.Set("upstream", *up)
	}
	ans, code, ok := callOrPrint(ctx, e, cf, ops.Fleet, ops.Args{Query: q}, *asJSON)
	if !ok {
		return code
	}
	h := ans.Health.State
	if ans.Health.Server != "" {
		h += " to " + ans.Health.Server
	}
	if ans.Health.LastError != "" {
		h += " (last error: " + ans.Health.LastError + ")"
	}
	fmt.Fprintf(e.Stdout, "fleet %s: stream %s, bucket %s, %s\n\n", termsafe.Name(ans.Upstream), termsafe.Name(ans.Stream), termsafe.Name(ans.Bucket), termsafe.Line(h))
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tMACHINE\tSEQ\tLAST WRITE\tCONTEXT\tPHASE\tUPSTREAMS\tCONFLICT")
	now := time.Now()
	for _, a := range ans.Agents {
		last := "never"
		if a.LastWrite != nil {
			last = now.Sub(*a.LastWrite).Round(time.Second).String() + " ago"
		}
		ctxUsed := "-"
		if a.ContextFraction != nil {
			ctxUsed = fmt.Sprintf("%.0f%%", *a.ContextFraction*100)
		}
		phase := a.PublicPhase
		if phase == "" {
			phase = "-"
		}
		conflict := "-"
		if len(a.ConflictWith) > 0 {
			conflict = strings.Join(a.ConflictWith, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", termsafe.Name(a.Agent), termsafe.Name(a.Machine), a.Seq, last, ctxUsed, termsafe.Name(phase), termsafe.Line(upstreamHealth(a.Upstreams)), termsafe.Line(conflict))
	}
	tw.Flush()
	if len(ans.Agents) == 0 {
		fmt.Fprintln(e.Stdout, "(the bucket knows no agent yet)")
	}
	if b := ans.Snapshots; b != nil {
		fmt.Fprintf(e.Stdout, "\nsnapshots: bucket %s, %s in %d objects and %d manifests\n", termsafe.Name(b.Bucket), bytesText(b.Bytes), b.Objects, b.Manifests)
	}
	return ExitOK
}

// upstreamHealth is "name:state" for each upstream a writer reported.
func upstreamHealth(raw json.RawMessage) string {
	var ups []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	}
	if json.Unmarshal(raw, &ups) != nil || len(ups) == 0 {
		return "-"
	}
	parts := make([]string, len(ups))
	for i, u := range ups {
		parts[i] = u.Name + ":" + u.State
	}
	return strings.Join(parts, ",")
}

// cmdFleetTake is `fleet take AGENT [--force]`: this daemon becomes the
// agent's writer in its fleet when the daemon that wrote it is gone (seen
// last beyond the conflict window, or --force when that machine is known
// to be dead); that daemon, if it comes back, stops writing the agent.
func cmdFleetTake(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "fleet take", "AGENT [--force] [--upstream NAME] [--json]")
	var cf ClientFlags
	cf.Register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	force := fs.Bool("force", false, "take it even though its writer was seen within the conflict window: that machine is known to be gone")
	up := fs.String("upstream", "", "the nats upstream by `NAME` (needed when the agent has several)")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return ExitUsage
	}
	switch {
	case len(pos) == 0 && cf.Agent == "":
		fmt.Fprintln(e.Stderr, "continuityd fleet take: name the agent to take: continuityd fleet take AGENT [--force]")
		return ExitUsage
	case len(pos) > 1:
		return TooMany(e, "fleet take", pos[1])
	case len(pos) == 1 && cf.Agent != "" && cf.Agent != pos[0]:
		fmt.Fprintf(e.Stderr, "continuityd fleet take: two agents named (%s and --agent %s): name one\n", termsafe.Name(pos[0]), termsafe.Name(cf.Agent))
		return ExitUsage
	case len(pos) == 1:
		cf.Agent = pos[0]
	}
	q := url.Values{}
	if *force {
		q.Set("force", "1")
	}
	if *up != "" {
		q.Set("upstream", *up)
	}
	ans, code, ok := callOrPrint(ctx, e, cf, ops.FleetTake, ops.Args{Query: q}, *asJSON)
	if !ok {
		return code
	}
	h := ans.Handover
	from := "a writer the fleet does not name"
	if h.From != "" {
		from = termsafe.Name(h.From)
		if !h.FromAt.IsZero() {
			from += fmt.Sprintf(" (last seen %s ago)", time.Since(h.FromAt).Round(time.Second))
		}
	}
	forced := ""
	if h.Forced {
		forced = ", forced"
	}
	fmt.Fprintf(e.Stdout, "agent %s taken over from %s through upstream %s%s: this daemon (%s) writes it now (fleet revision %d, seq %d); the old one stops writing it if it comes back\n",
		termsafe.Name(ans.Agent), from, termsafe.Name(h.Upstream), forced, termsafe.Name(h.To), h.Revision, h.Seq)
	return ExitOK
}
