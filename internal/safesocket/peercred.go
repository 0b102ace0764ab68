package safesocket

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// Cred is who is at the other end of a Unix socket connection, as the
// kernel recorded it when the connection was made: for a server, the
// client that connected; for a client, the process that listens. Unlike
// anything said over the connection, it cannot be forged by the peer.
type Cred struct {
	PID int
	UID uint32
	GID uint32
}

// ErrNoPeerCred: the platform does not tell who is at the other end of a
// Unix socket connection.
var ErrNoPeerCred = errors.New("this platform does not give a Unix socket's peer credentials")

// PeerCred returns the credentials of the peer of c, which must be a Unix
// socket connection (SO_PEERCRED on Linux, LOCAL_PEERCRED and
// LOCAL_PEERPID on macOS).
func PeerCred(c net.Conn) (Cred, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Cred{}, fmt.Errorf("peer credentials: %T is not a socket connection", c)
	}
	if _, ok := c.(*net.UnixConn); !ok {
		return Cred{}, fmt.Errorf("peer credentials: %T is not a Unix socket connection", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred Cred
	var credErr error
	if err := raw.Control(func(fd uintptr) { cred, credErr = peerCred(int(fd)) }); err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", credErr)
	}
	return cred, nil
}
