// Package asowner runs what touches a user's tree with that user's rights
// when the daemon has more: a daemon running as root that serves a workdir
// another user owns would otherwise read, snapshot and restore that tree
// as root, and a bug or a hostile tree could then do what root can.
//
// # The model
//
// The daemon starts, on first need, one worker per owner: its own program
// run as `continuityd-daemon worker` with the owner's uid, the owner's
// primary gid (from the user database; 65534, "nogroup", for a uid that
// has none) and no supplementary groups, in a process group of its own,
// killed if the daemon dies (a parent-death signal), with an environment
// built from scratch (PATH and LC_ALL only: the daemon's may hold upstream
// tokens). Its stderr goes to the daemon's log, line by line, bounded and
// escaped. The daemon talks to it over two socket pairs it inherits:
//
//   - a stream socket carrying HTTP/2 without TLS (one connection,
//     multiplexing every call), over which the worker hosts the owner's
//     snapshot stores (package snapshot) and serves their operations;
//     Store is the daemon's side of one, with the methods of
//     *snapshot.Store, its wire format the JSON of the snapshot package's
//     own types;
//   - a SOCK_SEQPACKET socket over which the daemon asks the worker to
//     open a file for reading (safefile's careful open: no FIFO waited
//     on, no device read, links followed only where asked) and the worker
//     hands the descriptor back (SCM_RIGHTS): the handoff files,
//     transcripts, a repository's .git files and configuration, and the
//     ignore files the workdir's watcher reads are read through it
//     (Worker.Opener), so a file the owner cannot read is never read for
//     them.
//
// Git on the agent's own repository (the work-lost checks, gitwatch's
// cat-file) runs as a child of the daemon with the owner's credentials
// (Owner.Git, for internal/gittool).
//
// Everything the worker answers is untrusted: the owner may ptrace their
// own worker. Every answer is read through a size bound and decoded
// strictly, objects are checked against their hashes, descriptors are
// checked for what they are, and garbage is an error naming the worker.
// A worker that dies fails the calls in flight with an error saying so;
// the next call starts a new one (after a backoff when it keeps dying,
// and the log says so) and each Store opens its store again in it.
// Workers end with the daemon (Pool.Close), or once no agent acts as
// their owner any more (Pool.Retain, at a reload), and each is waited for.
//
// When the daemon runs as the workdir's owner (the usual user daemon),
// none of this runs: For reports that no worker is needed and the daemon
// uses *snapshot.Store and its own opens in process, as before.
package asowner
