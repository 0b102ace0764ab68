package safesocket

import "golang.org/x/sys/unix"

func peerCred(fd int) (Cred, error) {
	u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Cred{}, err
	}
	return Cred{PID: int(u.Pid), UID: u.Uid, GID: u.Gid}, nil
}
