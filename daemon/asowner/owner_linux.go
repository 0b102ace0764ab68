package asowner

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// For returns the owner of workdir when the daemon must act as that owner
// there: it runs as root and the workdir belongs to another user. need is
// false when the daemon runs as the owner (or as any user but root): then
// everything happens in process, as it always did.
func For(workdir string) (o Owner, need bool, err error) {
	if os.Geteuid() != 0 || workdir == "" {
		return Owner{}, false, nil
	}
	fi, err := os.Stat(workdir)
	if err != nil {
		return Owner{}, false, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Owner{}, false, fmt.Errorf("asowner: no owner known for %s", workdir)
	}
	if st.Uid == 0 {
		return Owner{}, false, nil
	}
	return Lookup(st.Uid), true, nil
}

// Lookup is uid with its primary gid from the user database, or NoGroup
// when the database does not know uid.
func Lookup(uid uint32) Owner {
	o := Owner{UID: uid, GID: NoGroup}
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		if g, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
			o.GID = uint32(g)
		}
	}
	return o
}

// Credential is the owner's: uid, primary gid and no supplementary
// groups (an empty list, which clears the daemon's).
func (o Owner) Credential() *syscall.Credential {
	return &syscall.Credential{Uid: o.UID, Gid: o.GID, Groups: []uint32{}}
}
