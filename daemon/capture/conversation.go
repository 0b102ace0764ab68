package capture

import (
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
)

// notePoint keeps where the followed conversation stands after the lines
// read so far: its session and last message id. A snapshot taken next
// records it (snapshot.Store.SetConversation), so a person who rewinds the
// code knows which turn of the conversation it matches. An id a line has
// not revealed yet (a Codex rollout read on from a saved offset names its
// session only in its first line) keeps the one known for the same
// transcript.
func (f *transcriptFollower) notePoint(path string, st transcript.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pointPath != path {
		f.pointPath, f.point = path, snapshot.Conversation{}
	}
	if st.SessionID != "" {
		f.point.Session = st.SessionID
	}
	if st.LastMessageID != "" {
		f.point.Message = st.LastMessageID
	}
}

// conversationPoint is where the followed conversation stands; empty when
// no transcript is followed.
func (f *transcriptFollower) conversationPoint() snapshot.Conversation {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.path == "" || f.pointPath != f.path {
		return snapshot.Conversation{}
	}
	return f.point
}
