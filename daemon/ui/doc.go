// Package ui is the local web page: server-rendered views over the local
// API's operations, served on a loopback listener only, behind a
// one-time login URL that sets a session cookie bound to the user who
// asked for it.
//
// The page has no API of its own. Each view calls the operations of
// package ops as its session's user, in process, through the API's own
// handler (Options.Calls): the request carries that user as the Unix
// socket carries a peer's credentials, so which agents the page shows, and
// what it may restore, is exactly what that user may do on the socket.
//
// Every request passes the door (door.go) before any view runs: the Host
// must be the listener's loopback address (DNS rebinding), an Origin must
// be the page's own, the session cookie must name a live session whose
// user is the one whose process opened the connection (Linux), and a POST
// must carry the session's CSRF token. Answers carry a strict
// Content-Security-Policy (no inline script or style), frame-ancestors
// 'none', nosniff and no referrer; none carries a token or a secret.
package ui
