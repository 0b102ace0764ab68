// Package take takes the snapshots of a store: the workdir's files as git
// add -A would stage them, written into the store (package repo) and
// named by a new ref, from the whole tree or from what the watcher says
// changed, the first one of a store in process.
//
// # What a snapshot holds
//
// The files git add -A sees with the workdir's .gitignore files, minus
// [watch] ignore and ignore_dirs (snapshot.Options) and the store and
// state directories (the store's info/exclude), minus regular files over
// the size limit and nested repositories. Those are found by a walk with
// lstat before git runs (so git never reads them), written to the store's
// core.excludesFile, dropped from the index if they were tracked before
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
// process starts (objects.go, repo.Pipes, linecount.go). Everything else
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
// (repo.PackWriter: git's pack and index version 2, no deltas, fsynced as
// git fsyncs packs) and the private index written with each file's stat
// data as git would write it (repo.IndexWriter), so the next full add reads
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
// # Cost
//
// A full Take costs a walk of the workdir (lstat of each file outside the
// ignored directories, shared by a few goroutines), three git runs (add
// -A, write-tree, diff-tree) and the commit in process; a Take from what
// changed walks the changed paths, reads the files there and the trees on
// their way up, and starts no git. docs/PERFORMANCE.md compares both with
// git add -A && git commit.
package take
