package ui

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// peerUIDKnown says the platform tells who opened a loopback connection.
const peerUIDKnown = true

// peerUID is the user owning the other end of a loopback TCP connection,
// read from the kernel's socket tables (/proc/net/tcp and tcp6: the line
// whose local address is the connection's remote one and whose remote
// address is its local one). A cookie alone is something another user on
// the machine can be handed or can steal (cookies are not bound to a
// port, so any loopback server the browser visits receives it); the
// process that connects cannot pretend to be another user.
func peerUID(local, remote net.Addr) (uint32, error) {
	l, ok1 := local.(*net.TCPAddr)
	r, ok2 := remote.(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("not a TCP connection (%s)", remote)
	}
	for _, f := range []struct {
		file string
		v6   bool
	}{{"/proc/net/tcp", false}, {"/proc/net/tcp6", true}} {
		want := kernelAddr(r, f.v6) + " " + kernelAddr(l, f.v6)
		if strings.HasPrefix(want, "-") || strings.Contains(want, " -") {
			continue
		}
		uid, found, err := scanTCP(f.file, want)
		if err != nil {
			return 0, err
		}
		if found {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("the connection from %s is in none of the kernel's socket tables", remote)
}

// kernelAddr writes a as /proc/net/tcp{,6} does: the address in 32-bit
// words of the host's byte order, in hex, then the port. "-" when a does
// not fit the table (an IPv6 address in tcp).
func kernelAddr(a *net.TCPAddr, v6 bool) string {
	ip := a.IP.To4()
	if v6 {
		ip = a.IP.To16()
	} else if ip == nil {
		return "-"
	}
	var b strings.Builder
	for i := 0; i+4 <= len(ip); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:i+4]))
	}
	fmt.Fprintf(&b, ":%04X", a.Port)
	return b.String()
}

// scanTCP finds the line of file whose addresses are want ("LOCAL REMOTE")
// and returns its uid column.
func scanTCP(file, want string) (uint32, bool, error) {
	f, err := os.Open(file)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, false, nil
		}
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[1]+" "+fields[2] != want {
			continue
		}
		uid, err := strconv.ParseUint(fields[7], 10, 32)
		if err != nil {
			return 0, false, fmt.Errorf("%s: uid %q: %w", file, fields[7], err)
		}
		return uint32(uid), true, nil
	}
	return 0, false, sc.Err()
}
