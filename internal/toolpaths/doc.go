// Package toolpaths reads which files an agent's tool call names: the
// paths an apply_patch input changes, which tools edit a file (and in which
// field) and which run a shell, and the shape check every claimed path
// passes (untrusted text: no control characters, bounded). The hook client
// (internal/hook), the transcript reader and the attribution ledger share
// it.
package toolpaths
