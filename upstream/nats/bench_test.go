package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/capsule"
)

// BenchmarkDelivery measures Deliver to a local server beside its
// baseline, raw synchronous JetStream publishes of the same bodies (same
// subject, headers and message ids) from one plain client, interleaved in
// the same run. ratio = baseline time / Deliver time: the share of the raw
// publish rate Deliver reaches (target ≥ 0.5).
//
//	go test -run '^$' -bench Delivery -benchtime 5000x ./upstream/nats/
func BenchmarkDelivery(b *testing.B) {
	s := startServer(b, testServerOpts(b.TempDir()))
	c := newTestClient(b, []string{serverURL(s)}, nil)
	ctx := context.Background()
	if err := c.Deliver(ctx, "bench", focusWrite("warm", 0, "warm up")); err != nil {
		b.Fatal(err)
	}
	_, js := rawJS(b, serverURL(s))
	var deliver, raw time.Duration
	b.ResetTimer()
	for i := range b.N {
		w := focusWrite("d", uint64(i+1), "migrate the billing module: swap the callsites in checkout")
		t0 := time.Now()
		if err := c.Deliver(ctx, "bench", w); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		rw := w
		rw.IdempotencyKey = fmt.Sprintf("raw-%d", i)
		body, _ := encodeWrite(rw)
		m := &natsgo.Msg{Subject: "continuityd.writes.raw.checkpoint", Data: body, Header: natsgo.Header{}}
		m.Header.Set(natsgo.MsgIdHdr, rw.IdempotencyKey)
		m.Header.Set(HeaderSeq, fmt.Sprint(rw.Seq))
		m.Header.Set(HeaderMachine, "m1")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		deliver += t1.Sub(t0)
		raw += t2.Sub(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(deliver.Nanoseconds())/float64(b.N), "deliver-ns/op")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(raw)/float64(deliver), "ratio")
}

// BenchmarkRestore10k measures restoring an agent with 10,000 writes in
// its history (Restore, then Replay of every write decoded), beside its
// baseline: reading the same 10,000 messages with a plain ordered consumer
// and no decoding. ratio = baseline / restore.
//
//	go test -run '^$' -bench Restore10k -benchtime 5x ./upstream/nats/
func BenchmarkRestore10k(b *testing.B) {
	const n = 10000
	s := startServer(b, testServerOpts(b.TempDir()))
	c := newTestClient(b, []string{serverURL(s)}, nil)
	ctx := context.Background()
	if err := c.Deliver(ctx, "big", focusWrite("r", 1, "first")); err != nil {
		b.Fatal(err)
	}
	_, js := rawJS(b, serverURL(s))
	var futs []jetstream.PubAckFuture
	for seq := uint64(2); seq <= n; seq++ {
		w := focusWrite("r", seq, "migrate the billing module: swap the callsites in checkout")
		body, _ := encodeWrite(w)
		m := &natsgo.Msg{Subject: "continuityd.writes.big.checkpoint", Data: body, Header: natsgo.Header{}}
		m.Header.Set(natsgo.MsgIdHdr, w.IdempotencyKey)
		m.Header.Set(HeaderSeq, fmt.Sprint(seq))
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			b.Fatal(err)
		}
		futs = append(futs, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		b.Fatal("async publishes never completed")
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		}
	}
	if _, err := c.PutState(ctx, "big", resumeDoc(b, "big", 0, "f", "", 0), 0); err != nil {
		b.Fatal(err)
	}
	var restore, base time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		r, err := c.Restore(ctx, "big")
		if err != nil || r.LastSeq != n {
			b.Fatal(r, err)
		}
		got := 0
		if err := c.Replay(ctx, "big", r.Seq+1, func(capsule.Write) error { got++; return nil }); err != nil || got != n {
			b.Fatal(got, err)
		}
		t1 := time.Now()
		cons, err := js.OrderedConsumer(ctx, DefaultStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"continuityd.writes.big.*"}})
		if err != nil {
			b.Fatal(err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(512))
		if err != nil {
			b.Fatal(err)
		}
		for range n {
			if _, err := it.Next(); err != nil {
				b.Fatal(err)
			}
		}
		it.Stop()
		t2 := time.Now()
		restore += t1.Sub(t0)
		base += t2.Sub(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms/op")
	b.ReportMetric(float64(base.Milliseconds())/float64(b.N), "raw-read-ms/op")
	b.ReportMetric(float64(base)/float64(restore), "ratio")
}
