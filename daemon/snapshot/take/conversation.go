package take

import (
	"strings"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// maxConversationID bounds each id recorded: longer ones are not ids.
const maxConversationID = 256

// clean returns c with each id dropped that is too long or holds a
// control character, and whether anything is left.
func clean(c repo.Conversation) (repo.Conversation, bool) {
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
func (t *Taker) SetConversation(point func() repo.Conversation) {
	t.conversation.Store(&point)
}

// conversationNow is the point to record in a snapshot taken now; nil
// when none is known.
func (t *Taker) conversationNow() *repo.Conversation {
	f := t.conversation.Load()
	if f == nil || *f == nil {
		return nil
	}
	c, ok := clean((*f)())
	if !ok {
		return nil
	}
	return &c
}
