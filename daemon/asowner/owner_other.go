//go:build !linux

package asowner

// For reports that no worker is needed: workers need Linux (a
// parent-death signal ties them to the daemon), so elsewhere everything
// happens in process.
func For(workdir string) (o Owner, need bool, err error) { return Owner{}, false, nil }

// Lookup is uid with NoGroup.
func Lookup(uid uint32) Owner { return Owner{UID: uid, GID: NoGroup} }
