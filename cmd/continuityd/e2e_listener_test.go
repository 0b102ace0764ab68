//go:build linux

package main

import (
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestListenerBoundedBeforeAuthentication: anyone on the machine may
// connect to the loopback listener, token or not. 3,000 connections that
// send an unfinished 1 MB header and 2,000 that send nothing, against a
// daemon whose open-file limit is 2,048, leave the Unix socket answering a
// checkpoint and the daemon's memory bounded: the listener takes a capped
// number of connections, sized below the file limit, and a header past
// 16 KiB is refused.
func TestListenerBoundedBeforeAuthentication(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit (util-linux) sets the daemon's file limit")
	}
	w, addr := listenWorkspace(t)
	p := startProcWith(t, func(c *exec.Cmd) {
		c.Path, _ = exec.LookPath("prlimit")
		c.Args = append([]string{"prlimit", "--nofile=2048:2048", "--", binary}, c.Args[1:]...)
	}, w.socket, nil, "run", "--config", w.config)

	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	// One copy of the header, read by every writer: converting it for each
	// of 3,000 writes costs the race detector's run ~30 s of CPU.
	header := []byte("POST /v1/continuity/checkpoint HTTP/1.1\r\nHost: " + addr + "\r\nX-Pad: " + strings.Repeat("a", 1<<20))
	var wg sync.WaitGroup
	dialed := 0
	for i := range 5000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Bounds a connection the listen backlog cannot take; the
			// dial's failing is no failure of the test.
			c, err := net.DialTimeout("tcp", addr, 20*time.Second)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			dialed++
			mu.Unlock()
			if i < 3000 {
				c.SetWriteDeadline(time.Now().Add(30 * time.Second))
				c.Write(header)
			}
		}()
	}
	wg.Wait()
	if dialed < 3000 {
		t.Logf("%d of 5000 connections dialed", dialed)
	}
	// Those connections still open, the Unix socket answers.
	c := p.client()
	code, ans, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "through the crowd"})
	c.CloseIdleConnections()
	if err != nil || code != 200 {
		t.Fatalf("checkpoint on the Unix socket with the listener flooded: %d %v %v\n%s", code, ans, err, p.stderr)
	}
	if rss := peakRSS(t, p); rss > memoryBound {
		t.Errorf("peak RSS %d MB with the listener flooded", rss>>20)
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM: %s", code, p.stderr)
	}
}
