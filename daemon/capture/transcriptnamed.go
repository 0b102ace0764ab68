package capture

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/internal/safefile"
)

// ErrTranscriptMissing is a transcript a hook named that does not exist
// (yet): who may read it cannot be told, so it is not taken; a later
// hook of the session names it again once it does.
var ErrTranscriptMissing = errors.New("the transcript does not exist (yet)")

// TranscriptNamed checks a transcript a hook named (transcript_path) for
// this agent, before the signal carrying it is stored, for the caller: the
// user the hook ran as (the socket's peer, a spool file's owner). A
// transcript is one agent's, so it is taken only when
//
//   - the caller may read it: it is the file's owner (root may name any).
//     The owner is what the opened file's inode says (opened as the
//     follower opens it, through Options.Opener: with the workdir owner's
//     rights, never following a final symbolic link), not an access check
//     run with the caller's rights: the daemon never acts as the caller,
//     and a home's transcripts are its user's own files;
//   - it belongs to the agent's project: a session launched in the
//     agent's workdir (transcript.BelongsTo);
//   - no other agent's hook named it first (TranscriptClaims).
//
// A path outside the transcripts' homes is no transcript and is never
// followed; it is not checked (nil). The error says why a transcript is
// refused: the signal is stored without it, so the agent never follows
// it and its holder keeps it.
func (c *Capture) TranscriptNamed(path string, caller uint32) error {
	if c == nil || c.o.Workdir == "" {
		return nil // nothing is followed
	}
	t := c.o.Transcripts
	if !inHome(path, t.ClaudeHome, t.CodexHome) {
		return nil
	}
	op := c.o.opener()
	f, fi, err := op.Open(path, safefile.OpenOptions{})
	if errors.Is(err, fs.ErrNotExist) {
		return ErrTranscriptMissing
	}
	if err != nil {
		return err
	}
	f.Close()
	if owner, _, ok := safefile.Owner(fi); ok && caller != 0 && owner != caller {
		return fmt.Errorf("%s is uid %d's, not the hook's user's (uid %d): a hook names only a transcript its user may read", path, owner, caller)
	}
	if !transcript.BelongsUnder(op, t.ClaudeHome, t.CodexHome, c.o.Workdir, path) {
		return fmt.Errorf("%s is no transcript of a session launched in the agent's workdir %s or below it", path, c.o.Workdir)
	}
	if holder := c.o.TranscriptClaims.BoundTo(c.o.Agent, path); holder != "" {
		return fmt.Errorf("%s is agent %s's: its hook named it first", path, holder)
	}
	return nil
}
