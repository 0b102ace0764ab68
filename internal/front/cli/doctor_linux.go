package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// inotify: the kernel's limits on what one user may watch. The daemon
// watches every directory of each workdir; past the limit a part of the
// tree goes unwatched (status says which).
func (d *doctor) inotify() {
	read := func(name string) int {
		b, err := os.ReadFile("/proc/sys/fs/inotify/" + name)
		if err != nil {
			return -1
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return -1
		}
		return n
	}
	watches, instances := read("max_user_watches"), read("max_user_instances")
	if watches < 0 || instances < 0 {
		d.add("inotify", checkSkip, "/proc/sys/fs/inotify cannot be read", "")
		return
	}
	detail := fmt.Sprintf("max_user_watches %d, max_user_instances %d", watches, instances)
	var low []string
	if watches < 65536 {
		low = append(low, "fs.inotify.max_user_watches=524288")
	}
	if instances < 128 {
		low = append(low, "fs.inotify.max_user_instances=512")
	}
	if len(low) > 0 {
		d.add("inotify", checkWarn, detail+": low for large workdirs (one watch a directory)",
			fmt.Sprintf("sudo sysctl -w %s, and the same lines in /etc/sysctl.d/90-continuityd.conf", strings.Join(low, " ")))
		return
	}
	d.add("inotify", checkOK, detail, "")
}
