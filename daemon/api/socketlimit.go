package api

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/safesocket"
)

// SocketLimits bound the connections the Unix socket holds open at once.
// A shared socket (socket_mode 0660) is reached by every member of the
// daemon's group, admitted to an agent or not, before anything they say
// is read: without a bound, idle connections from one of them could take
// every descriptor the daemon has, and then its own files (the state's
// writes, snapshots, git's pipes) and every other user's calls would fail.
type SocketLimits struct {
	// Total is the most connections open at once, all users together.
	Total int
	// PerUser is the most one user other than root and the daemon's own
	// may hold; together such users hold at most Total-PerUser, so root
	// and the daemon's user (the operator, the service's own tools) always
	// find room.
	PerUser int
}

// unknownPeer is the bucket of connections whose peer could not be read.
const unknownPeer = math.MaxUint32

// SocketListener accepts connections from l (the Unix socket) within lim:
// a connection over its user's bound, or over the total, is answered 503
// TOO_MANY_CONNECTIONS and closed at once, so it holds a descriptor only
// for that moment and never makes Accept wait (a flood from one user
// never keeps another's connection in the backlog). The refusals are
// logged, at most once a minute per user. Each connection accepted
// carries its peer's credentials (SO_PEERCRED, read once), which
// PeerContext uses.
func SocketListener(l net.Listener, lim SocketLimits, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lim.PerUser = max(1, min(lim.PerUser, lim.Total))
	return &socketListener{Listener: l, lim: lim, log: log, self: uint32(os.Geteuid()),
		open: map[uint32]int{}, warned: map[uint32]refusalNote{}}
}

type socketListener struct {
	net.Listener
	lim  SocketLimits
	log  *slog.Logger
	self uint32 // the daemon's own user

	mu     sync.Mutex
	open   map[uint32]int // connections open, by the peer's uid
	total  int            // all of them
	others int            // those of users other than root and self
	warned map[uint32]refusalNote
}

// refusalNote is when a user's refusals were last logged, and how many
// came since.
type refusalNote struct {
	at      time.Time
	refused int
}

// trusted reports whether uid is root or the daemon's own user, who are
// bounded by the total alone.
func (l *socketListener) trusted(uid uint32) bool { return uid == 0 || uid == l.self }

func (l *socketListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, credErr := safesocket.PeerCred(c)
		uid := cred.UID
		if credErr != nil {
			uid = unknownPeer
		}
		if l.take(uid) {
			return &socketConn{Conn: c, cred: cred, credErr: credErr, release: sync.OnceFunc(func() { l.give(uid) })}, nil
		}
		refuseConn(c, l.lim)
	}
}

// take counts a connection of uid in, or reports false when its bound is
// reached.
func (l *socketListener) take(uid uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	trusted := l.trusted(uid)
	ok := l.total < l.lim.Total
	if ok && !trusted {
		ok = l.open[uid] < l.lim.PerUser && l.others < l.lim.Total-l.lim.PerUser
	}
	if !ok {
		l.noteRefusedLocked(uid)
		return false
	}
	l.open[uid]++
	l.total++
	if !trusted {
		l.others++
	}
	return true
}

// give counts a connection of uid out.
func (l *socketListener) give(uid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[uid]--; l.open[uid] <= 0 {
		delete(l.open, uid)
	}
	l.total--
	if !l.trusted(uid) {
		l.others--
	}
}

// noteRefusedLocked logs a refusal of uid's connection: the first at once,
// then at most one line a minute with the count since.
func (l *socketListener) noteRefusedLocked(uid uint32) {
	n := l.warned[uid]
	n.refused++
	if now := time.Now(); now.Sub(n.at) >= time.Minute {
		who := "uid " + strconv.FormatUint(uint64(uid), 10)
		if uid == unknownPeer {
			who = "a peer whose credentials could not be read"
		}
		l.log.Warn("socket connections refused: at the bound of what one user, or all, may hold open",
			"peer", who, "holds", l.open[uid], "per_user", l.lim.PerUser, "open", l.total, "total", l.lim.Total, "refused", n.refused)
		n = refusalNote{at: now}
	}
	if len(l.warned) > 4096 { // a bound on what is remembered of who
		clear(l.warned)
	}
	l.warned[uid] = n
}

// refuseConn answers a connection over the bound 503 TOO_MANY_CONNECTIONS
// without reading it, and closes it. The answer fits the socket's buffer;
// the deadline makes sure a full one never holds the accept loop.
func refuseConn(c net.Conn, lim SocketLimits) {
	rw := &rawAnswer{header: http.Header{"Retry-After": {"5"}}}
	writeError(rw, capsule.Refuse(capsule.CodeTooManyConnections, "",
		"too many connections open on the daemon's socket (at most %d from one user, %d in all): close idle ones and retry", lim.PerUser, lim.Total))
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	writeRaw(c, rw)
	c.Close()
}

// socketConn is a connection the socket accepted: it carries its peer's
// credentials and gives its place back when closed.
type socketConn struct {
	net.Conn
	cred    safesocket.Cred
	credErr error
	release func()
}

func (c *socketConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// peerConn is a connection that knows its peer already (socketConn).
type peerConn interface {
	peerCred() (safesocket.Cred, error)
}

func (c *socketConn) peerCred() (safesocket.Cred, error) { return c.cred, c.credErr }

// unixConn is the Unix socket connection under c (a socketConn's, under
// the clock's), nil when c is none.
func unixConn(c net.Conn) *net.UnixConn {
	c = unclocked(c)
	if sc, ok := c.(*socketConn); ok {
		c = sc.Conn
	}
	uc, _ := c.(*net.UnixConn)
	return uc
}

// rawAnswer is an http.ResponseWriter that keeps the answer, for a
// connection net/http does not serve (refused, or taken over).
type rawAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *rawAnswer) Header() http.Header         { return r.header }
func (r *rawAnswer) WriteHeader(status int)      { r.status = status }
func (r *rawAnswer) Write(p []byte) (int, error) { return r.body.Write(p) }

// writeRaw writes the answer rw kept on c as HTTP/1.1, asking to close.
func writeRaw(c net.Conn, rw *rawAnswer) {
	resp := &http.Response{StatusCode: rw.status, ProtoMajor: 1, ProtoMinor: 1, Header: rw.header,
		Body: io.NopCloser(&rw.body), ContentLength: int64(rw.body.Len()), Close: true}
	resp.Write(c)
}
