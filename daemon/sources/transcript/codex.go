package transcript

// Codex rollouts (SOURCES.md §5.4).
//
// Context used is info.last_token_usage.input_tokens of a token_count
// event: cached_input_tokens is the cached part of that input, not an
// addition to it. The window is info.model_context_window, or else the
// latest task_started's model_context_window.
//
// Compaction is a top-level "compacted" line. The event_msg
// context_compacted that follows it describes the same compaction and is
// not counted again; neither is the all-zero token_count written at the
// same moment, which is skipped like the info:null rate-limit updates.

// codexState is what the tracker remembers between Codex lines.
type codexState struct {
	// window is the latest task_started model_context_window; 0 unknown.
	window int64
	// metaSeen is set once the rollout's own session_meta (the first with
	// a well-formed id) was read. Later session_meta lines (forked or
	// resumed history copied into the file) describe other sessions and
	// must not rename this one.
	metaSeen bool
	// lastTokens is the last usage seen, kept across a compaction to
	// report how full the context was when it compacted.
	lastTokens int64
}

type codexLine struct {
	Type    str               `json:"type"`
	Payload obj[codexPayload] `json:"payload"`
}

// codexPayload holds the payload fields of every line type the tracker
// reads; each type uses its own subset.
type codexPayload struct {
	Type               str            `json:"type"`                 // event_msg
	ID                 str            `json:"id"`                   // session_meta, response_item (0.146+)
	TurnID             str            `json:"turn_id"`              // turn_context
	Cwd                str            `json:"cwd"`                  // session_meta
	ModelContextWindow num            `json:"model_context_window"` // task_started
	Info               obj[codexInfo] `json:"info"`                 // token_count
}

type codexInfo struct {
	LastTokenUsage     obj[codexTokenUsage] `json:"last_token_usage"`
	ModelContextWindow num                  `json:"model_context_window"`
}

type codexTokenUsage struct {
	InputTokens num `json:"input_tokens"`
}

func (t *Tracker) codexLine(line []byte) (Update, error) {
	var l codexLine
	if err := decodeLine(line, &l); err != nil {
		return Update{}, err
	}
	var u Update
	p := &l.Payload.v
	switch l.Type.v {
	case "session_meta":
		if !l.Payload.ok || t.codex.metaSeen || !validSessionID(p.ID.v) {
			break
		}
		t.codex.metaSeen = true
		t.observeSession(&u, p.ID.v)
		if p.Cwd.ok {
			t.observeCwd(&u, p.Cwd.v)
		}
	case "turn_context":
		if l.Payload.ok && p.TurnID.ok {
			t.observeMessage(p.TurnID.v)
		}
	case "response_item":
		if l.Payload.ok && p.ID.ok {
			t.observeMessage(p.ID.v)
		}
	case "compacted":
		t.observeCompaction(&u, Compaction{PreTokens: t.codex.lastTokens})
		t.codex.lastTokens = 0 // stale once compacted
	case "event_msg":
		if !l.Payload.ok {
			break
		}
		switch p.Type.v {
		case "task_started":
			if w := p.ModelContextWindow.v; w > 0 {
				t.codex.window = w
			}
		case "token_count":
			t.codexUsage(&u, p)
		}
	}
	return u, nil
}

// codexUsage reads the context size from a token_count event.
func (t *Tracker) codexUsage(u *Update, p *codexPayload) {
	if !p.Info.ok || !p.Info.v.LastTokenUsage.ok {
		return // info:null is a rate-limit update
	}
	in := p.Info.v.LastTokenUsage.v.InputTokens
	if !in.ok() || in.v == 0 {
		return // the all-zero event written at compaction, or a placeholder
	}
	window := p.Info.v.ModelContextWindow.v
	if window == 0 {
		window = t.codex.window
	}
	t.codex.lastTokens = in.v
	t.observeUsage(u, in.v, window)
}
