package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/front/statusline"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// cmdStatusline reads Claude Code's statusline payload on stdin, forwards
// the context usage to the daemon, and prints one short line: context used,
// the age of the last checkpoint, upstream health. With --wrap it first
// runs the user's own statusline command on the same payload and prints its
// line too. Like hook it always exits 0 within its budget.
func cmdStatusline(ctx context.Context, e *Env, args []string) int {
	ctx, cancel := context.WithTimeout(ctx, e.hookBudget())
	defer cancel()
	fs := NewFlagSet(e, "statusline", "[--agent A] [--wrap 'your statusline command'] < payload.json")
	var cf ClientFlags
	cf.Register(fs)
	wrap := fs.String("wrap", "", "a statusline `COMMAND` to run on the same payload; its line is printed first")
	if _, err := ParseFlags(fs, args); err != nil {
		return ExitOK
	}
	raw, err := readWithin(ctx, e.Stdin, 1<<20)
	if err != nil {
		return ExitOK
	}
	var parts []string
	if *wrap != "" {
		if own := runWrapped(ctx, *wrap, raw); own != "" {
			parts = append(parts, own)
		}
	}
	// The wrapped command's line is the user's own (colours included);
	// continuityd's part carries names and messages from elsewhere.
	parts = append(parts, termsafe.Line(statusText(ctx, e, cf, raw)))
	fmt.Fprintln(e.Stdout, strings.Join(parts, " │ "))
	return ExitOK
}

// statusText is continuityd's part of the line.
func statusText(ctx context.Context, e *Env, cf ClientFlags, raw []byte) string {
	p, err := statusline.Parse(raw)
	if err != nil {
		return "continuityd: unreadable statusline payload"
	}
	ctxPart := "ctx ?"
	if p.Usage != nil {
		ctxPart = fmt.Sprintf("ctx %.0f%%", p.Usage.Fraction*100)
	}
	c, err := cf.Client(e)
	if err != nil {
		return ctxPart + " · continuityd: " + err.Error()
	}
	defer c.Close()
	q := url.Values{"peek": {"1"}}
	if cf.Agent == "" && p.Cwd != "" {
		q.Set("cwd", p.Cwd)
	}
	out, err := ops.Resume.Do(ctx, c, ops.Args{Query: q})
	if err != nil {
		if unreachable(err) {
			return ctxPart + " · continuityd down"
		}
		if noPlaceNote(err) != "" { // nothing of any place here
			return ctxPart + " · continuityd: no place here"
		}
		return ctxPart + " · continuityd: " + err.Error()
	}
	r, err := ops.Resume.Decode(out)
	if err != nil {
		return ctxPart // an answer that does not decode: the line shows what the payload says
	}
	if p.Usage == nil {
		ctxPart = daemonContext(p, r.Context)
	}
	// The statusline renders often; only a change worth a durable write is
	// forwarded (a point of usage, or a new session).
	if p.Usage != nil && (r.Context.UsedFraction == nil || math.Abs(*r.Context.UsedFraction-p.Usage.Fraction) >= 0.01 || r.Context.SessionID != p.SessionID) {
		sig := capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &p.Usage.Fraction, SessionID: p.SessionID, TranscriptPath: p.TranscriptPath, Via: "statusline"}
		if p.Usage.Window > 0 {
			sig.Tokens, sig.Window = &p.Usage.Tokens, &p.Usage.Window
		}
		body, _ := json.Marshal(sig)
		sq := url.Values{}
		if q.Get("cwd") != "" {
			sq.Set("cwd", q.Get("cwd"))
		}
		ops.Signal.Do(ctx, c, ops.Args{Query: sq, Body: body}) // best effort: the statusline renders again soon
	}
	saved := "never saved"
	if r.LastWriteAt != nil {
		saved = "saved " + shortAge(time.Since(*r.LastWriteAt)) + " ago"
	}
	health := "ok"
	for _, u := range r.Upstreams {
		if u.State != capsule.UpstreamOK {
			health = u.Name + " " + u.State
			if u.Pending > 0 {
				health += fmt.Sprintf(" (%d pending)", u.Pending)
			}
			break
		}
	}
	if len(r.Degraded) > 0 && health == "ok" {
		health = "degraded: " + strings.Join(r.Degraded, ",")
	}
	return fmt.Sprintf("%s · %s · %s", ctxPart, saved, health)
}

// daemonContext is the context part from the daemon's own figure, for a
// payload that carries none (no context_window: the first render, an
// older Claude Code, another agent's status line), named by where it came
// from: "ctx 46% (transcript)". Another session's figure is not this
// one's: "ctx ?" then.
func daemonContext(p *statusline.Payload, c capsule.ContextState) string {
	if c.UsedFraction == nil || p.SessionID != "" && c.SessionID != "" && p.SessionID != c.SessionID {
		return "ctx ?"
	}
	via := c.Via
	if via == "" {
		via = "daemon"
	}
	return fmt.Sprintf("ctx %.0f%% (%s)", *c.UsedFraction*100, via)
}

func shortAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// runWrapped runs the user's statusline command with the payload on its
// stdin and returns its first line, bounded by ctx.
func runWrapped(ctx context.Context, command string, payload []byte) string {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	if runtime.GOOS == "windows" {
		cmd = exec.CommandContext(ctx, "cmd", "/C", command)
	}
	cmd.Stdin = bytes.NewReader(payload)
	out, _ := cmd.Output()
	line, _, _ := strings.Cut(strings.TrimRight(string(out), "\n"), "\n")
	return line
}
