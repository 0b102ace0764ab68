package asowner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Options are a Pool's.
type Options struct {
	// Program and Args start a worker: Program Args... with the worker's
	// two sockets as descriptors 3 and 4. The default is this very
	// program (/proc/self/exe), and WorkerCommand.
	Program string
	Args    []string
	// Path is the worker's PATH (where it finds git); "" : the daemon's,
	// or a standard one when the daemon has none.
	Path string
	// Logger receives the pool's own messages and each worker's stderr.
	Logger *slog.Logger
}

// WorkerCommand is the hidden command of continuityd-daemon that runs a
// worker (Main).
const WorkerCommand = "worker"

// Pool holds the daemon's workers, one per owner, each started on first
// need. Close ends them all.
type Pool struct {
	o  Options
	wg sync.WaitGroup // each process's waiter

	mu      sync.Mutex
	workers map[uint32]*Worker
	closed  bool
}

// NewPool returns a pool that starts no worker until one is asked for.
func NewPool(o Options) *Pool {
	if o.Program == "" {
		o.Program = "/proc/self/exe"
		if o.Args == nil {
			o.Args = []string{WorkerCommand}
		}
	}
	if o.Path == "" {
		o.Path = os.Getenv("PATH")
	}
	if o.Path == "" {
		o.Path = "/usr/local/bin:/usr/bin:/bin"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pool{o: o, workers: map[uint32]*Worker{}}
}

// For is owner's worker; its process starts at the first call.
func (p *Pool) For(owner Owner) *Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[owner.UID]
	if !ok {
		w = &Worker{pool: p, owner: owner, log: p.o.Logger.With("worker_uid", owner.UID)}
		if p.closed {
			w.closed = errPoolClosed
		}
		p.workers[owner.UID] = w
	}
	return w
}

// Close ends every worker (each closes its stores first, given
// closeWait) and waits for each process.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	workers := make([]*Worker, 0, len(p.workers))
	for _, w := range p.workers {
		workers = append(workers, w)
	}
	p.mu.Unlock()
	for _, w := range workers {
		w.stop(errPoolClosed)
	}
	p.wg.Wait()
}

// Retain ends the workers of the owners keep does not name, and forgets
// them: a reload that removed an owner's last agent leaves no process
// running as that owner until the daemon ends. Each is told to end
// (killed after closeWait) and reaped before Retain returns. A later For
// for that owner starts a new worker; a call still made through one
// ended here fails, saying why.
func (p *Pool) Retain(keep map[uint32]bool) {
	p.mu.Lock()
	var idle []*Worker
	for uid, w := range p.workers {
		if !keep[uid] {
			idle = append(idle, w)
			delete(p.workers, uid)
		}
	}
	p.mu.Unlock()
	for _, w := range idle {
		if pid := w.stop(fmt.Errorf("%s was stopped: no agent acts as that owner any more", w.name())); pid != 0 {
			w.log.Info("stopped the owner's worker: no agent acts as that owner any more", "pid", pid)
		}
	}
}

// closeWait is how long a worker told to end gets to close its stores
// before it is killed.
const closeWait = 10 * time.Second

// Worker is the daemon's side of one owner's worker: its process, started
// on the first call and again after it died.
type Worker struct {
	pool  *Pool
	owner Owner
	log   *slog.Logger

	mu       sync.Mutex
	cur      *process // nil: none runs
	gen      uint64   // processes started so far
	fails    int      // workers in a row that died young
	retryAt  time.Time
	lastExit string // how the last one ended, for the restart's log line
	closed   error  // why no process starts any more (nil: one does)
}

// name is how errors name the worker.
func (w *Worker) name() string { return "the owner's worker (" + w.owner.String() + ")" }

// process is one run of a worker.
type process struct {
	w      *Worker
	gen    uint64
	cmd    *exec.Cmd
	conn   net.Conn // the calls' stream socket
	client *http.Client
	opens  opens // the open requests' packet socket
	exited chan struct{}
	err    error // how it ended, once exited is closed
	start  time.Time
}

// backoff is how long a worker that died young waits before the next
// start: none the first time, then doubling up to maxBackoff.
func backoff(fails int) time.Duration {
	if fails <= 1 {
		return 0
	}
	return min(time.Second<<(fails-2), maxBackoff)
}

const (
	maxBackoff = 30 * time.Second
	// youngDeath is how long a worker must have lived for its death not
	// to count towards the backoff.
	youngDeath = time.Minute
)

// errPoolClosed is every call after the daemon began to stop.
var errPoolClosed = errors.New("the daemon is stopping: no worker is started")

// process returns the running worker, starting one when none runs.
func (w *Worker) process() (*process, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed != nil {
		return nil, w.closed
	}
	if p := w.cur; p != nil {
		select {
		case <-p.exited:
			w.cur = nil
		default:
			return p, nil
		}
	}
	if wait := time.Until(w.retryAt); wait > 0 {
		return nil, fmt.Errorf("%s died %d times in a row (%s); the next start is in %s", w.name(), w.fails, w.lastExit, wait.Round(time.Second))
	}
	w.gen++
	p, err := w.start(w.gen)
	if err != nil {
		w.fails++
		w.retryAt = time.Now().Add(backoff(w.fails + 1))
		w.lastExit = err.Error()
		w.log.Error("the owner's worker cannot start; what it would do for the owner fails meanwhile", "err", err)
		return nil, fmt.Errorf("%s cannot start: %w", w.name(), err)
	}
	if w.gen > 1 {
		w.log.Warn("restarted the owner's worker: the last one ended", "pid", p.cmd.Process.Pid, "restart", w.gen-1, "ended", w.lastExit)
	} else {
		w.log.Info("started the owner's worker: what touches the owner's tree runs with the owner's rights", "gid", w.owner.GID, "pid", p.cmd.Process.Pid)
	}
	w.cur = p
	w.pool.wg.Add(1)
	go p.wait()
	return p, nil
}

// wait reaps the process and says how it ended.
func (p *process) wait() {
	defer p.w.pool.wg.Done()
	err := p.cmd.Wait()
	p.conn.Close()
	p.opens.close()
	p.client.CloseIdleConnections()
	w := p.w
	w.mu.Lock()
	closing := w.closed != nil
	how := "exit status 0"
	if err != nil {
		how = err.Error()
	}
	p.err = fmt.Errorf("%s ended (%s)", w.name(), how)
	w.lastExit = how
	if time.Since(p.start) < youngDeath {
		w.fails++
	} else {
		w.fails = 1
	}
	w.retryAt = time.Now().Add(backoff(w.fails))
	w.mu.Unlock()
	close(p.exited)
	if !closing {
		w.log.Warn("the owner's worker ended; the next call starts a new one", "pid", p.cmd.Process.Pid, "ended", how)
	}
}

// stop ends the worker for good (why is every later call's error): its
// sockets are closed, so it closes its stores and exits; one that does
// not within closeWait is killed. It returns the pid of the process it
// ended (0: none ran).
func (w *Worker) stop(why error) int {
	w.mu.Lock()
	w.closed = why
	p := w.cur
	w.mu.Unlock()
	if p == nil {
		return 0
	}
	select {
	case <-p.exited:
		return 0 // ended already, and reaped
	default:
	}
	p.conn.Close()
	p.opens.close()
	select {
	case <-p.exited:
	case <-time.After(closeWait):
		w.log.Warn("the owner's worker did not end when told; killing it", "pid", p.cmd.Process.Pid)
		p.cmd.Process.Kill()
		<-p.exited
	}
	return p.cmd.Process.Pid
}

// newClient is the HTTP/2 client over conn, the one connection to the
// worker: every call shares it (a call waits for a free stream rather
// than dialling again), and a second dial, after conn broke, fails.
func newClient(conn net.Conn) *http.Client {
	var once sync.Once
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Protocols: &p,
		HTTP2:     &http.HTTP2Config{StrictMaxConcurrentRequests: true},
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			c := net.Conn(nil)
			once.Do(func() { c = conn })
			if c == nil {
				return nil, errors.New("its connection is gone")
			}
			return c, nil
		},
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
	return &http.Client{Transport: tr}
}

// call runs op with req on p and decodes its answer into ans.
func (p *process) call(ctx context.Context, op string, req request, ans any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	resp, err := p.post(ctx, op, bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := readBounded(resp.Body, maxAnswer)
	if err != nil {
		return p.broke(ctx, op, err)
	}
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode != http.StatusUnprocessableEntity {
			return p.w.garbage(op, fmt.Errorf("HTTP status %d", resp.StatusCode))
		}
		return p.w.fromWire(op, raw)
	}
	if err := decodeStrict(raw, ans); err != nil {
		return p.w.garbage(op, err)
	}
	return nil
}

// post sends op's request, body streamed.
func (p *process) post(ctx context.Context, op string, body io.Reader) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://worker/"+op, body)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(hreq)
	if err != nil {
		return nil, p.broke(ctx, op, err)
	}
	return resp, nil
}

// broke is the error of a call the connection failed: the worker died
// under it, or the caller gave up.
func (p *process) broke(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-p.exited:
		return fmt.Errorf("%w during %s; the next call starts a new one", p.err, op)
	case <-time.After(time.Second): // the exit may come a moment after the connection broke
		return fmt.Errorf("%s failed during %s: %v", p.w.name(), op, err)
	}
}

// garbage is the error for an answer the daemon cannot take.
func (w *Worker) garbage(op string, err error) error {
	return fmt.Errorf("%s answered %s with garbage: %v", w.name(), op, err)
}
