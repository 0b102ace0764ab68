// Package snapshot keeps a shadow store of an agent's work tree: content
// addressed snapshots that an automatic checkpoint takes and a restore
// brings back, without ever touching the agent's own repository.
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
// than the work (see "Snapshots from what changed"). The price is a
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
// # What a snapshot holds
//
// The files git add -A sees with the workdir's .gitignore files, minus
// Options.Ignore ([watch] ignore), Options.IgnoreDirs and the store and
// state directories (the store's info/exclude), minus regular files over
// Options.MaxFileBytes and nested repositories. Those are found by a walk
// with lstat before git runs (so git never reads them), written to the
// store's core.excludesFile, dropped from the index if they were tracked before
// they grew, and named in the snapshot. A tracked file that an ignore rule
// later covers leaves the next snapshot too (git add -A alone would keep
// it).
//
// What git would leave out without a word is named in the skipped files
// too: names it takes for .git (.GIT, .Git), paths over the system's
// limit, directories it cannot read. Permissions git does not keep (it
// writes 0644 or 0755) are recorded in the message as "mode" lines, only
// those with fewer bits (0600, 0700, …), and a restore puts them back; run
// as root, it gives what it writes the owner of the file it replaces, or
// of the workdir.
//
// Each snapshot is a root commit on its own ref, refs/snapshots/<n>, whose
// message records its number, trigger, residency seq, time, parent (the
// newest snapshot when it was taken), the counts of files added, modified
// and deleted against the parent, the skipped files and the mode lines. The parent is
// metadata, not a git parent, so retention drops the oldest snapshots by
// deleting their refs, without rewriting (and renaming) the ones it keeps.
//
// # Snapshots from what changed
//
// A Take that re-adds the whole tree costs an lstat of every file twice
// (the size walk, then git add -A), however little changed. The workdir
// watcher knows what changed: once it follows the tree (Follow, when its
// watches are in place), each of its summaries either names every path
// that changed (NoteChanged: Summary.Changed, which also holds ignored
// and temporary files, mode changes and directories whose .git came or
// went) or says it cannot vouch (NoteUnknown: lost events, a directory it
// could not watch, ignore rules git does not read). A Take with vouched
// paths walks those paths only (a changed directory whole) and stages
// them in process (fast.go): the files there that git add -A would add
// (those the newest snapshot holds, and new ones the ignore rules leave
// in, asked of a long-lived git check-ignore) are read, hashed and
// written into one pack of the Take, the trees on the way up are written
// anew into it (the pack is put in place before the ref),
// and the changes and their line counts come from the same pass; no git
// process starts (looseobj.go, gitpipe.go, linecount.go). Everything else
// is the newest snapshot's tree, and the last full walk's findings
// (sizes, modes, nested repositories, odd names) are kept for the next
// Take. The private index is left behind and brought up to date
// (read-tree --reset, which keeps the stat data of unchanged files)
// before the next full add. The whole tree is added again at the first
// Take after Open or Follow, after NoteUnknown, when a .gitignore changed
// or appeared (what the rules cover is decided anew), past
// maxChangedPaths paths, and for a restore's safety snapshot. The test
// TestIncrementalEqualsFullAdd (and TestIncrementalFromTheWatcher, with
// the real watcher) takes, after each round of random edits, a snapshot
// from what changed and a full one of the same tree in a second store,
// and requires the same tree, skipped files, permissions and line counts.
//
// A full add runs with core.bigFileThreshold=1 for that run only (when
// it adds at most maxStreamedFiles new files): git streams every file
// into one pack (its bulk check-in) instead of writing a loose object
// file each.
//
// # The first snapshot
//
// The first Take of a new store adds every file, and git add -A spends
// most of that on creating a loose object file per file (or, streaming
// them into one pack, on a lookup that is quadratic in git 2.39). On
// Linux the store writes it in process instead (first.go): the files
// `git ls-files -o --exclude-standard` lists under the store's rules (so
// exactly those git add -A would add) are read inside the workdir
// (os.Root), their blobs and the trees written into one new pack
// (packwrite.go: git's pack and index version 2, no deltas, fsynced as
// git fsyncs packs) and the private index written with each file's stat
// data as git would write it (indexfile.go), so the next full add reads
// again only the files that changed. Anything git would decide otherwise
// (a directory it lists whole, a path that changed kind while read, a
// file too large to read in process) leaves the Take to git add.
// TestFirstEqualsGitAdd compares the tree, the skipped files, the
// permissions and the index (stat data included, as `git ls-files
// --debug` shows it) with git add's on trees of random edits.
//
// A snapshot from what changed covers the changes the watcher reported
// before the Take began; a change still in the watcher's quiet period is
// in the next one (the policy's snapshots follow the watcher's summaries,
// so a burst's snapshot has the burst).
//
// # Crashes
//
// A Take killed at any point leaves at worst objects no ref reaches and a
// lock file: List reads the refs only, so no half snapshot is listed, and
// lock files are removed at Open and by the first Take after a git run of
// the store failed (the store is the daemon's alone, and no git of the
// store runs while the writer lock is held). The commit and its ref are
// written in process the way git writes them (the commit is byte for byte
// what commit-tree makes; the ref is a lock file created exclusively,
// fsynced and renamed into place, never over a ref that exists). On Linux
// a git run dies with the daemon (a parent-death signal), so a lock is
// never taken away from a git still running. GC deletes the unreachable
// objects. Refs are fsynced, and so are packs: the one pack of a Take from
// what changed, a first snapshot's, git's own (its default). The loose
// objects a full add leaves (its commit, what git add writes loose) are
// left to the file system's writeback, as git leaves them (fsyncing each
// object tripled a Take on this project's disk). A power loss in the
// seconds after such a snapshot can therefore damage its objects, as it
// can a plain git commit's; Take then fails with git's message and the
// agent shows degraded ["snapshots"] until the store is moved away.
// TestSIGKILLDuringSnapshot kills a Take at each point: in git add, before
// write-tree, and in process after the blobs, the trees, the commit and
// the ref's lock file; TestSIGKILLDuringFirstSnapshot kills a first
// snapshot with its pack half written (a temporary file, which the
// collector removes) and with the pack in place before the index.
//
// # Restores
//
// A restore writes and removes the files itself, through directory
// handles opened beneath the workdir without following any symbolic link
// (internal/beneath, workTree): a directory its owner swaps for a link
// while a root daemon restores never leads the restore outside (the
// handle keeps the directory it checked; a link met on the way is not
// followed, and the path is refused and named). It acts only in the
// directory Open found at the workdir's path: a path repointed since is
// refused with both directories named (workdir.go). It is journaled
// (journal.go): one a kill, a crash or a full disk interrupts is finished
// at the next Open and reported (Interrupted) with its safety snapshot.
// TestRestoreRacingSymlinkSwaps races restores as root against a swapping
// user for 30 s; TestSIGKILLDuringRestore kills one at each point.
//
// # Concurrency and cost
//
// Take and Restore run one at a time (a mutex); List, Show and Diff run
// beside them. The store collects its own garbage in the background (a
// goroutine Close stops) as soon as it passes KeepBytes or KeepCount: a
// GC holds the mutex only to read and delete refs, and packs and prunes
// beside Takes the way git gc runs beside git commands (objects newer than
// the ref deletion, or freshened since, are kept; a Take writes every
// object it needs anew, which freshens it). A full Take costs a walk of
// the workdir (lstat of each file outside the ignored directories, shared
// by a few goroutines), three git runs (add -A, write-tree, diff-tree)
// and the commit in process; a Take from what changed walks the changed
// paths, reads the files there and the trees on their way up, and starts
// no git. docs/PERFORMANCE.md compares both with git add -A && git commit.
package snapshot
