// Package api is the local HTTP API: the routes of interface.md over the
// agents' operations (package agent), served on the Unix socket and, with
// the API token, on the optional loopback listener, plus /mcp, /metrics and
// the error shape {"error":{"code","message"}}. It holds no state of its own.
package api
