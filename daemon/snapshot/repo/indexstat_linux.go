package repo

import (
	"io/fs"
	"syscall"
)

// IndexStatKnown: this system gives StatOf what an index entry holds.
const IndexStatKnown = true

// StatOf is the index stat data of fi (from an lstat or fstat); ok is
// false where the system does not give it, and git must stage.
func StatOf(fi fs.FileInfo) (IndexStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return IndexStat{}, false
	}
	return IndexStat{
		ctimeS: uint32(st.Ctim.Sec), ctimeNS: uint32(st.Ctim.Nsec),
		mtimeS: uint32(st.Mtim.Sec), mtimeNS: uint32(st.Mtim.Nsec),
		dev: uint32(st.Dev), ino: uint32(st.Ino), uid: st.Uid, gid: st.Gid,
		size: uint32(st.Size),
	}, true
}
