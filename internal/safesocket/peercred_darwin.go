package safesocket

import "golang.org/x/sys/unix"

func peerCred(fd int) (Cred, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Cred{}, err
	}
	pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	if err != nil {
		return Cred{}, err
	}
	c := Cred{PID: pid, UID: x.Uid}
	if x.Ngroups > 0 {
		c.GID = x.Groups[0]
	}
	return c, nil
}
