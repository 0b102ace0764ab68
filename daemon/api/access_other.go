//go:build !unix

package api

// workdirOwner: files have no owning uid here.
func workdirOwner(string) (uint32, bool) { return 0, false }

// processGroups: no /proc here; the group database is asked instead.
func processGroups(int) ([]uint32, bool) { return nil, false }
