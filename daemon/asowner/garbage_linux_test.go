package asowner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/safefile"
)

// garbageCommand runs the test binary as a fake worker that answers what
// its mode says: what an owner who ptraces their own worker could make it
// answer.
const garbageCommand = "garbage"

// garbageAnswers are the fake worker's answers by mode: for each call,
// a status and a body ("" : the call is answered as a real store would
// not, with 404).
var garbageAnswers = map[string]map[string]func(w http.ResponseWriter){
	"unknown-field": {opOpen: body(200, `{"store":1,"surprise":true}`)},
	"two-values":    {opOpen: body(200, `{"store":1}{"store":2}`)},
	"not-json":      {opOpen: body(200, `store=1`)},
	"huge": {opOpen: func(w http.ResponseWriter) {
		w.WriteHeader(200)
		w.Write([]byte(strings.Repeat(" ", maxAnswer+1)))
	}},
	"status": {opOpen: body(500, `{}`)},
	"forbidden-code": {opOpen: body(200, `{"store":1}`),
		opTake: body(422, `{"kind":"refusal","code":"AGENT_FORBIDDEN","message":"you may not"}`)},
	"unknown-kind": {opOpen: body(200, `{"store":1}`),
		opTake: body(422, `{"kind":"panic","message":"?"}`)},
	"escape": {opOpen: body(200, `{"store":1}`),
		opTake: body(422, `{"kind":"error","message":"\u001b[2J\u001b]0;owned\u0007red"}`)},
	"bad-id": {opOpen: body(200, `{"store":1}`),
		opTake: body(200, `{"snapshot":{"id":"../../etc/passwd","at":"2026-01-01T00:00:00Z","trigger":"start","seq":1,"added":1,"modified":0,"deleted":0,"skipped":0},"new":true,"took":{"walk":0,"add":0,"tree":0,"commit":0,"total":0,"files":1}}`)},
	"long-diff": {opOpen: body(200, `{"store":1}`),
		opDiff: body(200, `{"diff":"`+strings.Repeat("x", 100)+`","cut":false}`)},
	"bad-hash": {opOpen: body(200, `{"store":1}`),
		opReadObjects: body(200, `{"id":"`+blobID+`","type":"blob","size":3}`+"\nbad"+`{"end":true}`+"\n")},
	"other-object": {opOpen: body(200, `{"store":1}`),
		opReadObjects: body(200, `{"id":"`+strings.Repeat("b", 40)+`","type":"blob","size":0}`+"\n"+`{"end":true}`+"\n")},
	"over-bound": {opOpen: body(200, `{"store":1}`),
		opReadObjects: body(200, `{"id":"`+blobID+`","type":"tree","size":`+fmt.Sprint(maxTreeBytes+1)+`}`+"\n")},
	"short-stream": {opOpen: body(200, `{"store":1}`),
		opReadObjects: body(200, `{"end":true}`+"\n")},
	"missing-unasked": {opOpen: body(200, `{"store":1}`),
		opMissing: body(200, `{"missing":["`+strings.Repeat("c", 40)+`"]}`)},
	// The opens: the answer to an open request.
	"fd-pipe": nil, "fd-none": nil, "fd-seq": nil, "fd-two": nil,
}

// blobID is the hash of the blob "ok\n".
const blobID = "9766475a4185a151dc9d56d614ffb9aaea3bfd42"

func body(status int, s string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.WriteHeader(status)
		w.Write([]byte(s))
	}
}

// garbageMain is the fake worker.
func garbageMain(mode string) int {
	conn, pc, err := inherited()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	go fakeOpens(pc, mode)
	l := &oneConn{conn: conn, done: make(chan struct{})}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answer, ok := garbageAnswers[mode][strings.TrimPrefix(r.URL.Path, "/")]; ok {
			answer(w)
			return
		}
		w.WriteHeader(404)
	}), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			l.Close()
		}
	}}
	srv.Serve(l)
	return 0
}

// fakeOpens answers every open request as mode says.
func fakeOpens(c *net.UnixConn, mode string) {
	buf := make([]byte, maxFdMessage)
	for {
		n, _, _, _, err := c.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			return
		}
		var req fdRequest
		json.Unmarshal(buf[:n], &req)
		ans := fdAnswer{Seq: req.Seq, OK: true}
		var fds []int
		var pipe [2]int
		unix.Pipe2(pipe[:], unix.O_CLOEXEC)
		switch mode {
		case "fd-pipe":
			fds = []int{pipe[0]}
		case "fd-seq":
			ans.Seq += 7
			fds = []int{pipe[0]}
		case "fd-two":
			fds = []int{pipe[0], pipe[1]}
		}
		b, _ := json.Marshal(ans)
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		c.WriteMsgUnix(b, oob, nil)
		unix.Close(pipe[0])
		unix.Close(pipe[1])
	}
}

// TestGarbageFromTheWorker: whatever a worker answers, the daemon takes
// only what decodes strictly and checks: anything else is an error that
// names the worker (and never a raw control character of its making), a
// descriptor that is not a regular file is refused, and an answer over
// its bound is never read whole.
func TestGarbageFromTheWorker(t *testing.T) {
	ctx := context.Background()
	_, owner := ownerTree(t)
	opt := snapshot.Options{Dir: "/nonexistent/snapshots.git", Workdir: "/nonexistent"}
	for mode := range garbageAnswers {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			pool := NewPool(Options{Args: []string{garbageCommand, mode}})
			defer pool.Close()
			w := pool.For(owner)
			var err error
			switch {
			case strings.HasPrefix(mode, "fd-"):
				_, _, err = w.Opener().Open("/etc/hostname", safefile.OpenOptions{})
				if mode == "fd-pipe" {
					if !errors.Is(err, safefile.ErrNotRegular) {
						t.Errorf("a pipe handed over as a file: %v, want ErrNotRegular", err)
					}
					return
				}
			case garbageAnswers[mode][opTake] != nil:
				err = withStore(ctx, w, opt, func(s *Store) error { _, _, err := s.Take(ctx, "start", 1); return err })
			case garbageAnswers[mode][opDiff] != nil:
				err = withStore(ctx, w, opt, func(s *Store) error { _, _, err := s.Diff(ctx, strings.Repeat("a", 40), "", 10); return err })
			case garbageAnswers[mode][opReadObjects] != nil:
				err = withStore(ctx, w, opt, func(s *Store) error {
					return s.ReadObjects(ctx, []string{blobID}, func(snapshot.Object, []byte) error { return nil })
				})
			case garbageAnswers[mode][opMissing] != nil:
				err = withStore(ctx, w, opt, func(s *Store) error { _, err := s.Missing(ctx, []string{blobID}); return err })
			default:
				_, err = w.OpenStore(ctx, opt)
			}
			if err == nil {
				t.Fatal("garbage taken")
			}
			msg := err.Error()
			if !strings.Contains(msg, "the owner's worker (uid ") {
				t.Errorf("the error does not name the worker: %v", err)
			}
			if strings.ContainsAny(msg, "\x1b\x07") {
				t.Errorf("the error carries the worker's control characters: %q", msg)
			}
			if mode == "escape" && !strings.Contains(msg, `\033[2J`) {
				t.Errorf("the worker's message is not shown escaped: %q", msg)
			}
		})
	}
}

// withStore opens a store in w (which the fake answers) and runs f on it.
func withStore(ctx context.Context, w *Worker, opt snapshot.Options, f func(*Store) error) error {
	s, err := w.OpenStore(ctx, opt)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer s.Close()
	return f(s)
}
