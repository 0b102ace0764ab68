package config

import (
	"fmt"
	"os/user"
	"strconv"
)

// accounts resolves the users or groups an agent names (its users or
// groups key) to numeric ids with lookup, failing each entry that is
// empty, named twice, or resolves to no account on this machine.
func (c *checker) accounts(key string, names []string, lookup func(string) (uint32, error)) []uint32 {
	if len(names) == 0 {
		return nil
	}
	ids := make([]uint32, 0, len(names))
	seen := map[string]bool{}
	for i, n := range names {
		k := indexKey(key, i)
		switch {
		case n == "":
			c.fail(k, "must not be empty")
			continue
		case seen[n]:
			c.failGot(k, "is named twice", n)
			continue
		}
		seen[n] = true
		id, err := lookup(n)
		if err != nil {
			c.failGot(k, err.Error(), n)
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

// lookupUID is a user name's uid, or a numeric uid as it is.
func lookupUID(name string) (uint32, error) {
	if id, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(id), nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, fmt.Errorf("names no user on this machine")
	}
	id, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("names a user without a numeric uid (%s)", u.Uid)
	}
	return uint32(id), nil
}

// lookupGID is a group name's gid, or a numeric gid as it is.
func lookupGID(name string) (uint32, error) {
	if id, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(id), nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("names no group on this machine")
	}
	id, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("names a group without a numeric gid (%s)", g.Gid)
	}
	return uint32(id), nil
}
