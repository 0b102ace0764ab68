package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/hook"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/statefiles"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// defaultHookBudget is how long `continuityd hook` (and statusline) may take in
// all: the interface promises agents half a second, and process start-up
// needs some of it. $CONTINUITYD_HOOK_BUDGET (a Go duration, 50ms to 5m)
// gives a machine too slow for it more; the tests use it so that what
// they check never depends on the machine's speed.
const defaultHookBudget = 400 * time.Millisecond

// hookBudget is the budget this process runs under; a value that is not a
// duration in range is ignored (a hook never fails its agent).
func (e *Env) hookBudget() time.Duration {
	if v := e.Getenv("CONTINUITYD_HOOK_BUDGET"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d >= 50*time.Millisecond && d <= 5*time.Minute {
			return d
		}
	}
	return defaultHookBudget
}

// cmdHook reads a Claude Code or Codex hook payload on stdin, forwards the
// signal it means to the daemon, and on SessionStart prints the hook output
// carrying the resume. Whatever happens it exits 0 within the budget and
// prints nothing but the hook output: a hook must never block or break its
// agent. When the daemon is down the event is spooled on disk for the
// daemon to ingest at its next start, and SessionStart is answered from
// the last resume the daemon left on disk.
func cmdHook(ctx context.Context, e *Env, args []string) int {
	ctx, cancel := context.WithTimeout(ctx, e.hookBudget())
	defer cancel()
	fs := NewFlagSet(e, "hook", "[--agent A] < payload.json")
	var cf ClientFlags
	cf.Register(fs)
	if _, err := ParseFlags(fs, args); err != nil {
		return ExitOK // a hook never fails its agent, even on bad flags
	}
	raw, err := readWithin(ctx, e.Stdin, hook.MaxPayload)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd hook: %v\n", err)
		return ExitOK
	}
	ev, err := hook.Parse(raw)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd hook: %v\n", err)
		return ExitOK
	}
	c, err := cf.Client(e)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd hook: %v\n", err)
		return ExitOK
	}
	defer c.Close()
	q := url.Values{}
	if cf.Agent == "" && ev.Cwd != "" {
		q.Set("cwd", ev.Cwd)
	}
	down := false
	if ev.Signal != nil && ev.Signal.Tool != nil {
		// When the call happened, kept by a spooled event too: the
		// daemon matches it with the changes its watcher saw then.
		ev.Signal.Tool.At = time.Now().UTC()
	}
	if ev.Signal != nil {
		body, _ := json.Marshal(ev.Signal)
		_, err := ops.Signal.Do(ctx, c, ops.Args{Query: q, Body: body})
		if err != nil {
			down = unreachable(err)
			if down {
				spoolEvent(e, cf, ev)
			} else if noPlaceNote(err) == "" { // no place here: SessionStart says so below
				fmt.Fprintf(e.Stderr, "continuityd hook: %v\n", err)
			}
		}
	}
	if !ev.IsSessionStart() {
		return ExitOK
	}
	md := ""
	if !down {
		// local=1: the daemon answers from its own state at once, with the
		// upstreams' views as last fetched, instead of waiting for them
		// (and their rate limits) past this hook's budget.
		q.Set("local", "1")
		// An answer that does not decode is as good as none: the last
		// resume on disk stands in below.
		r, _, err := ops.Resume.Call(ctx, c, ops.Args{Query: q})
		if err == nil {
			md = r.Markdown(statefiles.ResumeMarkdownLimit)
		} else if note := noPlaceNote(err); note != "" {
			// A directory in no place gets nothing of any place: not
			// the last resume of another, only why.
			e.Stdout.Write(hook.SessionStartOutput(termsafe.Text(note)))
			return ExitOK
		}
	}
	if md == "" {
		if lr, err := statefiles.ReadLastResume(stateDir(e, cf), cf.Agent, ev.Cwd); err == nil {
			md = lr.Markdown + fmt.Sprintf("\n_(continuityd was not reachable; this is the resume it left at %s.)_\n", lr.At.Format(time.RFC3339))
		}
	}
	if md != "" {
		e.Stdout.Write(hook.SessionStartOutput(termsafe.Text(md)))
	}
	return ExitOK
}

// noPlaceNote is the short answer to a session whose directory lies in
// no place of the daemon (or one the caller may not adopt): why, and that
// nothing of any project is shown; "" for any other error.
func noPlaceNote(err error) string {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != capsule.CodeAgentRequired && ae.Code != capsule.CodeAgentForbidden {
		return ""
	}
	why, _, _ := strings.Cut(ae.Message, "; name ")
	why, _, _ = strings.Cut(why, "; the places and agents here")
	why, _, _ = strings.Cut(why, "; the agents here")
	return "continuityd: " + why + ". Nothing of any project is shown here; `continuityd doctor` in this directory says more.\n"
}

// unreachable reports whether err means the daemon could not be reached
// (or did not answer in time), as opposed to an answer refusing something.
func unreachable(err error) bool {
	// An agent refused for damaged files is unreachable too: its events
	// wait in the spool until an operator brings it back.
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Code == capsule.CodeAgentDamaged {
		return true
	}
	return errors.Is(err, client.ErrUnreachable) || errors.Is(err, context.DeadlineExceeded)
}

// spoolEvent leaves the event for the daemon's next start.
func spoolEvent(e *Env, cf ClientFlags, ev *hook.Event) {
	err := statefiles.Spool(stateDir(e, cf), statefiles.SpooledEvent{Agent: cf.Agent, Cwd: ev.Cwd, At: time.Now().UTC(), Signal: *ev.Signal})
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd hook: daemon unreachable and the event could not be spooled: %v\n", err)
	}
}

// stateDir is where the daemon keeps its state, found like the socket:
// --config FILE, $CONTINUITYD_STATE_DIR, the system service's state when
// the socket in use is the system one (a user whose agents share the system
// daemon sets only $CONTINUITYD_SOCKET), or the default place.
func stateDir(e *Env, cf ClientFlags) string {
	if cf.Config != "" {
		if cfg, err := config.Load(cf.Config); err == nil {
			return cfg.Daemon.StateDir
		}
	}
	if v := e.Getenv("CONTINUITYD_STATE_DIR"); v != "" {
		return v
	}
	sysState, sysSock := config.SystemPaths()
	if sock, err := cf.SocketPath(e); err == nil && sock == sysSock {
		return sysState
	}
	st, _ := e.Paths()
	return st
}

// readWithin reads at most max bytes from r, giving up when ctx ends (an
// agent that never closes the hook's stdin must not hang it).
func readWithin(ctx context.Context, r io.Reader, max int64) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, max+1))
		ch <- result{b, err}
	}()
	select {
	case res := <-ch:
		if int64(len(res.b)) > max {
			return nil, fmt.Errorf("payload over %d bytes", max)
		}
		return res.b, res.err
	case <-ctx.Done():
		return nil, errors.New("no payload on stdin in time")
	}
}
