package nats

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// TestMain fails the run if goroutines outlive the tests. goleak's
// VerifyTestMain gives up after about two seconds, which a loaded machine
// can exceed while the embedded servers' file stores wind down (seen:
// flushStreamStateLoop), so this keeps asking for up to a minute.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// The embedded test servers' own goroutines are not the client's:
		// once, at a load average of 35 on two cores, a clustered stream's
		// file store outlived its server's WaitForShutdown (its flush loop
		// and the access-time ticker it holds). The client's are all checked.
		serverOwn := []goleak.Option{
			goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
			goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
		}
		deadline := time.Now().Add(60 * time.Second)
		for err := goleak.Find(serverOwn...); err != nil; err = goleak.Find(serverOwn...) {
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests:\n%v\n", err)
				code = 1
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	os.Exit(code)
}

// testServerOpts is a JetStream server on a random loopback port with its
// store in dir.
func testServerOpts(dir string) *server.Options {
	return &server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
		// Small limits keep a test server's footprint small.
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  1 << 30,
	}
}

// startServer starts an embedded server and shuts it down with the test.
func startServer(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatalf("server %s not ready", opts.ServerName)
	}
	t.Cleanup(func() { stopServer(s) })
	return s
}

func stopServer(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// cluster is a three-node JetStream cluster on loopback.
type cluster struct {
	t       testing.TB
	opts    []*server.Options
	servers []*server.Server
}

func startCluster(t testing.TB, n int) *cluster {
	t.Helper()
	cl := &cluster{t: t}
	clientPorts, routePorts := make([]int, n), make([]int, n)
	for i := range n {
		clientPorts[i], routePorts[i] = freePort(t), freePort(t)
	}
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	for i := range n {
		o := testServerOpts(t.TempDir())
		o.ServerName = fmt.Sprintf("n%d", i+1)
		o.Port = clientPorts[i]
		o.Cluster = server.ClusterOpts{Name: "fleet", Host: "127.0.0.1", Port: routePorts[i]}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		cl.opts = append(cl.opts, o)
	}
	cl.servers = make([]*server.Server, n)
	for i := range n {
		cl.servers[i] = cl.start(i)
	}
	t.Cleanup(func() {
		for _, s := range cl.servers {
			if s != nil {
				stopServer(s)
			}
		}
	})
	cl.waitJetStream()
	return cl
}

func (cl *cluster) start(i int) *server.Server {
	o := cl.opts[i].Clone()
	s, err := server.NewServer(o)
	if err != nil {
		cl.t.Fatalf("server %d: %v", i, err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		cl.t.Fatalf("server %d not ready", i)
	}
	return s
}

func (cl *cluster) stop(i int) {
	stopServer(cl.servers[i])
	cl.servers[i] = nil
}

func (cl *cluster) restart(i int) { cl.servers[i] = cl.start(i) }

func (cl *cluster) urls() []string {
	var out []string
	for _, o := range cl.opts {
		out = append(out, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return out
}

// waitJetStream waits until the cluster's meta leader answers.
func (cl *cluster) waitJetStream() {
	nc, err := natsgo.Connect(strings.Join(cl.urls(), ","))
	if err != nil {
		cl.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			cl.t.Fatalf("cluster JetStream not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func serverURL(s *server.Server) string { return s.ClientURL() }

// quietLogger drops everything (the tests assert on values, not logs).
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestClient connects a Client to urls with test defaults.
func newTestClient(t testing.TB, urls []string, mod func(*Options)) *Client {
	t.Helper()
	o := Options{Name: "fleet", URLs: urls, Machine: "m1", Timeout: 5 * time.Second, Logger: quietLogger()}
	if mod != nil {
		mod(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawJS is a plain client for checking what the server holds.
func rawJS(t testing.TB, urls ...string) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// streamMsgs reads every message on subject filter from stream.
func streamMsgs(t testing.TB, js jetstream.JetStream, stream, filter string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	if total == 0 {
		return nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for uint64(len(out)) < total {
		b, err := cons.Fetch(int(min(500, total-uint64(len(out)))), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			out = append(out, m)
		}
		if b.Error() != nil && ctx.Err() != nil {
			t.Fatalf("reading %s: %v (have %d of %d)", filter, b.Error(), len(out), total)
		}
	}
	return out
}
