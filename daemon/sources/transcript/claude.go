package transcript

// Claude Code transcripts (SOURCES.md §5.1).
//
// Context used is input_tokens + cache_creation_input_tokens +
// cache_read_input_tokens of the latest main-chain assistant message; output
// is excluded, as in Claude Code's own statusline. The window is not in the
// file and comes from Options.WindowFor.
//
// Compaction is a system entry with subtype compact_boundary; its
// compactMetadata gives the trigger and the size before (and, in newer
// versions, after). "summary" entries are session titles, not compactions.

// claudeState is what the tracker remembers between Claude Code lines to
// count each response and each compaction once.
type claudeState struct {
	// messages holds the message.id of main-chain responses already
	// counted: one response is written as one line per content block, each
	// repeating the same usage, and tool results may come in between.
	messages recent
	// boundaries holds the uuid of compact_boundary entries already
	// counted, should a writer or a copy repeat one.
	boundaries recent
}

func (c *claudeState) init() {
	c.messages = newRecent(256)
	c.boundaries = newRecent(64)
}

type claudeEntry struct {
	Type              str                        `json:"type"`
	Subtype           str                        `json:"subtype"`
	SessionID         str                        `json:"sessionId"`
	Cwd               str                        `json:"cwd"`
	UUID              str                        `json:"uuid"`
	IsSidechain       flag                       `json:"isSidechain"`
	IsAPIErrorMessage flag                       `json:"isApiErrorMessage"`
	Trigger           str                        `json:"trigger"`
	Message           obj[claudeMessage]         `json:"message"`
	CompactMetadata   obj[claudeCompactMetadata] `json:"compactMetadata"`
}

type claudeMessage struct {
	ID    str              `json:"id"`
	Model str              `json:"model"`
	Usage obj[claudeUsage] `json:"usage"`
}

type claudeUsage struct {
	InputTokens              num `json:"input_tokens"`
	CacheCreationInputTokens num `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     num `json:"cache_read_input_tokens"`
}

type claudeCompactMetadata struct {
	Trigger    str `json:"trigger"`
	PreTokens  num `json:"preTokens"`
	PostTokens num `json:"postTokens"`
}

// syntheticModel names the assistant entries Claude Code writes itself
// (API errors, interruptions); their usage is all zeros and says nothing
// about the context.
const syntheticModel = "<synthetic>"

func (t *Tracker) claudeLine(line []byte) (Update, error) {
	var e claudeEntry
	if err := decodeLine(line, &e); err != nil {
		return Update{}, err
	}
	var u Update
	// A side chain is a subagent's (or the compaction summarizer's) own
	// conversation: its numbers are not the main context. An isSidechain
	// of an unexpected shape is not trusted to be the main chain.
	sidechain := e.IsSidechain.v || e.IsSidechain.bad

	// Every entry of a file carries the same session; keep the latest, as
	// a resumed session's file may begin with entries copied from the old
	// one.
	if e.SessionID.ok {
		t.observeSession(&u, e.SessionID.v)
	}
	if e.Cwd.ok && !sidechain {
		t.observeCwd(&u, e.Cwd.v)
	}

	if (e.Type.v == "user" || e.Type.v == "assistant") && !sidechain && e.UUID.ok {
		t.observeMessage(e.UUID.v)
	}
	switch {
	case e.Type.v == "assistant" && !sidechain:
		t.claudeUsage(&u, &e)
	case e.Type.v == "system" && e.Subtype.v == "compact_boundary" && !sidechain:
		if e.UUID.ok && e.UUID.v != "" && t.claude.boundaries.seen(e.UUID.v) {
			break
		}
		c := Compaction{Trigger: trigger(e.Trigger.v)}
		if md := e.CompactMetadata; md.ok {
			if tr := trigger(md.v.Trigger.v); tr != "" {
				c.Trigger = tr
			}
			c.PreTokens = md.v.PreTokens.v
			c.PostTokens = md.v.PostTokens.v
		}
		t.observeCompaction(&u, c)
	}
	return u, nil
}

// claudeUsage reads the context size from a main-chain assistant entry.
func (t *Tracker) claudeUsage(u *Update, e *claudeEntry) {
	if !e.Message.ok || e.IsAPIErrorMessage.v {
		return
	}
	m := &e.Message.v
	if m.Model.v == syntheticModel || !m.Usage.ok {
		return
	}
	us := &m.Usage.v
	if !us.InputTokens.ok() || !us.CacheCreationInputTokens.ok() || !us.CacheReadInputTokens.ok() {
		return
	}
	tokens := us.InputTokens.v + us.CacheCreationInputTokens.v + us.CacheReadInputTokens.v
	if tokens == 0 {
		// A real request always sends a system prompt; zero means a
		// placeholder, not an empty context.
		return
	}
	if m.ID.v != "" && t.claude.messages.seen(m.ID.v) {
		return
	}
	t.observeUsage(u, tokens, max(t.windowFor(m.Model.v), 0))
}
