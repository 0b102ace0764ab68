// Package repo is a snapshot store on disk: a bare git repository private
// to the daemon (STATE/agents/NAME/snapshots.git), what it holds (objects,
// packs, the private index, refs, the metadata in each snapshot's commit),
// and the git driver that runs git on it isolated from every
// configuration but the store's own. The jobs over it (taking, restoring,
// retention, verification, transfer) are the packages beside it.
//
// # Why a bare git repository driven by the git CLI
//
// The store is a bare git repository private to the daemon
// (STATE/agents/NAME/snapshots.git). Git is content addressed, so an
// unchanged file costs nothing and an unchanged tree hashes to the same
// tree (no new snapshot); its private index caches every file's stat data,
// so a snapshot of a large tree reads only the files that changed; it
// packs objects with deltas, so small edits cost little; it honours
// .gitignore at every depth exactly as the agent's tools do; it stores
// symbolic links as links and never follows them; and it writes objects
// first and moves a ref last with a lock file and a rename, which makes a
// snapshot killed mid-way invisible. Git does the heavy and the subtle
// parts (the walk and stat cache of a full add, the ignore rules, packing,
// diffs); what a snapshot of a few changed files needs (its
// blobs, trees and commit in one small pack in git's own format, and a
// ref) the store writes itself, because a git process per step cost more
// than the work (package take). The price is a
// dependency on the git binary, which the daemon reports as degraded
// ["snapshots"] when it is missing.
//
// # Isolation
//
// Every git run names the store with --git-dir, the workdir with
// --work-tree and the store's private index with GIT_INDEX_FILE, and is
// built by internal/gittool: an environment from scratch, so no variable
// of the daemon's leaks in (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE,
// GIT_CONFIG_*, askpass, …); the system and global configuration not read
// (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null, HOME=/dev/null); -c
// settings that switch off hooks (core.hooksPath=/dev/null), fsmonitor,
// automatic gc and maintenance, signing, pagers, editors and every
// transport; and the store's own -c settings switch off the untracked
// cache and every content conversion. The store's info/attributes (which outranks the work tree's
// .gitattributes) turns off filters, end-of-line and encoding conversion,
// so snapshots hold the bytes as they are. Git never adds a path named
// .git, so the agent's repository (or a worktree's or submodule's .git
// file) is never read into a snapshot. A directory below the workdir that
// holds a .git (a nested repository, a submodule, a linked worktree) is
// left out whole (the files of it tracked before its .git appeared leave
// the snapshot too) and named in the snapshot's skipped files: recorded as a
// gitlink, git add would run `git status` inside it, under that
// repository's own configuration (its fsmonitor, for one). The user's .git/info/exclude is not read (the store's own info/exclude
// is); put such patterns in [watch] ignore.
//
// # On disk
//
// The store is made by `git init --bare --template=` (mode 0700); beside
// git's own files it holds:
//
//	refs/snapshots/<n>              a snapshot of the store's own, n zero-padded to 12 digits (RefName)
//	refs/imported/<id>              a snapshot fetched from another machine, named by its id there (ImportPrefix)
//	objects/pack/pack-<sum>.pack    git's packs, and those written in process (PackWriter)
//	objects/<xx>/<rest>             loose objects, git's and those written in process (WriteLoose)
//	index                           the private index (GIT_INDEX_FILE), written in process for a first snapshot (IndexWriter)
//	info/exclude                    the ignore rules every snapshot applies (BaseExclude), written at each start
//	info/attributes                 no filter or conversion: every snapshot holds the bytes as they are
//	oversized.exclude               core.excludesFile: the files over the size limit and the nested repositories
//	incoming/                       objects being received from another machine (IncomingDir)
//	restored.paths                  the files the last restore wrote
//	restore.journal                 the journal of a restore under way
//	restore.interrupted             the report of an interrupted restore, kept across restarts
//
// Each snapshot is a root commit on its own ref, whose message holds its
// metadata (Message: the first line, which ParseSubject reads back for a
// List; then the files it skipped, those withheld from the fleet, and the
// permissions git does not keep); its parent is metadata, not a git
// parent, so retention drops the oldest snapshots by deleting their refs,
// without rewriting (and renaming) the ones it keeps.
//
// # Objects first, the ref last
//
// A snapshot's objects are written first and its ref last: a ref is a lock
// file created exclusively, fsynced and renamed into place, never over one
// that exists (CreateRef), so a snapshot half written is never listed.
// Packs written in process are fsynced (as git fsyncs its own); loose
// objects are left to the file system's writeback, as git leaves them.
// Lock files a killed git left are stale (no git of the store runs while
// the writer lock is held: WriteLock) and removed (ClearStaleLocks); on
// Linux a git run dies with the daemon (a parent-death signal), so a lock
// is never taken away from a git still running.
package repo
