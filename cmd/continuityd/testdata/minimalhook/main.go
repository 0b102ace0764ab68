// Command minimalhook is the least a hook process can do, the floor
// BenchmarkHookWallTime puts `continuityd hook` beside: a Go program that
// reads the hook's payload from stdin and asks the daemon's socket
// GET /healthz with net/http, as the hook does its one call. It is built
// by the benchmark only (testdata is outside ./...).
package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
)

func main() {
	if _, err := io.ReadAll(os.Stdin); err != nil {
		os.Exit(1)
	}
	socket := os.Getenv("CONTINUITYD_SOCKET")
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	resp, err := c.Get("http://d/healthz")
	if err != nil {
		os.Exit(1)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		os.Exit(1)
	}
}
