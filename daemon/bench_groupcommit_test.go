package daemon

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/continuityd/continuityd/internal/testkit/baseline"
)

// groupCommitServer is the physical baseline of (c) over the socket: an
// HTTP/1.1 handler on a Unix socket that appends each request body to
// baseline.GroupCommit and answers, with a fixed body as long as a
// checkpoint's answer, once an fdatasync covers it. What 16 writers gain
// over one here is what this machine's disk, cores and scheduler allow a
// group commit behind net/http, before any JSON, guard or state.
type groupCommitServer struct {
	sock   string
	srv    *http.Server
	gc     *baseline.GroupCommit
	answer []byte
	wg     sync.WaitGroup
}

// startGroupCommitServer starts the baseline on dir/gc.sock; the caller
// stops it.
func startGroupCommitServer(tb testing.TB, dir string, answerLen int) *groupCommitServer {
	gc, err := baseline.OpenGroupCommit(dir, "groupcommit.log", baseline.FileSize)
	if err != nil {
		tb.Fatal(err)
	}
	g := &groupCommitServer{sock: dir + "/gc.sock", gc: gc, answer: make([]byte, answerLen)}
	for i := range g.answer {
		g.answer[i] = 'x'
	}
	ln, err := net.Listen("unix", g.sock)
	if err != nil {
		tb.Fatal(err)
	}
	g.srv = &http.Server{Handler: http.HandlerFunc(g.serve)}
	g.wg.Add(1)
	go func() { defer g.wg.Done(); g.srv.Serve(ln) }()
	return g
}

func (g *groupCommitServer) stop() {
	g.srv.Close()
	g.wg.Wait()
	g.gc.Close()
}

func (g *groupCommitServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = g.gc.Write(body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(g.answer)))
	w.Write(g.answer)
}
