// Package transcript follows the transcripts AI agents write as they work
// (Claude Code's ~/.claude/projects/<dir>/<session>.jsonl, Codex's
// ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl) and keeps only what the
// daemon needs: how full the context window is, when the agent compacted,
// and which session and directory the file belongs to.
//
// Only numbers and markers leave this package. A transcript holds the
// user's prompts, the model's replies and tool output; none of that text is
// ever copied into an Update or a State. The only strings kept are
// identifiers (a session id, an absolute working directory) and a
// compaction trigger from a fixed set, each checked against a strict shape
// before it is kept.
//
// The parts:
//   - Tracker consumes a transcript's lines in file order (format.go,
//     tracker.go, claude.go, codex.go).
//   - Tail reads the lines appended to a file since the last call (tail.go).
//   - ClaudeProjectDir, LatestClaudeTranscript and LatestCodexRollout find
//     the transcript of a running agent (discover.go).
//
// The formats, their quirks and the rules implemented here are described in
// the shared fixture notes (SOURCES.md §5.1 and §5.4); the tests run on the
// real fixtures copied into testdata/.
package transcript
