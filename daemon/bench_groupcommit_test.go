package daemon

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// groupCommitServer is the physical baseline of (c): the textbook group
// commit with nothing of continuityd in it. An HTTP/1.1 handler on a Unix
// socket appends each request body to a preallocated file and answers,
// with a fixed body as long as a checkpoint's answer, once an fdatasync
// covers it. Like the residency, a writer that finds no commit in progress
// commits itself; writers that arrive during a commit queue for one
// committer goroutine, which writes and syncs everything queued at once.
// What 16 writers gain over one here is what this machine's disk, cores
// and scheduler allow a group commit, before any JSON, guard or state.
type groupCommitServer struct {
	sock   string
	srv    *http.Server
	f      *os.File
	answer []byte

	commitMu sync.Mutex // held by whoever writes and syncs
	queue    chan *gcWrite
	quit     chan struct{}
	wg       sync.WaitGroup
	off      int64 // guarded by commitMu

	commits, writes atomic.Int64 // what the commits held, for writes/commit
}

type gcWrite struct {
	p    []byte
	done chan error
}

const gcFileSize = 64 << 20

// startGroupCommitServer starts the baseline on dir/gc.sock; the caller
// stops it.
func startGroupCommitServer(tb testing.TB, dir string, answerLen int) *groupCommitServer {
	f, err := os.OpenFile(dir+"/groupcommit.log", os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	// Preallocated and synced, as the residency's log is: a sync then
	// writes data blocks only.
	if _, err := f.WriteAt(make([]byte, gcFileSize), 0); err != nil {
		tb.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
	g := &groupCommitServer{f: f, answer: make([]byte, answerLen), queue: make(chan *gcWrite, 1024), quit: make(chan struct{})}
	for i := range g.answer {
		g.answer[i] = 'x'
	}
	g.sock = dir + "/gc.sock"
	ln, err := net.Listen("unix", g.sock)
	if err != nil {
		tb.Fatal(err)
	}
	g.srv = &http.Server{Handler: http.HandlerFunc(g.serve)}
	g.wg.Add(2)
	go func() { defer g.wg.Done(); g.srv.Serve(ln) }()
	go func() { defer g.wg.Done(); g.run() }()
	return g
}

func (g *groupCommitServer) stop() {
	g.srv.Close()
	close(g.quit)
	g.wg.Wait()
	g.f.Close()
}

func (g *groupCommitServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = g.write(body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(g.answer)))
	w.Write(g.answer)
}

func (g *groupCommitServer) write(p []byte) error {
	wr := &gcWrite{p: p, done: make(chan error, 1)}
	if g.commitMu.TryLock() {
		batch := g.fill([]*gcWrite{wr})
		g.commit(batch)
		g.commitMu.Unlock()
		return <-wr.done
	}
	g.queue <- wr // buffered beyond any benchmark's writers
	select {
	case err := <-wr.done:
		return err
	case <-g.quit:
		return http.ErrServerClosed
	}
}

func (g *groupCommitServer) run() {
	for {
		select {
		case wr := <-g.queue:
			g.commitMu.Lock()
			g.commit(g.fill([]*gcWrite{wr}))
			g.commitMu.Unlock()
		case <-g.quit:
			return // writers still queued stop waiting on quit too
		}
	}
}

func (g *groupCommitServer) fill(batch []*gcWrite) []*gcWrite {
	for {
		select {
		case wr := <-g.queue:
			batch = append(batch, wr)
		default:
			return batch
		}
	}
}

// commit writes the batch with one write and one fdatasync; g.commitMu is
// held.
func (g *groupCommitServer) commit(batch []*gcWrite) {
	var buf []byte
	for _, wr := range batch {
		buf = append(buf, wr.p...)
	}
	if g.off+int64(len(buf)) > gcFileSize {
		g.off = 0
	}
	_, err := g.f.WriteAt(buf, g.off)
	if err == nil {
		g.off += int64(len(buf))
		err = syncData(g.f)
	}
	if err != nil {
		err = errors.Join(errors.New("group commit"), err)
	}
	g.commits.Add(1)
	g.writes.Add(int64(len(batch)))
	for _, wr := range batch {
		wr.done <- err
	}
}
