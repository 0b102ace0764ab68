package asowner

import (
	"strconv"

	"github.com/continuityd/continuityd/internal/gittool"
)

// Owner is the user a tree belongs to, and the credentials a worker for
// it runs with: the user's uid and primary gid, and no supplementary
// groups.
type Owner struct {
	UID uint32
	GID uint32
}

// NoGroup is the gid of a worker whose uid has no entry in the user
// database: "nogroup", the group with the least power.
const NoGroup = 65534

func (o Owner) String() string { return "uid " + strconv.FormatUint(uint64(o.UID), 10) }

// Git is the owner as git runs as them on their repository (the
// work-lost checks, gitwatch's cat-file): uid, primary gid, no
// supplementary groups.
func (o Owner) Git() *gittool.Credential { return &gittool.Credential{UID: o.UID, GID: o.GID} }
