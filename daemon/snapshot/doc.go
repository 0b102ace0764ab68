// Package snapshot keeps a shadow store of an agent's work tree: content
// addressed snapshots that an automatic checkpoint takes and a restore
// brings back, without ever touching the agent's own repository.
//
// A Store composes the store's parts, each a package of its own beside
// this one, with the answers the daemon, the API and the owner's worker
// see (answers.go):
//
//	repo/      the store on disk: a bare git repository, its objects, packs, index and refs, the git driver (the format in its doc.go)
//	workdir/   the agent's work tree as the store holds it: the directory found at Open, wherever its path leads later
//	take/      taking snapshots: the whole tree by git add, what changed and a first snapshot in process
//	verify/    a snapshot's whole tree checked before a restore writes any of it
//	gc/        retention and garbage collection, in the background
//	restore/   restores: through handles beneath the workdir, journaled, a restore interrupted finished at the next Open
//	transfer/  snapshots between machines: objects by hash, a snapshot imported only once whole
//
// # Concurrency
//
// Take and Restore run one at a time (the writer lock, repo.WriteLock);
// List, Show and Diff run beside them. The store collects its own garbage
// in the background (a goroutine Close stops) as soon as it passes
// KeepBytes or KeepCount: a GC holds the writer lock only to read and
// delete refs, and packs and prunes beside Takes the way git gc runs
// beside git commands (objects newer than the ref deletion, or freshened
// since, are kept; a Take writes every object it needs anew, which
// freshens it).
package snapshot
