// Package attribution says whose work each change in a shared workdir is:
// the agent whose tool changed a path, or outside (a person, an
// editor, another program).
//
// The sources name what an agent's tools changed: its hook payloads
// (internal/hook: Claude Code's PostToolUse for Edit, Write, MultiEdit and
// NotebookEdit, Codex's apply_patch, and the PreToolUse / PostToolUse
// window of a shell tool) and its transcript when no hook runs
// (daemon/sources/transcript); what they share, the shape check of a
// claimed path and the reading of an apply_patch input, is
// internal/toolpaths. This package holds the mapping of a claimed path
// onto the workdir (Resolver), and the Ledger that matches the claims with the changes the
// workdir watcher saw, tells conflicts (a path two agents changed) and
// answers since-last-visit's by_others.
//
// Nothing here reads the disk after NewResolver, and every answer depends
// only on the events given (time comes in with them), so the rules are
// tested without a daemon. The daemon's ledgers, one per workdir kept across
// runs, are subpackage ledgers.
package attribution
