package asowner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/continuityd/continuityd/daemon/snapshot"
)

// server is the worker's side of the calls: the snapshot stores it hosts
// for the daemon, by the number Open gave each.
type server struct {
	log *slog.Logger

	mu     sync.Mutex
	next   uint64
	stores map[uint64]*hosted
	calls  sync.WaitGroup // handlers running
}

// hosted is one store the worker holds open.
type hosted struct {
	st *snapshot.Store
	// conv is where the conversation stood when the daemon asked for the
	// Take or Restore under way: the store's SetConversation reads it
	// (the daemon's point function stays on the daemon's side).
	conv atomic.Pointer[snapshot.Conversation]

	holdsMu  sync.Mutex
	holds    map[uint64]func()
	nextHold uint64
}

// serve is the worker's side of conn: it serves the daemon's calls
// (HTTP/2 without TLS, one connection) until the daemon closes conn or
// ends, then closes every store it opened.
func serve(conn net.Conn, log *slog.Logger) error {
	s := &server{log: log, stores: map[uint64]*hosted{}}
	l := &oneConn{conn: conn, done: make(chan struct{})}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: s, Protocols: &p,
		HTTP2:    &http.HTTP2Config{MaxConcurrentStreams: maxStreams},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				l.Close()
			}
		}}
	err := srv.Serve(l)
	srv.Close()
	s.calls.Wait()
	s.closeAll()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// maxStreams is how many calls one connection carries at once (the
// daemon waits for a free one rather than dialling again).
const maxStreams = 1024

// oneConn is a listener that yields conn once, then waits until closed.
type oneConn struct {
	conn net.Conn
	took atomic.Bool
	once sync.Once
	done chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	if !l.took.Swap(true) {
		return l.conn, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return l.conn.LocalAddr() }

func (s *server) closeAll() {
	s.mu.Lock()
	stores := s.stores
	s.stores = map[uint64]*hosted{}
	s.mu.Unlock()
	for _, h := range stores {
		h.close()
	}
}

func (h *hosted) close() {
	h.holdsMu.Lock()
	for _, release := range h.holds {
		release()
	}
	h.holds = nil
	h.holdsMu.Unlock()
	h.st.Close()
}

func (s *server) store(id uint64) (*hosted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.stores[id]
	if !ok {
		return nil, snapshot.ErrClosed
	}
	return h, nil
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	defer s.calls.Done()
	op := strings.TrimPrefix(r.URL.Path, "/")
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	ctx := r.Context()
	var req request
	switch op {
	case opReceiveObject:
		// The request line, then the object's content.
		br := bufio.NewReader(r.Body)
		line, err := readLine(br, maxRequest)
		if err == nil {
			err = decodeStrict(line, &req)
		}
		if err == nil && req.Object == nil {
			err = errors.New("no object named")
		}
		if err != nil {
			reply(w, nil, fmt.Errorf("a bad request: %w", err))
			return
		}
		h, err := s.store(req.Store)
		if err == nil {
			err = h.st.ReceiveObject(ctx, *req.Object, req.Size, br)
		}
		reply(w, empty{}, err)
		return
	}
	raw, err := readBounded(r.Body, maxRequest)
	if err == nil {
		err = decodeStrict(raw, &req)
	}
	if err != nil {
		reply(w, nil, fmt.Errorf("a bad request: %w", err))
		return
	}
	if op == opReadObjects {
		s.readObjects(ctx, w, req)
		return
	}
	ans, err := s.do(ctx, op, req)
	reply(w, ans, err)
}

// do runs one call.
func (s *server) do(ctx context.Context, op string, req request) (any, error) {
	if op == opOpen {
		return s.open(ctx, req)
	}
	if op == opClose {
		s.mu.Lock()
		h, ok := s.stores[req.Store]
		delete(s.stores, req.Store)
		s.mu.Unlock()
		if ok {
			h.close()
		}
		return empty{}, nil
	}
	h, err := s.store(req.Store)
	if err != nil {
		return nil, err
	}
	st := h.st
	switch op {
	case opTake:
		h.conv.Store(req.Conversation)
		var opt []snapshot.TakeOptions
		if req.Take != nil {
			opt = append(opt, *req.Take)
		}
		snap, isNew, err := st.Take(ctx, req.Trigger, req.Seq, opt...)
		return takeAnswer{Snapshot: snap, New: isNew, Took: snap.Took}, err
	case opRestore:
		h.conv.Store(req.Conversation)
		return st.Restore(ctx, req.ID, req.Paths, req.DryRun)
	case opList:
		l, err := st.List(ctx)
		return listAnswer{Snapshots: l}, err
	case opShow:
		return st.Show(ctx, req.ID)
	case opDiff:
		d, cut, err := st.DiffView(ctx, req.ID, req.Against, req.MaxBytes, snapshot.View{Paths: req.Paths, Stat: req.Stat})
		return diffAnswer{Diff: d, Cut: cut}, err
	case opBetween:
		c, err := st.Between(ctx, req.From, req.To)
		return betweenAnswer{Changes: c}, err
	case opNewest:
		snap, ok := st.Newest()
		return newestAnswer{Snapshot: snap, OK: ok}, nil
	case opLookup:
		return st.Lookup(ctx, req.ID)
	case opProgress:
		return st.Progress(), nil
	case opGCProblem:
		return problemAnswer{Problem: st.GCProblem()}, nil
	case opWorkdir:
		return problemAnswer{Problem: st.WorkdirProblem()}, nil
	case opInterrupted:
		r, ok := st.Interrupted()
		return interruptedAnswer{Restore: r, OK: ok, Changes: st.InterruptedChanges()}, nil
	case opFollow:
		st.Follow()
		return empty{}, nil
	case opUnfollow:
		st.Unfollow()
		return empty{}, nil
	case opNoteChanged:
		st.NoteChanged(req.Paths)
		return empty{}, nil
	case opNoteUnknown:
		st.NoteUnknown()
		return empty{}, nil
	case opObjects:
		snap, objs, err := st.Objects(ctx, req.ID)
		return objectsAnswer{Snapshot: snap, Objects: objs}, err
	case opImport:
		return st.Import(ctx, req.ID, req.Commit)
	case opMissing:
		m, err := st.Missing(ctx, req.IDs)
		return missingAnswer{Missing: m}, err
	case opHold:
		h.holdsMu.Lock()
		defer h.holdsMu.Unlock()
		if h.holds == nil {
			h.holds = map[uint64]func(){}
		}
		h.nextHold++
		h.holds[h.nextHold] = st.HoldObjects()
		return holdAnswer{Hold: h.nextHold}, nil
	case opRelease:
		h.holdsMu.Lock()
		defer h.holdsMu.Unlock()
		if release, ok := h.holds[req.Hold]; ok {
			release()
			delete(h.holds, req.Hold)
		}
		return empty{}, nil
	}
	return nil, fmt.Errorf("no call %q", op)
}

// open opens (or makes) a store as the daemon's options say, its log
// going to the worker's.
func (s *server) open(ctx context.Context, req request) (any, error) {
	if req.Options == nil {
		return nil, errors.New("a store's options are needed")
	}
	opt := *req.Options
	opt.Logger = s.log
	st, err := snapshot.Open(ctx, opt)
	if err != nil {
		return nil, err
	}
	h := &hosted{st: st}
	st.SetConversation(func() snapshot.Conversation {
		if c := h.conv.Load(); c != nil {
			return *c
		}
		return snapshot.Conversation{}
	})
	s.mu.Lock()
	s.next++
	id := s.next
	s.stores[id] = h
	s.mu.Unlock()
	return openAnswer{Store: id}, nil
}

// readObjects streams the objects the request names: for each a header
// line (objectHeader) and its content, then a last line saying the
// stream is whole or why it is not.
func (s *server) readObjects(ctx context.Context, w http.ResponseWriter, req request) {
	h, err := s.store(req.Store)
	if err != nil {
		reply(w, nil, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	bw := bufio.NewWriterSize(w, 64<<10)
	err = h.st.ReadObjects(ctx, req.IDs, func(o snapshot.Object, data []byte) error {
		hdr, _ := json.Marshal(objectHeader{ID: o.ID, Type: o.Type, Size: int64(len(data))})
		bw.Write(hdr)
		bw.WriteByte('\n')
		_, err := bw.Write(data)
		return err
	})
	last := objectHeader{End: true}
	if err != nil {
		we := toWire(err)
		last = objectHeader{Error: &we}
	}
	hdr, _ := json.Marshal(last)
	bw.Write(hdr)
	bw.WriteByte('\n')
	bw.Flush()
}

// objectHeader starts each object of a read_objects stream; the last
// line has End set, or Error.
type objectHeader struct {
	ID    string     `json:"id,omitempty"`
	Type  string     `json:"type,omitempty"`
	Size  int64      `json:"size,omitempty"`
	End   bool       `json:"end,omitempty"`
	Error *wireError `json:"error,omitempty"`
}

// reply writes ans as JSON, or err as a wireError.
func reply(w http.ResponseWriter, ans any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusUnprocessableEntity)
		json.NewEncoder(w).Encode(toWire(err))
		return
	}
	json.NewEncoder(w).Encode(ans)
}

// readLine reads one line, without its "\n", of at most limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit+1 {
			return nil, fmt.Errorf("a line over %d bytes", limit)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}
