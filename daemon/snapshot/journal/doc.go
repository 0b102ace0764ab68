// Package journal is the version journal: every version of every file the
// watcher saw settle, kept within seconds, whoever made it, so that work
// lost between two snapshots (a checkout inside min_interval, an edit
// just before a kill) can be brought back at its newest version.
//
// # What happens when a file settles
//
// The watcher reports a path once no write to it came for the settle
// window (watch.DefaultSettle, a few hundred milliseconds). Settled queues
// it; the journal's one goroutine waits a little for more (Gather), then
// handles the whole group: it reads each file through a descriptor opened
// beneath the workdir (no symbolic link followed), stores its content as
// a git blob in the snapshot store's object database (content-addressed:
// a content already held is not written again), fsyncs the new objects
// and their directories, and commits the group's entries in one bbolt
// transaction (bbolt fsyncs its commit). A version is therefore durable at
// most the settle window plus Gather plus one group's writes after the
// last write to the file: DurableWithin states the bound the docs give.
// The cost grows with the bytes changed, never with the tree: nothing is
// walked, only the settled paths are read.
//
// A file over the store's max_file_size is not kept (its entry says so),
// nor a file inside a nested repository; ignored files are never reported
// by the watcher. The journal lives beside the store and is never shipped
// to a fleet: package transfer sends snapshots' objects only.
//
// # The index on disk: STORE/journal.db (bbolt)
//
// bbolt keeps the index on disk (pages mapped, nothing per entry in the
// heap), so a million entries leave the daemon's resting heap as it was.
// Buckets:
//
//	meta   "format" → "continuityd-journal 1"
//	v      seq (8 bytes, big endian)                → entry
//	p      path "\x00" seq (8 bytes, big endian)     → "" (a file's versions, in order)
//	b      blob id (20 bytes)                         → size (8) | versions holding it (4)
//	t      path                                       → thinned: count (8) | first (8) | last (8), unix ns |
//	                                                    by age (8) | by the byte bound (8)
//
// An entry is:
//
//	version (1) = 2 | at unix ns (8) | blob (20, zero when none) | mode (4) | size (8) |
//	lines (4) | flags (1) | by (uvarint length + bytes) | session (uvarint length + bytes) |
//	path (uvarint length + bytes) | turn: its prompt's unix ns, 0 when not known (8) |
//	CRC-32C of everything before (4)
//
// An entry of version 1 (an older daemon's) has no turn.
//
// flags: 1 gone (the file was deleted), 2 too large (not kept), 4 a nested
// repository (not kept). A reader checks the version and the CRC of every
// entry it decodes: one that does not check is reported (Problem, and the
// history that met it says so), never taken for a version.
//
// A journal.db bbolt cannot open (a damaged meta page, another format) is
// set aside as journal.db.damaged-TIME with a warning naming it, and a new
// one is begun: Problem says so until the daemon restarts.
//
// # Retention
//
// Every version is kept for KeepAll (default a day); older ones are
// thinned to the newest of each hour up to KeepHourly (default a week),
// then the newest of each day. The versions' blobs are also bounded by
// MaxBytes (a share of the store's keep_bytes): over it, the oldest
// versions go first, the newest version of each file last. What was
// thinned is counted per file (bucket t), by reason, and named by
// History. Before the store's garbage collection packs, KeepRef names a
// tree of every blob an entry holds, so git keeps those and drops the
// others. The bytes each group writes are told to the collector (Grew),
// which counts them against keep_bytes with the snapshots'.
package journal
