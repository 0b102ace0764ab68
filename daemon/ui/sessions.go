package ui

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// Lifetimes of what the door hands out. A login URL is meant to be opened
// at once by the person who asked for it: it lives a minute and opens one
// session. A session ends after SessionTTL whatever happens, sooner at
// Revoke.
const (
	TicketTTL  = time.Minute
	SessionTTL = 12 * time.Hour
	// maxTickets and maxSessions bound what callers of the socket can make
	// the daemon hold: past them the oldest give way.
	maxTickets  = 64
	maxSessions = 256
)

// Identity is who a session acts as: the user (and primary group) the
// socket's kernel named when the login URL was asked for.
type Identity struct {
	UID, GID uint32
}

// session is one browser's login.
type session struct {
	id      Identity
	csrf    string
	expires time.Time
	made    time.Time
}

// ticket is a one-time login URL's secret, not yet used.
type ticket struct {
	id      Identity
	expires time.Time
}

// sessions holds the live tickets and sessions, by the SHA-256 of their
// secret: what is held in memory is not what a browser sends, so a memory
// dump or a log of the map does not hand out a session.
type sessions struct {
	mu       sync.Mutex
	tickets  map[[32]byte]ticket
	sessions map[[32]byte]*session
	ttl      time.Duration
	now      func() time.Time
}

func newSessions(ttl time.Duration) *sessions {
	if ttl <= 0 {
		ttl = SessionTTL
	}
	return &sessions{tickets: map[[32]byte]ticket{}, sessions: map[[32]byte]*session{}, ttl: ttl, now: time.Now}
}

// secret is 32 random bytes, URL-safe.
func secret() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hashOf(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// newTicket makes a one-time login secret for id.
func (s *sessions) newTicket(id Identity) string {
	t := secret()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweepLocked(now)
	if len(s.tickets) >= maxTickets {
		var oldest [32]byte
		first := true
		for k, v := range s.tickets {
			if first || v.expires.Before(s.tickets[oldest].expires) {
				oldest, first = k, false
			}
		}
		delete(s.tickets, oldest)
	}
	s.tickets[hashOf(t)] = ticket{id: id, expires: now.Add(TicketTTL)}
	return t
}

// redeem uses a ticket up (whether or not it is still valid) and, when it
// was valid, opens a session for its user: the session's cookie secret
// and CSRF token.
func (s *sessions) redeem(t string) (cookie string, sess session, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	h := hashOf(t)
	tk, found := s.tickets[h]
	delete(s.tickets, h)
	if !found || now.After(tk.expires) {
		return "", session{}, false
	}
	s.sweepLocked(now)
	if len(s.sessions) >= maxSessions {
		var oldest [32]byte
		var at time.Time
		for k, v := range s.sessions {
			if at.IsZero() || v.made.Before(at) {
				oldest, at = k, v.made
			}
		}
		delete(s.sessions, oldest)
	}
	cookie = secret()
	ns := &session{id: tk.id, csrf: secret(), expires: now.Add(s.ttl), made: now}
	s.sessions[hashOf(cookie)] = ns
	return cookie, *ns, true
}

// lookup is the live session a cookie names.
func (s *sessions) lookup(cookie string) (session, bool) {
	if cookie == "" {
		return session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := hashOf(cookie)
	ss, ok := s.sessions[h]
	if !ok {
		return session{}, false
	}
	if s.now().After(ss.expires) {
		delete(s.sessions, h)
		return session{}, false
	}
	return *ss, true
}

// revoke ends the sessions and unused tickets of uid, or every one when
// all is set; it says how many sessions ended.
func (s *sessions) revoke(uid uint32, all bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.sessions {
		if all || v.id.UID == uid {
			delete(s.sessions, k)
			n++
		}
	}
	for k, v := range s.tickets {
		if all || v.id.UID == uid {
			delete(s.tickets, k)
		}
	}
	return n
}

// sweepLocked drops what has expired.
func (s *sessions) sweepLocked(now time.Time) {
	for k, v := range s.tickets {
		if now.After(v.expires) {
			delete(s.tickets, k)
		}
	}
	for k, v := range s.sessions {
		if now.After(v.expires) {
			delete(s.sessions, k)
		}
	}
}

// csrfMatches compares a form's or header's token with the session's in
// constant time.
func csrfMatches(sess session, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(sess.csrf), []byte(got)) == 1
}

// ticketUser is the user a live ticket was made for, without using it.
func (s *sessions) ticketUser(t string) (Identity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk, ok := s.tickets[hashOf(t)]
	return tk.id, ok && !s.now().After(tk.expires)
}

// end ends the session a cookie names.
func (s *sessions) end(cookie string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, hashOf(cookie))
}
