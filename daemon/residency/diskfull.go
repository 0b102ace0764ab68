package residency

import (
	"errors"
	"strings"
	"syscall"

	"github.com/continuityd/continuityd/capsule"
)

// commitError is the refusal every write of a batch that could not be made
// durable gets. A full disk (or an exhausted quota) is the caller's to act
// on, not a bug: 507 DISK_FULL says so and names the directory; anything
// else is 500 INTERNAL. Either way nothing of the batch was kept.
func commitError(dir string, err error) *capsule.Error {
	if diskFull(err) {
		return capsule.Refuse(capsule.CodeDiskFull, "",
			"the disk holding the state directory %s is full (%v); nothing was saved. "+
				"Free space on that disk (or raise the quota), then retry the write", dir, err)
	}
	return capsule.Refuse(capsule.CodeInternal, "",
		"the write could not be stored: %v; nothing was saved", err)
}

// diskFull reports whether err says the file system is out of space or the
// user out of quota. bbolt formats some of its errors (growing the file)
// with %s, which drops the errno from the chain: the text is checked too.
func diskFull(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}
