//go:build linux || darwin

package safesocket

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestPeerCredBothEnds: each end of a real Unix socket connection sees
// this process (the test is both), as the kernel says.
func TestPeerCredBothEnds(t *testing.T) {
	l, err := net.Listen("unix", filepath.Join(shortDir(t), "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer server.Close()
	want := Cred{PID: os.Getpid(), UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	for name, c := range map[string]net.Conn{"client": client, "server": server} {
		got, err := PeerCred(c)
		if err != nil || got != want {
			t.Errorf("%s end: PeerCred = %+v, %v; want %+v", name, got, err, want)
		}
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	tc, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if _, err := PeerCred(tc); err == nil {
		t.Error("PeerCred of a TCP connection: no error")
	}
}
