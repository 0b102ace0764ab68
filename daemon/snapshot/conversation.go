package snapshot

import (
	"net/url"
	"strings"
)

// Conversation is the point of the agent's conversation a snapshot
// matches: the session its followed transcript belongs to and the id of
// the last message read from it when the snapshot was taken (Claude
// Code's entry uuid, Codex's response item id or turn id). A person who
// rewinds the code to a snapshot knows which turn to rewind the
// conversation to.
type Conversation struct {
	Session string `json:"session,omitempty"`
	Message string `json:"message,omitempty"`
}

// maxConversationID bounds each id recorded: longer ones are not ids.
const maxConversationID = 256

// clean returns c with each id dropped that is too long or holds a
// control character, and whether anything is left.
func (c Conversation) clean() (Conversation, bool) {
	ok := func(s string) string {
		if len(s) > maxConversationID || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return ""
		}
		return s
	}
	c.Session, c.Message = ok(c.Session), ok(c.Message)
	return c, c.Session != "" || c.Message != ""
}

// SetConversation gives the store where the conversation stands: each
// snapshot made from then on records what point returns as it is taken.
// point runs with the store's writer lock held and must not call the
// store.
func (s *Store) SetConversation(point func() Conversation) {
	s.conversation.Store(&point)
}

// conversationNow is the point to record in a snapshot taken now; nil
// when none is known.
func (s *Store) conversationNow() *Conversation {
	f := s.conversation.Load()
	if f == nil || *f == nil {
		return nil
	}
	c, ok := (*f)().clean()
	if !ok {
		return nil
	}
	return &c
}

// subjectValue and parseSubjectValue write an id into the metadata line
// and read it back: the line is split at spaces, so spaces, "=" and
// anything else that is not plain are escaped as in a URL query.
func subjectValue(s string) string { return url.QueryEscape(s) }

func parseSubjectValue(s string) (string, error) { return url.QueryUnescape(s) }
