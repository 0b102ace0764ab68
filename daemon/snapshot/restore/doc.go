// Package restore brings a snapshot's files back into the workdir, after
// a safety snapshot of the tree as it is (package take), so that every
// restore can be undone; a snapshot whose tree does not check (package
// verify) is refused whole.
//
// # Handles beneath the workdir, and a journal
//
// A restore writes and removes the files itself, through directory
// handles opened beneath the workdir without following any symbolic link
// (internal/daemonside/beneath, workTree): a directory its owner swaps for a link
// while a root daemon restores never leads the restore outside (the
// handle keeps the directory it checked; a link met on the way is not
// followed, and the path is refused and named). It acts only in the
// directory Open found at the workdir's path: a path repointed since is
// refused with both directories named (package workdir). It is journaled
// (journal.go): one a kill, a crash or a full disk interrupts is finished
// at the next Open and reported (Interrupted) with its safety snapshot.
// TestRestoreRacingSymlinkSwaps races restores as root against a swapping
// user for 30 s; TestSIGKILLDuringRestore kills one at each point.
package restore
