package guard

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/continuityd/continuityd/capsule"
)

// DecodeSignal decodes the body of POST /v1/signals strictly and checks it:
// a known kind with the fields that kind needs, enumerated fields within
// their values, numbers in range, strings of at most MaxSignalString
// characters without control characters, and the secret guard over every
// string. Every refusal is INVALID_SIGNAL (or SECRET_DETECTED) naming the
// field. at is the daemon's to set: it is accepted on input and ignored.
//
// Enumerated fields belong to their kind: phase and trigger only to
// compaction, event only to session and activity, so a signal never means
// two things. The informational fields (tokens, window, source, reason,
// session_id, transcript_path, via) are accepted on any kind; tool (a tool
// call's changed files or shell window, signal_tool.go) only on activity
// of event tool.
func (g *Guard) DecodeSignal(body []byte) (*capsule.Signal, error) {
	s, err := g.decodeSignal(body)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (g *Guard) decodeSignal(body []byte) (*capsule.Signal, *capsule.Error) {
	if err := checkBody(body, MaxBodyBytes); err != nil {
		return nil, err
	}
	ms, _ := readMembers(body)
	sig := &capsule.Signal{}
	strs := signalStrings(sig)
	present := map[string]bool{}
	for _, m := range ms {
		present[m.name] = true
		if m.name == "tool" {
			t, err := g.decodeSignalTool(m.value)
			if err != nil {
				return nil, err
			}
			sig.Tool = t
			continue
		}
		if err := decodeSignalMember(sig, strs, m); err != nil {
			return nil, err
		}
	}
	if err := checkSignalKind(sig); err != nil {
		return nil, err
	}
	if err := checkSignalFieldsBelong(sig, present); err != nil {
		return nil, err
	}
	for _, m := range ms { // document order, like the other checks
		if dst, ok := strs[m.name]; ok {
			if err := g.checkSecret(m.name, *dst); err != nil {
				return nil, err
			}
		}
	}
	return sig, nil
}

// signalStrings maps the string members of a signal to sig's fields.
func signalStrings(sig *capsule.Signal) map[string]*string {
	return map[string]*string{
		"kind": &sig.Kind, "phase": &sig.Phase, "trigger": &sig.Trigger, "event": &sig.Event,
		"source": &sig.Source, "reason": &sig.Reason, "session_id": &sig.SessionID,
		"transcript_path": &sig.TranscriptPath, "via": &sig.Via,
	}
}

// decodeSignalMember decodes one member into sig (strs: signalStrings(sig)),
// checking its type and range; an unknown name is refused.
func decodeSignalMember(sig *capsule.Signal, strs map[string]*string, m member) *capsule.Error {
	const code = capsule.CodeInvalidSignal
	switch m.name {
	case "at":
		// Set by the daemon when it accepts the signal.
	case "used_fraction":
		f, err := decodeFloat(m.value, code, m.name)
		if err != nil {
			return err
		}
		if math.IsNaN(f) || f < 0 || f > 1 {
			return capsule.Refuse(code, m.name, "must be a number from 0 to 1")
		}
		sig.UsedFraction = &f
	case "tokens", "window":
		n, err := decodeCount(m.value, code, m.name)
		if err != nil {
			return err
		}
		if m.name == "tokens" {
			sig.Tokens = &n
		} else {
			sig.Window = &n
		}
	default:
		dst, ok := strs[m.name]
		if !ok {
			return unknownField(code, "", m.name)
		}
		s, err := decodeString(m.value, code, m.name)
		if err != nil {
			return err
		}
		if err := checkText(s, MaxSignalString, code, m.name); err != nil {
			return err
		}
		*dst = s
	}
	return nil
}

// checkSignalKind checks that the kind is known and has the fields it
// needs, with enumerated fields within their values.
func checkSignalKind(sig *capsule.Signal) *capsule.Error {
	const code = capsule.CodeInvalidSignal
	switch sig.Kind {
	case capsule.SignalContext:
		if sig.UsedFraction == nil {
			return capsule.Refuse(code, "used_fraction", "is required for a context signal: the share of the context window in use, 0 to 1")
		}
	case capsule.SignalCompaction:
		switch sig.Phase {
		case "pre", "post":
		case "":
			return capsule.Refuse(code, "phase", "is required for a compaction signal: pre or post")
		default:
			return capsule.Refuse(code, "phase", "must be pre or post")
		}
		switch sig.Trigger {
		case "", "manual", "auto":
		default:
			return capsule.Refuse(code, "trigger", "must be manual or auto")
		}
	case capsule.SignalSession:
		switch sig.Event {
		case "start", "end", "stop":
		case "":
			return capsule.Refuse(code, "event", "is required for a session signal: start, end or stop")
		default:
			return capsule.Refuse(code, "event", "must be start, end or stop for a session signal")
		}
	case capsule.SignalActivity:
		switch sig.Event {
		case "", "prompt", "tool", "file":
		default:
			return capsule.Refuse(code, "event", "must be prompt, tool or file for an activity signal")
		}
	case "":
		return capsule.Refuse(code, "kind", "is required: context, compaction, session or activity")
	default:
		return capsule.Refuse(code, "kind", "must be context, compaction, session or activity")
	}
	return nil
}

// checkSignalFieldsBelong refuses an enumerated field present on a kind it
// does not belong to (present: the members given), so a signal never means
// two things.
func checkSignalFieldsBelong(sig *capsule.Signal, present map[string]bool) *capsule.Error {
	only := func(field, kinds string) *capsule.Error {
		return capsule.Refuse(capsule.CodeInvalidSignal, field, "is only for %s signals", kinds)
	}
	if sig.Kind != capsule.SignalCompaction {
		for _, f := range []string{"phase", "trigger"} {
			if present[f] {
				return only(f, "compaction")
			}
		}
	}
	if present["event"] && sig.Kind != capsule.SignalSession && sig.Kind != capsule.SignalActivity {
		return only("event", "session and activity")
	}
	if present["tool"] && (sig.Kind != capsule.SignalActivity || sig.Event != "tool") {
		return only("tool", "activity (event tool)")
	}
	return nil
}

// decodeFloat decodes a finite JSON number.
func decodeFloat(raw json.RawMessage, code, path string) (float64, *capsule.Error) {
	if k := jsonKind(raw); k != "number" {
		return 0, capsule.Refuse(code, path, "must be a number, got %s", k)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, capsule.Refuse(code, path, "is out of range")
	}
	return f, nil
}

// decodeCount decodes a non-negative JSON integer (no fraction, no
// exponent: a count is written as digits).
func decodeCount(raw json.RawMessage, code, path string) (int64, *capsule.Error) {
	if k := jsonKind(raw); k != "number" {
		return 0, capsule.Refuse(code, path, "must be a whole number, got %s", k)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, capsule.Refuse(code, path, "must be a whole number that fits in 64 bits")
	}
	if n < 0 {
		return 0, capsule.Refuse(code, path, "must not be negative")
	}
	return n, nil
}
