package api

import (
	"net"
	"sync"
)

// LimitListener accepts at most max connections at once from l: past that,
// Accept waits for one to close, and new connections wait in the kernel's
// backlog, holding none of the daemon's memory or open files. It bounds the
// loopback listener, which anyone on the machine may connect to before
// authenticating, so that a crowd of connections can neither exhaust the
// daemon's memory nor its open-file limit (the Unix socket, the agents'
// files) whatever they send.
func LimitListener(l net.Listener, max int) net.Listener {
	return &limitListener{Listener: l, slots: make(chan struct{}, max), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{} // one per open connection
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, when closed.
type limitConn struct {
	net.Conn
	release   func()
	closeOnce sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(c.release)
	return err
}
