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
	fs := NewFlagSet(e, "fleet", "[--upstream NAME] [--json]")
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
