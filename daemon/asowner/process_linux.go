package asowner

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/continuityd/continuityd/daemon/snapshot"
)

// start starts a worker process: its two sockets as descriptors 3 (the
// calls) and 4 (the opens), the owner's credentials when the daemon is
// root, its own process group (a terminal's Ctrl-C is the daemon's to
// handle), killed with the daemon, an environment of PATH and LC_ALL
// only (and a test's snapshot.HoldRestoreEnv), and its stderr into the
// daemon's log.
func (w *Worker) start(gen uint64) (*process, error) {
	o := w.pool.o
	stream, err := socketPair(unix.SOCK_STREAM, "calls")
	if err != nil {
		return nil, err
	}
	packet, err := socketPair(unix.SOCK_SEQPACKET, "opens")
	if err != nil {
		stream[0].Close()
		stream[1].Close()
		return nil, err
	}
	defer stream[1].Close()
	defer packet[1].Close()
	cmd := exec.Command(o.Program, o.Args...)
	cmd.Env = []string{"PATH=" + o.Path, "LC_ALL=C"}
	if hold := os.Getenv(snapshot.HoldRestoreEnv); hold != "" {
		cmd.Env = append(cmd.Env, snapshot.HoldRestoreEnv+"="+hold) // a test's hook, for the stores it hosts
	}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{stream[1], packet[1]}
	cmd.Stderr = newLineLog(w.log)
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = w.owner.Credential()
	}
	if err := cmd.Start(); err != nil {
		stream[0].Close()
		packet[0].Close()
		return nil, err
	}
	conn, err := net.FileConn(stream[0])
	stream[0].Close()
	var pc net.Conn
	if err == nil {
		pc, err = net.FileConn(packet[0])
	}
	packet[0].Close()
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	return &process{w: w, gen: gen, cmd: cmd, conn: conn, client: newClient(conn),
		opens: opens{c: pc.(*net.UnixConn)}, exited: make(chan struct{}), start: time.Now()}, nil
}

// socketPair is a connected pair of Unix sockets of type typ.
func socketPair(typ int, name string) ([2]*os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return [2]*os.File{}, fmt.Errorf("a socket pair for the worker's %s: %w", name, err)
	}
	return [2]*os.File{os.NewFile(uintptr(fds[0]), name), os.NewFile(uintptr(fds[1]), name)}, nil
}

// Main runs a worker (`continuityd-daemon worker`): it serves the daemon
// on the sockets it inherits as descriptors 3 and 4 until the daemon
// closes them or ends. It refuses to run when those are not what the
// daemon passes, and as root (a worker lends the owner's rights, never
// more). Its log goes to stderr, which the daemon reads.
func Main(stderr io.Writer) int {
	conn, pc, err := inherited()
	if err == nil && os.Geteuid() == 0 {
		err = errors.New("it runs as root; a worker runs with an owner's rights only")
	}
	if err != nil {
		fmt.Fprintf(stderr, "continuityd-daemon worker: %v. The daemon starts its workers itself; this is not a command to run.\n", err)
		return 2
	}
	// The daemon ends the worker by closing its sockets (and a
	// parent-death signal when it dies): the signals a service manager
	// sends the whole group are the daemon's to act on.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var wg sync.WaitGroup
	wg.Go(func() { serveOpens(pc) })
	err = serve(conn, log)
	pc.Close()
	wg.Wait()
	if err != nil {
		log.Error("the worker stopped", "err", err)
		return 1
	}
	return 0
}

// inherited checks and takes the worker's two sockets: descriptor 3 a
// Unix stream socket, 4 a Unix SOCK_SEQPACKET one. Neither is passed on
// to the worker's children (git).
func inherited() (net.Conn, *net.UnixConn, error) {
	for fd, want := range map[int]int{3: unix.SOCK_STREAM, 4: unix.SOCK_SEQPACKET} {
		typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
		if err != nil {
			return nil, nil, fmt.Errorf("descriptor %d is not a socket (%v)", fd, err)
		}
		dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
		if err != nil || dom != unix.AF_UNIX || typ != want {
			return nil, nil, fmt.Errorf("descriptor %d is not the Unix socket the daemon passes", fd)
		}
		unix.CloseOnExec(fd)
	}
	f3, f4 := os.NewFile(3, "calls"), os.NewFile(4, "opens")
	defer f3.Close()
	defer f4.Close()
	conn, err := net.FileConn(f3)
	if err != nil {
		return nil, nil, err
	}
	pc, err := net.FileConn(f4)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, pc.(*net.UnixConn), nil
}
