package daemon

import "testing"

// The open-file limit is shared out so that the doors never take what the
// daemon needs for its own files: at the unit's 65536 the README's numbers,
// and at any limit the socket and the loopback listener together leave a
// quarter of it (and the stdio sessions' descriptors) free.
func TestDoorBudget(t *testing.T) {
	sock, loop := doorBudget(65536, 256)
	if sock.Total != 4096 || sock.PerUser != 512 || loop != 1024 {
		t.Errorf("at 65536: socket %+v, loopback %d; the README says 4096, 512 per user, 1024", sock, loop)
	}
	if sock, loop := doorBudget(0, 256); sock.Total != 4096 || loop != 1024 {
		t.Errorf("unknown limit: socket %+v, loopback %d", sock, loop)
	}
	for _, nofile := range []int{1024, 2048, 4096, 20000, 65536, 1 << 20} {
		sock, loop := doorBudget(nofile, 256)
		own := nofile - sock.Total - loop
		if own < nofile/4+2*256 || sock.PerUser >= sock.Total || sock.PerUser < 8 {
			t.Errorf("at %d: socket %+v, loopback %d leave the daemon %d", nofile, sock, loop, own)
		}
	}
}
