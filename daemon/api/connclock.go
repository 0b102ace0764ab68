package api

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connClock keeps a server's connection Timeouts with one goroutine that
// looks at the open connections every tick, instead of net/http's
// per-request deadlines. Those arm, move and stop a runtime timer four or
// five times a request (the head's, the idle wait's, the answer's, the
// body's), which cost a resume about 2% as a client in another process
// sees it (docs/PERFORMANCE.md): timers wake the runtime's poller. Here a
// request only notes the time its limit ends; a deadline is put on the
// connection only once that time has passed, and it is the deadline
// net/http would have set, so what follows is what net/http does at its
// own timeouts: a request head or an idle wait past its limit fails its
// read and the connection closes; a body past its limit fails the body's
// read (the handler answers why); an answer past its limit fails its
// writes. A limit is kept to within a tick (a tenth of the shortest
// timeout, at most a second), and the goroutine sleeps while no
// connection is open.
type connClock struct {
	to   Timeouts
	tick time.Duration

	mu    sync.Mutex
	conns map[*clockedConn]struct{}
	woke  chan struct{} // buffered 1: the first connection came to an empty set

	passes atomic.Uint64 // the looks taken (tests wait for one past a limit)
}

func newConnClock(to Timeouts) *connClock {
	tick := min(to.Read, to.Idle, to.Write) / 10
	tick = min(max(tick, 50*time.Millisecond), time.Second)
	return &connClock{to: to, tick: tick, conns: map[*clockedConn]struct{}{}, woke: make(chan struct{}, 1)}
}

// What a connection is doing, for the limit its readBy and writeBy hold.
const (
	phaseHead   uint32 = iota // reading a request's head (a new connection's first): readBy
	phaseIdle                 // between requests, waiting for the next one's first byte: readBy
	phaseActive               // a request is served: its body by readBy, its answer by writeBy
	phaseGone                 // taken over or closed: no longer the clock's
)

// aLongTimeAgo is the deadline that fails a read or a write at once.
var aLongTimeAgo = time.Unix(1, 0)

// clockedConn is a connection the clock keeps. Its Read notes the first
// byte of a request that comes to an idle connection, which starts the
// head's limit, as net/http's own ReadHeaderTimeout does.
type clockedConn struct {
	net.Conn
	clock *connClock
	phase atomic.Uint32 // Read's fast path loads it without mu

	mu      sync.Mutex // owns the fields below, and putting a deadline on the connection
	readBy  time.Time  // the head, the idle wait, or the body must be in by then; zero: no limit
	writeBy time.Time  // the answer must be out by then; zero: no limit
}

func (c *clockedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.phase.Load() == phaseIdle {
		c.mu.Lock()
		if c.phase.Load() == phaseIdle {
			c.phase.Store(phaseHead)
			c.readBy = time.Now().Add(c.clock.to.Read)
		}
		c.mu.Unlock()
	}
	return n, err
}

// clockListener hands out its listener's connections as clockedConns.
type clockListener struct {
	net.Listener
	clock *connClock
}

func (l *clockListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &clockedConn{Conn: c, clock: l.clock}
	cc.readBy = time.Now().Add(l.clock.to.Read) // phaseHead: the first request's head
	l.clock.add(cc)
	return cc, nil
}

func (k *connClock) add(c *clockedConn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.conns[c] = struct{}{}
	if len(k.conns) == 1 {
		select {
		case k.woke <- struct{}{}:
		default:
		}
	}
}

func (k *connClock) remove(c *clockedConn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.conns, c)
}

// connState is the server's http.Server.ConnState: net/http says when a
// request's head has been read (active: the answer's limit starts) and
// when the answer is done (idle: the idle limit starts).
func (k *connClock) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*clockedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateActive:
		now := time.Now()
		c.mu.Lock()
		c.phase.Store(phaseActive)
		c.readBy, c.writeBy = time.Time{}, now.Add(k.to.Write)
		c.mu.Unlock()
	case http.StateIdle:
		now := time.Now()
		c.mu.Lock()
		c.phase.Store(phaseIdle)
		c.readBy, c.writeBy = now.Add(k.to.Idle), time.Time{}
		c.mu.Unlock()
	case http.StateHijacked, http.StateClosed:
		c.mu.Lock()
		c.phase.Store(phaseGone)
		c.mu.Unlock()
		k.remove(c)
	}
}

// bodyBy starts the limit of the request's body.
func (c *clockedConn) bodyBy(t time.Time) {
	c.mu.Lock()
	if c.phase.Load() == phaseActive {
		c.readBy = t
	}
	c.mu.Unlock()
}

// bodyIn lifts the body's limit once the body has been read to its end, so
// the rest of the request (a long poll, a sync checkpoint) is not cut by it.
func (c *clockedConn) bodyIn() {
	c.mu.Lock()
	if c.phase.Load() == phaseActive {
		c.readBy = time.Time{}
	}
	c.mu.Unlock()
}

// answerWithin gives the answer d from now (0: no limit), and takes back a
// deadline the clock already put on the connection's writes.
func (c *clockedConn) answerWithin(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase.Load() != phaseActive {
		return
	}
	if d > 0 {
		c.writeBy = time.Now().Add(d)
	} else {
		c.writeBy = time.Time{}
	}
	c.Conn.SetWriteDeadline(time.Time{})
}

// run looks at the connections every tick until stop is closed, and sleeps
// while there are none.
func (k *connClock) run(stop <-chan struct{}) {
	t := time.NewTimer(k.tick)
	defer t.Stop()
	for {
		k.mu.Lock()
		empty := len(k.conns) == 0
		k.mu.Unlock()
		if empty {
			select {
			case <-k.woke:
			case <-stop:
				return
			}
		}
		t.Reset(k.tick)
		select {
		case <-t.C:
		case <-stop:
			return
		}
		k.expire(time.Now())
	}
}

// expire puts a deadline in the past on each connection whose limit has
// passed. It does so again on every tick while the limit stays passed:
// net/http clears the read deadline as a request's head begins, which may
// come just after the clock put one.
func (k *connClock) expire(now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for c := range k.conns {
		c.mu.Lock()
		if c.phase.Load() != phaseGone {
			if !c.readBy.IsZero() && now.After(c.readBy) {
				c.Conn.SetReadDeadline(aLongTimeAgo)
			}
			if !c.writeBy.IsZero() && now.After(c.writeBy) {
				c.Conn.SetWriteDeadline(aLongTimeAgo)
			}
		}
		c.mu.Unlock()
	}
	k.passes.Add(1)
}

// clockKey is the context key of a request's clockedConn.
type clockKey struct{}

// connOf returns the clocked connection a request came on; nil for a
// request that came on none (the page's and /mcp's in-process calls).
func connOf(ctx context.Context) *clockedConn {
	c, _ := ctx.Value(clockKey{}).(*clockedConn)
	return c
}

// unclocked is the connection under c when the clock wraps it.
func unclocked(c net.Conn) net.Conn {
	if cc, ok := c.(*clockedConn); ok {
		return cc.Conn
	}
	return c
}
