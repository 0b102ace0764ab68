package asowner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/continuityd/continuityd/internal/safefile"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// File opens as the owner: the daemon sends one fdRequest per packet on
// the SOCK_SEQPACKET socket, the worker opens the file with its own
// rights (safefile's careful open) and answers one fdAnswer per packet,
// with the descriptor attached (SCM_RIGHTS) when the open worked.

// fdRequest asks the worker to open a file for reading: Path (with
// Follow, Dir as safefile.OpenOptions say), or Name inside the directory
// In (safefile.OpenIn).
type fdRequest struct {
	Seq    uint64 `json:"seq"`
	Path   string `json:"path,omitempty"`
	Follow bool   `json:"follow,omitempty"`
	Dir    bool   `json:"dir,omitempty"`
	In     string `json:"in,omitempty"`
	Name   string `json:"name,omitempty"`
}

// fdAnswer answers the request Seq: OK with a descriptor, or why not (a
// safefile refusal's Reason and Detail, or the system's Errno).
type fdAnswer struct {
	Seq    uint64 `json:"seq"`
	OK     bool   `json:"ok,omitempty"`
	Reason string `json:"reason,omitempty"`
	Errno  int    `json:"errno,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// refusals name safefile's refusal reasons on the wire.
var refusals = map[string]error{
	"symlink":     safefile.ErrSymlink,
	"not_regular": safefile.ErrNotRegular,
	"outside":     safefile.ErrOutside,
}

const (
	// maxFdMessage bounds one packet either way (a path is at most 4 KiB).
	maxFdMessage = 64 << 10
	// openTimeout bounds one open: an open that hangs (a dead network
	// file system) fails the read that wanted it, not the daemon.
	openTimeout = 10 * time.Second
)

// opens is the daemon's side of the packet socket of one process.
type opens struct {
	mu  sync.Mutex // one request and its answer at a time
	c   *net.UnixConn
	seq uint64
}

func (o *opens) close() {
	if o.c != nil {
		o.c.Close()
	}
}

// Opener opens files as the owner: through the worker, which hands the
// descriptor back. Every descriptor is checked again here (safefile.Adopt)
// whatever the worker says it is.
func (w *Worker) Opener() safefile.Opener { return workerOpener{w} }

type workerOpener struct{ w *Worker }

func (o workerOpener) Open(path string, opt safefile.OpenOptions) (*os.File, fs.FileInfo, error) {
	return o.w.openFile(fdRequest{Path: path, Follow: opt.Follow, Dir: opt.Dir}, path)
}

func (o workerOpener) OpenIn(dir, name string) (*os.File, fs.FileInfo, error) {
	return o.w.openFile(fdRequest{In: dir, Name: name}, dir+string(os.PathSeparator)+name)
}

func (w *Worker) openFile(req fdRequest, path string) (*os.File, fs.FileInfo, error) {
	p, err := w.process()
	if err != nil {
		return nil, nil, err
	}
	f, err := p.opens.open(w, req, path)
	if err != nil {
		return nil, nil, err
	}
	return safefile.Adopt(f, path, req.Dir)
}

func (o *opens) open(w *Worker, req fdRequest, path string) (*os.File, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	req.Seq = o.seq
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if len(b) > maxFdMessage {
		return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ENAMETOOLONG}
	}
	o.c.SetDeadline(time.Now().Add(openTimeout))
	if _, _, err := o.c.WriteMsgUnix(b, nil, nil); err != nil {
		return nil, fmt.Errorf("%s: asking it to open %s: %w", w.name(), path, err)
	}
	buf := make([]byte, maxFdMessage)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, flags, _, err := o.c.ReadMsgUnix(buf, oob)
		if err != nil {
			return nil, fmt.Errorf("%s did not answer the open of %s: %w", w.name(), path, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("%s is gone (opening %s)", w.name(), path)
		}
		fds := receivedFds(oob[:oobn])
		var ans fdAnswer
		err = decodeStrict(buf[:n], &ans)
		switch {
		case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
			err = errors.New("a truncated answer")
		case err == nil && ans.Seq < req.Seq:
			closeFds(fds) // the late answer to an open that timed out
			continue
		case err == nil && ans.Seq != req.Seq:
			err = fmt.Errorf("the answer to request %d, not %d", ans.Seq, req.Seq)
		case err == nil && ans.OK && len(fds) != 1:
			err = fmt.Errorf("%d descriptors", len(fds))
		}
		if err != nil {
			closeFds(fds)
			return nil, w.garbage("the open of "+path, err)
		}
		if !ans.OK {
			closeFds(fds)
			return nil, ans.err(w, path)
		}
		return os.NewFile(uintptr(fds[0]), path), nil
	}
}

// err is the refusal or the system's error the worker met, named as the
// daemon's own open would name it.
func (a fdAnswer) err(w *Worker, path string) error {
	detail := termsafe.Line(cut(a.Detail, maxMessage))
	if reason, ok := refusals[a.Reason]; ok {
		return &safefile.Error{Path: path, Reason: reason, Detail: detail}
	}
	if a.Errno > 0 && a.Errno < 4096 {
		return &fs.PathError{Op: "open", Path: path, Err: syscall.Errno(a.Errno)}
	}
	return fmt.Errorf("%s could not open %s: %s", w.name(), path, detail)
}

// receivedFds are the descriptors a packet carried.
func receivedFds(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// serveOpens is the worker's side: it opens what each request names with
// the worker's own rights and hands the descriptor back, until the
// daemon closes the socket.
func serveOpens(c *net.UnixConn) {
	buf := make([]byte, maxFdMessage)
	for {
		n, _, _, _, err := c.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			return
		}
		var req fdRequest
		var f *os.File
		ans := fdAnswer{}
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			ans.Detail = "a bad request: " + err.Error()
		} else {
			ans.Seq = req.Seq
			if req.In != "" {
				f, _, err = safefile.Here.OpenIn(req.In, req.Name)
			} else if filepath.IsAbs(req.Path) {
				f, _, err = safefile.Here.Open(req.Path, safefile.OpenOptions{Follow: req.Follow, Dir: req.Dir})
			} else {
				err = fmt.Errorf("%q is not an absolute path", req.Path)
			}
			if err != nil {
				ans = fdError(req.Seq, err)
			} else {
				ans.OK = true
			}
		}
		b, _ := json.Marshal(ans)
		var oob []byte
		if f != nil {
			oob = unix.UnixRights(int(f.Fd()))
		}
		_, _, err = c.WriteMsgUnix(b, oob, nil)
		if f != nil {
			f.Close()
		}
		if err != nil {
			return
		}
	}
}

// fdError is how the worker says why an open failed.
func fdError(seq uint64, err error) fdAnswer {
	a := fdAnswer{Seq: seq, Detail: err.Error()}
	var se *safefile.Error
	if errors.As(err, &se) {
		a.Detail = se.Detail
		for name, reason := range refusals {
			if errors.Is(err, reason) {
				a.Reason = name
			}
		}
		return a
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		a.Errno = int(errno)
	}
	return a
}
