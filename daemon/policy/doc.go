// Package policy is the automatic checkpoint policy: the part of
// continuityd that decides, per agent, when to checkpoint without being
// asked, and what such a checkpoint may carry.
//
// A Policy is a deterministic state machine. The daemon feeds it inputs one
// at a time (activity, context signals, content derived from the agent's
// handoff file, timer ticks); it answers with the writes it made, all of
// them through the agent's residency store, hence through the outbox and
// its per-upstream rate limits. Its clock is injected; NextDeadline says
// when it next needs a Tick, and is false when nothing is pending, so an
// idle agent costs no wake-ups. Run is the only goroutine, and it owns
// nothing but a timer.
//
// # Triggers
//
//   - quiet: activity (file changes, prompt and tool signals, session start
//     and turn stop, a handoff file change) arms a timer Quiet after the
//     last of a burst (or MaxDelay after its first, for a burst that never
//     goes quiet). When it fires, one checkpoint is sent if something
//     changed: derived content is pending, the public status must become
//     acting, or no public status was ever saved. At most one per
//     MinInterval: an earlier firing is deferred to the last quiet
//     checkpoint + MinInterval.
//   - threshold: a context signal whose used_fraction crosses one of
//     Thresholds upward sends one checkpoint at once, however many it
//     crossed: pending derived content and the public status re-sent. A
//     crossing that would only re-send the very status saved less than
//     MinInterval ago is skipped (nothing would change upstream). A
//     threshold re-arms when usage drops Hysteresis below it, on a
//     compaction (post) and on a session start.
//   - pre_compaction: a compaction signal, phase pre, sends a checkpoint and
//     seals a capsule (SealOnCompaction). Phase post only re-arms the
//     thresholds.
//   - session_end: a session signal, event end, sets the phase resting,
//     sends a checkpoint and seals a capsule (SealOnSessionEnd); the agent
//     is no longer alive, so its status is no longer refreshed.
//   - idle: IdleAfter without activity turns acting into waiting (one
//     checkpoint, only when the public status changes).
//   - refresh: while the agent is alive (its session has not ended and it
//     was active within Alive) the public status is re-sent every Refresh
//     after the last saved one (the agent's own saves count), so that the
//     Q-Day office, which lists an agent for an hour after its last saved
//     status, keeps listing it. An agent that comes back after its status
//     lapsed is refreshed at once.
//   - derived: a capsule draft from the handoff file (.continuity/capsule.json)
//     is stored, unsealed, with the next checkpoint the policy sends.
//   - work: with a Snapshotter (work.go), quiet, threshold, pre_compaction,
//     session_end and, when the daemon feeds KindCheckpoint, the agent's own
//     checkpoints first snapshot the workdir and, when something is new,
//     write one work record (capsule.WriteWork) before their checkpoint, so
//     a capsule sealed with them carries its receipt. It counts in the
//     hourly cap; a quiet one moves MinInterval like a quiet checkpoint.
//   - turn_start, turn_end: with a Snapshotter, the agent's prompt
//     (activity signal, event prompt) and its Stop (session signal, event
//     stop) each take a work snapshot at once, and a work record when
//     something is new, so the two bound the turn: one diff. No
//     checkpoint of their own (the quiet period after a Stop sends it).
//     The snapshot is taken even when the hourly cap holds its record
//     back; a later trigger finds the same tree and takes none, so when
//     a turn and a policy trigger coincide the turn names the snapshot.
//
// # What an automatic checkpoint carries
//
// Never invented content. Only:
//
//   - fields derived from the handoff file (goal → focus, next →
//     working_state.next_action, done → working_state.last_result, blockers
//     → working_state.waiting_for), each only when the file changed AFTER
//     the agent last wrote that part itself and when it differs from what
//     is stored. Derived content waits for the next checkpoint the policy
//     sends (normally the quiet period; at once with a pre-compaction or a
//     session end);
//   - the public status: the phase the policy observes (acting, waiting,
//     resting) with a fixed neutral next_action per phase ("working",
//     "waiting for the next instruction", "session ended"), or the agent's
//     own next_action, reason and until when the agent set them for that
//     same phase; the agent's tool, route and experiment are kept. A
//     status the agent saved after the policy's last phase change is
//     re-sent as the agent wrote it. Private fields (focus, working state)
//     never go into the public status, and an until that has passed is
//     not carried into a status the policy builds.
//
// When the public status is not managed (PublicStatus false) and nothing
// derived is pending, a trigger does nothing (the store refuses empty
// checkpoints). Automatic writes carry capsule.OriginAutomatic. While the
// residency is stopped, the policy sends nothing at all. A store error is
// reported in the Action and logged once per kind until a write succeeds.
//
// # Rate
//
// Besides MinInterval, a hard cap: at most MaxPerHour automatic writes
// (checkpoints and capsules) in any sliding hour, 3600/MinInterval + 10
// (70 with the defaults), the last 4 of which only compaction and session
// end may use, so that no storm of other triggers keeps a capsule from
// being sealed. A trigger over the cap is reported with ErrRateLimited and
// retried once enough writes have left the window, sending only what is
// still pending then (and the seal it owed).
package policy

// Table is the policy as a README table: trigger, default, what is sent.
const Table = `| trigger | default | what is sent |
| --- | --- | --- |
| ` + "`quiet`" + ` (the agent's work goes quiet) | 20s after the last activity of a burst (file change, prompt, tool use, handoff file change), or 5m after its first for a burst that never pauses; at most one per ` + "`min_interval`" + ` 60s | one checkpoint, only if something changed: handoff-file fields newer than the agent's own writes, and the public status when it must turn ` + "`acting`" + ` (or none was ever saved); a changed ` + "`.continuity/capsule.json`" + ` is stored as the capsule (unsealed) |
| ` + "`threshold`" + ` (context filling up) | used fraction crosses 0.5, 0.7, 0.85 upward; re-armed 0.05 below, on compaction and on session start | one checkpoint at once (one per signal, however many thresholds it crosses): pending handoff fields and the public status re-sent (skipped if that same status was saved under ` + "`min_interval`" + ` ago) |
| ` + "`pre_compaction`" + ` | on (` + "`seal_on_compaction`" + `) | a checkpoint (pending handoff fields, public status) and a sealed capsule |
| ` + "`session_end`" + ` | on (` + "`seal_on_session_end`" + `) | a checkpoint with the public status ` + "`resting`" + ` ("session ended") and pending handoff fields, then a sealed capsule; refreshes stop |
| ` + "`idle`" + ` | 10m without activity | the public status ` + "`waiting`" + ` ("waiting for the next instruction"), only when it changes |
| ` + "`refresh`" + ` | every 45m while the agent is alive (session not ended, active within 24h) | the current public status re-sent (45m after the last saved one, the agent's own included), so the Q-Day office (one hour) keeps listing the agent |
| ` + "`work`" + ` (the work itself) | on (` + "`[snapshots] enabled`" + `): with each quiet, threshold, pre-compaction and session-end trigger, before its checkpoint; after the agent's own checkpoints too with ` + "`on_explicit_checkpoint`" + ` | a snapshot of the workdir, and one work record when something is new: the snapshot id, files added/modified/deleted with line counts, the commits since the last one, the context used fraction, the plan. The local archive keeps it whole; its receipt reaches Delx in the next capsule; Q-Day gets only a private ` + "`working_state.last_result`" + ` summary ("3 files changed (+120 −8); commit a1b2c3d …") with ` + "`result_ref`" + ` the snapshot id, left out when the agent wrote its own working state since the last record; never the public status |
| ` + "`turn_start`" + `, ` + "`turn_end`" + ` (the agent's turn) | on (` + "`[snapshots] enabled`" + `): at each prompt the agent is given (UserPromptSubmit) and at its Stop, from the hooks | a snapshot of the workdir when it changed, so a turn is the diff between its two snapshots; a work record when something is new (the snapshot is taken even when the hourly cap holds the record back); no checkpoint: the quiet period after the turn sends it. A policy trigger that comes after finds the same tree and takes no second snapshot |
| hourly cap | 3600 / ` + "`min_interval`" + ` + 10 = 70 | hard ceiling on automatic writes (checkpoints, work records and capsules) in any sliding hour, the last 4 kept for compaction and session end; a trigger over it is retried when a slot frees, with only what is still pending |

Automatic checkpoints never invent content. They carry only fields derived from the agent's own handoff file (goal → focus, next → next_action, done → last_result, blockers → waiting_for), each only when the file changed after the agent last wrote that part itself, and the public status: the observed phase with a fixed neutral text, or the agent's own next_action/reason/until for that phase, keeping its tool/route/experiment. Private fields never reach the public status. Nothing is sent while the residency is stopped, and everything goes through the outbox and its rate limits.
`
