package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func focusWrite(residency string, seq uint64, focus string) capsule.Write {
	return capsule.Write{Seq: seq, Kind: capsule.WriteCheckpoint, Origin: capsule.OriginExplicit,
		At: time.Now().UTC(), IdempotencyKey: fmt.Sprintf("cd-%s-%d", residency, seq),
		Checkpoint: &capsule.Checkpoint{Focus: &focus}}
}

func TestDeliverPublishesEachWriteOnceOnItsSubject(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	c := newTestClient(t, []string{serverURL(s)}, nil)
	ctx := ctxT(t)
	ws := []capsule.Write{
		focusWrite("r1", 1, "one"),
		{Seq: 2, Kind: capsule.WriteCapsule, At: time.Now().UTC(), IdempotencyKey: "cd-r1-2", Capsule: &capsule.Capsule{}},
		{Seq: 3, Kind: capsule.WriteSessionEnd, At: time.Now().UTC(), IdempotencyKey: "cd-r1-3", SessionID: "s", Reason: "logout"},
		focusWrite("r1", 4, "four"),
	}
	for _, w := range ws {
		if err := c.Deliver(ctx, "builder", w); err != nil {
			t.Fatalf("deliver %d: %v", w.Seq, err)
		}
	}
	// A retry after a crash sends the same keys again: the server keeps one.
	for _, w := range ws[2:] {
		if err := c.Deliver(ctx, "builder", w); err != nil {
			t.Fatalf("redeliver %d: %v", w.Seq, err)
		}
	}
	_, js := rawJS(t, serverURL(s))
	msgs := streamMsgs(t, js, DefaultStream, "continuityd.writes.builder.*")
	if len(msgs) != len(ws) {
		t.Fatalf("stream holds %d writes, want %d (once per key)", len(msgs), len(ws))
	}
	for i, m := range msgs {
		want := ws[i]
		if m.Subject() != "continuityd.writes.builder."+string(want.Kind) {
			t.Errorf("write %d on %s", want.Seq, m.Subject())
		}
		if m.Headers().Get(natsgo.MsgIdHdr) != want.IdempotencyKey || m.Headers().Get(HeaderSeq) != strconv.FormatUint(want.Seq, 10) || m.Headers().Get(HeaderMachine) != "m1" {
			t.Errorf("write %d headers %v", want.Seq, m.Headers())
		}
		var got capsule.Write
		if err := json.Unmarshal(m.Data(), &got); err != nil || got.Seq != want.Seq || got.Kind != want.Kind {
			t.Errorf("write %d body %s (%v)", want.Seq, m.Data(), err)
		}
	}
	// Created with one replica and our subjects, and a bucket.
	st, err := js.Stream(ctx, DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Replicas != 1 || cfg.Duplicates != DuplicateWindow || strings.Join(cfg.Subjects, " ") != "continuityd.writes.*.* continuityd.directions.*" {
		t.Errorf("stream config %+v", cfg)
	}
	if _, err := js.KeyValue(ctx, DefaultBucket); err != nil {
		t.Errorf("bucket: %v", err)
	}
}

func TestOperatorStreamIsUsedAsIsAndNeverReshaped(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	_, js := rawJS(t, serverURL(s))
	ctx := ctxT(t)
	mk := func(name string, subjects ...string) jetstream.StreamConfig {
		cfg := jetstream.StreamConfig{Name: name, Subjects: subjects, MaxAge: 48 * time.Hour, Description: "the operator's"}
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	mk("WIDE", "fleet.>")
	c := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Stream, o.SubjectPrefix, o.Bucket = "WIDE", "fleet", "opsbucket" })
	if err := c.Deliver(ctx, "builder", focusWrite("r", 1, "x")); err != nil {
		t.Fatalf("deliver into the operator's wider stream: %v", err)
	}
	st, _ := js.Stream(ctx, "WIDE")
	info, _ := st.Info(ctx)
	if got := info.Config; got.MaxAge != 48*time.Hour || got.Description != "the operator's" || strings.Join(got.Subjects, ",") != "fleet.>" || info.State.Msgs != 1 {
		t.Errorf("operator's stream changed or missed the write: %+v %+v", got, info.State)
	}

	// A stream without the directions subject: a clear error, the stream untouched.
	mk("NARROW", "narrow.writes.*.*")
	c2 := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Stream, o.SubjectPrefix = "NARROW", "narrow" })
	err := c2.Deliver(ctx, "builder", focusWrite("r", 1, "x"))
	if upstream.Classify(err) != upstream.Retry || !strings.Contains(err.Error(), "stream NARROW exists without the subject narrow.directions.*") {
		t.Fatalf("want a Retry naming the stream and the missing subject, got %v", err)
	}
	st, _ = js.Stream(ctx, "NARROW")
	info, _ = st.Info(ctx)
	if strings.Join(info.Config.Subjects, ",") != "narrow.writes.*.*" || info.State.Msgs != 0 {
		t.Errorf("narrow stream changed: %+v", info.Config.Subjects)
	}
}

func TestSubjectSubset(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"p.writes.*.*", "p.writes.*.*", true},
		{"p.writes.*.*", "p.>", true},
		{"p.writes.*.*", "p.writes.>", true},
		{"p.writes.*.*", "p.*.*.*", true},
		{"p.writes.*.*", "p.writes.*", false},
		{"p.writes.*.*", "p.writes.a.*", false},
		{"p.directions.*", "p.directions", false},
		{"p.directions.*", ">", true},
		{"p.a", "p.a.>", false},
		{"p.>", "p.*", false},
	} {
		if got := subjectSubset(tc.a, tc.b); got != tc.want {
			t.Errorf("subjectSubset(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	base := Options{Name: "fleet", URLs: []string{"nats://127.0.0.1:1"}, Machine: "m"}
	for name, tc := range map[string]struct {
		mod  func(*Options)
		want string
	}{
		"no url":      {func(o *Options) { o.URLs = nil }, "no server"},
		"credentials": {func(o *Options) { o.URLs = []string{"nats://u:sekrit@h:4222"} }, "credentials in the url are not allowed"},
		"scheme":      {func(o *Options) { o.URLs = []string{"http://h"} }, "nats://"},
		"two auths":   {func(o *Options) { o.CredsFile = "/x"; o.Token = func() (string, error) { return "", nil } }, "at most one of"},
		"no machine":  {func(o *Options) { o.Machine = "" }, "machine"},
		"replicas":    {func(o *Options) { o.Replicas = 7 }, "replicas 7"},
		"bad stream":  {func(o *Options) { o.Stream = "a.b" }, "stream"},
		"bad prefix":  {func(o *Options) { o.SubjectPrefix = "a.>" }, "subject_prefix"},
		// The limits config applies (internal/natsrules), at their boundaries.
		"prefix of 9 tokens": {func(o *Options) { o.SubjectPrefix = "a.b.c.d.e.f.g.h.i" }, "at most 8"},
		"token of 65":        {func(o *Options) { o.SubjectPrefix = strings.Repeat("p", 65) }, "1 to 64"},
		"stream of 65":       {func(o *Options) { o.Stream = strings.Repeat("S", 65) }, "1 to 64"},
		"url with a path":    {func(o *Options) { o.URLs = []string{"nats://h:4222/x"} }, "without a path"},
		"missing nkey":       {func(o *Options) { o.NKeyFile = filepath.Join(t.TempDir(), "none") }, "nkey_file"},
		"comma in url":       {func(o *Options) { o.URLs = []string{"nats://a:1,nats://b:2"} }, "comma"},
	} {
		o := base
		tc.mod(&o)
		c, err := New(o)
		if err == nil {
			c.Close()
			t.Errorf("%s: accepted", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The last values in are taken.
	o := base
	o.SubjectPrefix = strings.TrimSuffix(strings.Repeat(strings.Repeat("p", 64)+".", 8), ".")
	o.Stream, o.Bucket, o.Replicas = strings.Repeat("S", 64), strings.Repeat("b", 64), 5
	o.Logger = quietLogger()
	c, err := New(o)
	if err != nil {
		t.Fatalf("the limits' last values refused: %v", err)
	}
	c.Close()
}

func TestClassification(t *testing.T) {
	opts := testServerOpts(t.TempDir())
	opts.MaxPayload = 4096
	s := startServer(t, opts)
	_, js := rawJS(t, serverURL(s))
	ctx := ctxT(t)
	big := strings.Repeat("x", 2000)

	t.Run("message over the stream's size limit is rejected", func(t *testing.T) {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.>"}, MaxMsgSize: 1000}); err != nil {
			t.Fatal(err)
		}
		c := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Stream, o.SubjectPrefix, o.Bucket = "SMALL", "small", "small" })
		err := c.Deliver(ctx, "a", focusWrite("r", 1, big))
		if upstream.Classify(err) != upstream.Rejected {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("message over the server's max payload is rejected", func(t *testing.T) {
		c := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Stream, o.SubjectPrefix, o.Bucket = "PAY", "pay", "pay" })
		err := c.Deliver(ctx, "a", focusWrite("r", 1, big+big+big))
		if upstream.Classify(err) != upstream.Rejected {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a full stream pauses in order", func(t *testing.T) {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FULL", Subjects: []string{"full.>"}, MaxMsgs: 2, Discard: jetstream.DiscardNew}); err != nil {
			t.Fatal(err)
		}
		c := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Stream, o.SubjectPrefix, o.Bucket = "FULL", "full", "full" })
		for i := uint64(1); i <= 2; i++ {
			if err := c.Deliver(ctx, "a", focusWrite("r", i, "x")); err != nil {
				t.Fatal(err)
			}
		}
		err := c.Deliver(ctx, "a", focusWrite("r", 3, "x"))
		var ue *upstream.Error
		if !errors.As(err, &ue) || ue.Outcome != upstream.RateLimited || ue.RetryAfter != StoreFullRetry || !strings.Contains(err.Error(), "maximum messages exceeded") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("server down is retried", func(t *testing.T) {
		port := freePort(t)
		c := newTestClient(t, []string{fmt.Sprintf("nats://127.0.0.1:%d", port)}, func(o *Options) { o.Timeout = 300 * time.Millisecond })
		err := c.Deliver(ctx, "a", focusWrite("r", 1, "x"))
		if err == nil || upstream.Classify(err) != upstream.Retry {
			t.Fatalf("got %v", err)
		}
		if h := c.Health(); h.Connected {
			t.Errorf("health %+v", h)
		}
	})
	t.Run("agent names that are no subject token are rejected", func(t *testing.T) {
		c := newTestClient(t, []string{serverURL(s)}, nil)
		for _, a := range []string{"a.b", "a*", "A", ""} {
			if err := c.Deliver(ctx, a, focusWrite("r", 1, "x")); upstream.Classify(err) != upstream.Rejected {
				t.Errorf("agent %q: %v", a, err)
			}
		}
	})
}

func TestAuthentication(t *testing.T) {
	// Token auth: the token is read at each connection.
	topts := testServerOpts(t.TempDir())
	topts.Authorization = "tok-right-1"
	s := startServer(t, topts)
	ctx := ctxT(t)
	var mu sync.Mutex
	tok := "tok-wrong-1"
	c := newTestClient(t, []string{serverURL(s)}, func(o *Options) {
		o.Timeout = 500 * time.Millisecond
		o.Token = func() (string, error) { mu.Lock(); defer mu.Unlock(); return tok, nil }
	})
	// Until the first connection attempt has been refused the failure is
	// only "not connected" (Retry); from then on it is Unauthorized.
	var err error
	for range 100 {
		if err = c.Deliver(ctx, "a", focusWrite("r", 1, "x")); upstream.Classify(err) == upstream.Unauthorized {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if upstream.Classify(err) != upstream.Unauthorized {
		t.Fatalf("wrong token: %v", err)
	}
	if strings.Contains(err.Error(), "tok-") {
		t.Errorf("error quotes the token: %v", err)
	}
	mu.Lock()
	tok = "tok-right-1"
	mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err = c.Deliver(ctx, "a", focusWrite("r", 1, "x"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("renewed token never applied: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestPublishPermissionDeniedIsUnauthorized(t *testing.T) {
	opts := testServerOpts(t.TempDir())
	allowAll := &server.SubjectPermission{Allow: []string{">"}}
	opts.Users = []*server.User{
		{Username: "admin", Password: "admin-pw"},
		{Username: "ro", Password: "ro-pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.>", "$KV.>", "_INBOX.>"}, Deny: []string{"continuityd.writes.>"}},
			Subscribe: allowAll,
		}},
	}
	s := startServer(t, opts)
	ctx := ctxT(t)
	// The admin makes the stream (the read-only user may not publish writes).
	anc, err := natsgo.Connect(serverURL(s), natsgo.UserInfo("admin", "admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer anc.Close()
	ajs, _ := jetstream.New(anc)
	if _, err := ajs.CreateStream(ctx, jetstream.StreamConfig{Name: DefaultStream, Subjects: []string{"continuityd.writes.*.*", "continuityd.directions.*"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ajs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: DefaultBucket}); err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, []string{serverURL(s)}, func(o *Options) {
		o.Timeout = time.Second
		o.connectOptions = []natsgo.Option{natsgo.UserInfo("ro", "ro-pw")}
	})
	err = c.Deliver(ctx, "a", focusWrite("r", 1, "x"))
	var ue *upstream.Error
	if !errors.As(err, &ue) || ue.Outcome != upstream.Unauthorized || !strings.Contains(err.Error(), "continuityd.writes.a.checkpoint") {
		t.Fatalf("got %v", err)
	}
}

func TestNKeyAndCredsFiles(t *testing.T) {
	// An nkey seed file that is not a seed is refused at New, naming the file only.
	f := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(f, []byte("SUNOTASEED"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{Name: "fleet", URLs: []string{"nats://127.0.0.1:1"}, Machine: "m", NKeyFile: f, Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "nkey_file "+f) || strings.Contains(err.Error(), "SUNOTASEED") {
		t.Fatalf("got %v", err)
	}
}
