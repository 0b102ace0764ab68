// Package transcript follows the transcripts AI agents write as they work
// (Claude Code's ~/.claude/projects/<dir>/<session>.jsonl, Codex's
// ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl) and keeps only what the
// daemon needs: how full the context window is, when the agent compacted,
// which session and directory the file belongs to, and the agent's own plan.
//
// A transcript holds the user's prompts, the model's replies and tool
// output; none of that text is ever copied into an Update or a State. The
// only strings kept are identifiers (a session id, an absolute working
// directory), a compaction trigger from a fixed set, each checked against a
// strict shape before it is kept, and the plan: the text and status of each
// step the agent wrote into its plan tool (TodoWrite, the task tools,
// update_plan), made one line, cut to capsule.MaxPlanStep characters and
// redacted of credentials step by step (plan.go); and the paths the agent's
// edit tools changed and the times its shell tool ran (tools.go), for
// attribution when no hook runs: never a file's content or a command.
//
// The parts:
//   - Tracker consumes a transcript's lines in file order (format.go,
//     tracker.go, claude.go, codex.go; the plan in plan.go, plan_claude.go,
//     plan_codex.go).
//   - Tail reads the lines appended to a file since the last call (tail.go).
//   - ClaudeProjectDir, LatestClaudeTranscript and LatestCodexRollout find
//     the transcript of a running agent (discover.go); a Finder keeps
//     finding it as new sessions start (finder.go).
//
// The formats, their quirks and the rules implemented here are described in
// the shared fixture notes (SOURCES.md §5.1 and §5.4); the tests run on the
// real fixtures copied into testdata/.
package transcript
