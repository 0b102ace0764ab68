package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
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
func cmdCheckpoint(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "checkpoint", "[--agent A] [flags | --json FILE|-] [--sync]")
	var cf ClientFlags
	cf.Register(fs)
	var f checkpointFlags
	f.register(fs)
	jsonFile := fs.String("json", "", "take the whole body from `FILE`, or - for stdin")
	sync := fs.Bool("sync", false, "wait (bounded) for the upstreams and report their answers")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) > 0 {
		fmt.Fprintf(e.Stderr, "continuityd checkpoint: unexpected argument %q\n", pos[0])
		return ExitUsage
	}

	var body []byte
	var ok bool
	if *jsonFile != "" {
		body, ok = checkpointJSONBody(e, fs, *jsonFile)
	} else {
		body, ok = f.body(e)
	}
	if !ok {
		return ExitUsage
	}
	return postCheckpoint(ctx, e, &cf, body, *sync)
}

// checkpointFlags are the checkpoint flags that each set one field of the
// body.
type checkpointFlags struct {
	focus, next, lastResult, resultRef, waitingFor, chosen, because, passedOver optString
	phase, statusNext, statusReason, stop                                       optString
	open, closeOps, drop                                                        listFlag
	resume                                                                      *bool
}

func (f *checkpointFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.focus, "focus", "what the agent is working on")
	fs.Var(&f.next, "next", "working_state.next_action")
	fs.Var(&f.lastResult, "last-result", "working_state.last_result")
	fs.Var(&f.resultRef, "result-ref", "working_state.result_ref (\"\" stays a string, --json for null)")
	fs.Var(&f.waitingFor, "waiting-for", "working_state.waiting_for")
	fs.Var(&f.chosen, "decide", "a decision: `WHAT` was chosen (needs --because)")
	fs.Var(&f.because, "because", "why, the `REASON` (at least 24 characters)")
	fs.Var(&f.passedOver, "passed-over", "what the decision passed over")
	fs.Var(&f.phase, "status-phase", "public_status.phase: `acting|waiting|resting`")
	fs.Var(&f.statusNext, "status-next", "public_status.next_action (PUBLIC, ≤ 280 characters)")
	fs.Var(&f.statusReason, "status-reason", "public_status.reason (PUBLIC, ≤ 140 characters)")
	fs.Var(&f.open, "open", "open a commitment with this `TITLE` (repeatable)")
	fs.Var(&f.closeOps, "close", "close a commitment with its evidence: `ID=post:UUID` (repeatable; without evidence, --drop it)")
	fs.Var(&f.drop, "drop", "drop a commitment, saying why: `ID=REASON` (repeatable)")
	fs.Var(&f.stop, "stop", "record a stop of the residency with this `REASON`")
	f.resume = fs.Bool("resume-residency", false, "lift a stop (only on a new operator instruction)")
}

// checkpointJSONBody reads the whole body from --json FILE|-; ok is false,
// with the reason on stderr, when field flags were mixed in or the input
// could not be read.
func checkpointJSONBody(e *Env, fs *flag.FlagSet, jsonFile string) (body []byte, ok bool) {
	flagsUsed := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "json", "sync", "agent", "socket", "config":
		default:
			flagsUsed = true
		}
	})
	if flagsUsed {
		fmt.Fprintln(e.Stderr, "continuityd checkpoint: --json takes the whole body; do not mix it with field flags")
		return nil, false
	}
	body, err := readInput(e, jsonFile)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd checkpoint: %v\n", err)
		return nil, false
	}
	return body, true
}

// body builds the checkpoint body (the operation's request type) from the
// field flags given; ok is false, with the reason on stderr, when a flag is
// malformed or none was given.
func (f *checkpointFlags) body(e *Env) (body []byte, ok bool) {
	var cp capsule.Checkpoint
	if f.focus.set {
		cp.Focus = &f.focus.v
	}
	ws := capsule.WorkingState{
		NextAction: f.next.ptr(), LastResult: f.lastResult.ptr(),
		ResultRef: f.resultRef.nullable(), WaitingFor: f.waitingFor.nullable(),
	}
	if ws != (capsule.WorkingState{}) {
		cp.WorkingState = &ws
	}
	if f.chosen.set || f.because.set || f.passedOver.set {
		cp.Decide = &capsule.Decision{Chosen: f.chosen.v, Because: f.because.v, PassedOver: f.passedOver.v}
	}
	if f.phase.set || f.statusNext.set || f.statusReason.set {
		cp.PublicStatus = &capsule.PublicStatus{Phase: f.phase.v, NextAction: f.statusNext.v, Reason: f.statusReason.v}
	}
	commitments, ok := f.commitmentOps(e)
	if !ok {
		return nil, false
	}
	if !commitments.IsEmpty() {
		cp.Commitments = commitments
	}
	if f.stop.set {
		cp.Stop = &capsule.Stop{Reason: f.stop.v}
	}
	cp.ResumeResidency = *f.resume
	if cp.IsEmpty() {
		fmt.Fprintln(e.Stderr, "continuityd checkpoint: nothing to save; give at least one field flag or --json FILE")
		return nil, false
	}
	body, err := ops.Checkpoint.Encode(&cp)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd checkpoint: %v\n", err)
		return nil, false
	}
	return body, true
}

// ptr is the flag's value when it was given, else nil.
func (o *optString) ptr() *string {
	if !o.set {
		return nil
	}
	return &o.v
}

// nullable is the flag's value as a field that tells absent from given.
func (o *optString) nullable() capsule.NullableString {
	return capsule.NullableString{Set: o.set, Valid: o.set, Value: o.v}
}

// commitmentOps builds the body's commitments member from --open, --close
// and --drop; ok is false, with the reason on stderr, when a --close or
// --drop is not ID=VALUE.
func (f *checkpointFlags) commitmentOps(e *Env) (commitments *capsule.CommitmentOps, ok bool) {
	commitments = &capsule.CommitmentOps{}
	for _, t := range f.open {
		commitments.Open = append(commitments.Open, capsule.OpenCommitment{Title: t})
	}
	for _, kv := range f.closeOps {
		id, evidence, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(e.Stderr, "continuityd checkpoint: --close wants ID=VALUE, got %q\n", kv)
			return nil, false
		}
		commitments.Close = append(commitments.Close, capsule.CloseCommitment{ID: id, Evidence: evidence})
	}
	for _, kv := range f.drop {
		id, reason, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(e.Stderr, "continuityd checkpoint: --drop wants ID=VALUE, got %q\n", kv)
			return nil, false
		}
		commitments.Drop = append(commitments.Drop, capsule.DropCommitment{ID: id, Reason: reason})
	}
	return commitments, true
}

// postCheckpoint sends the body and prints the daemon's answer.
func postCheckpoint(ctx context.Context, e *Env, cf *ClientFlags, body []byte, sync bool) int {
	c, err := cf.Client(e)
	if err != nil {
		return Fail(e, err)
	}
	defer c.Close()
	q := url.Values{}
	if sync {
		q.Set("sync", "1")
	}
	ans, _, err := ops.Checkpoint.Call(ctx, c, ops.Args{Query: q, Body: body})
	if err != nil {
		return Fail(e, err)
	}
	return printCheckpointAnswer(e, body, ans)
}

// printCheckpointAnswer prints the seq the write was saved as, the id of
// each commitment it opened (what --close and --drop name it by) and,
// with --sync, what each upstream did with it.
func printCheckpointAnswer(e *Env, body []byte, ans *ops.CheckpointAnswer) int {
	fmt.Fprintf(e.Stdout, "checkpoint saved (seq %d)\n", ans.Seq)
	for _, c := range openedBy(body, ans.State) {
		fmt.Fprintf(e.Stdout, "opened %s: %s\n", termsafe.Name(c.ID), termsafe.Line(c.Title))
	}
	for _, s := range ans.Sync {
		line := fmt.Sprintf("  %s: delivered", s.Name)
		if !s.Delivered {
			line = fmt.Sprintf("  %s: not yet delivered (%s)", s.Name, s.State)
			if s.Error != nil {
				line += ": " + *s.Error
			}
		}
		fmt.Fprintln(e.Stdout, termsafe.Line(line))
	}
	// The write is saved either way; an upstream that has not taken it yet
	// will, and re-running would only add a duplicate.
	return ExitOK
}

// readInput reads a file, or stdin for "-".
func readInput(e *Env, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(e.Stdin, 1<<20))
	}
	return os.ReadFile(name)
}

// openedBy are the commitments the checkpoint body opened, found in the
// state the daemon answered with: for each title opened, the newest open
// commitment of that title.
func openedBy(body, state []byte) []capsule.Commitment {
	var cp struct {
		Commitments *struct {
			Open []capsule.OpenCommitment `json:"open"`
		} `json:"commitments"`
	}
	var st struct {
		Commitments []capsule.Commitment `json:"commitments"`
	}
	if json.Unmarshal(body, &cp) != nil || cp.Commitments == nil || json.Unmarshal(state, &st) != nil {
		return nil
	}
	var out []capsule.Commitment
	for _, o := range cp.Commitments.Open {
		for i := len(st.Commitments) - 1; i >= 0; i-- {
			if c := st.Commitments[i]; c.Title == o.Title && c.Status == capsule.CommitmentOpen {
				out = append(out, c)
				break
			}
		}
	}
	return out
}
