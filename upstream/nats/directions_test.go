package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type waitAns struct {
	Woke   string      `json:"woke"`
	Events []direction `json:"events"`
}

func wait(t *testing.T, c *Client, agent string, secs int) waitAns {
	t.Helper()
	raw, err := c.Wait(ctxT(t), agent, secs)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	var a waitAns
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("wait answer %s: %v", raw, err)
	}
	return a
}

func publishDirection(t *testing.T, js jetstream.JetStream, subj, id, body string) {
	t.Helper()
	m := &natsgo.Msg{Subject: subj, Data: []byte(body), Header: natsgo.Header{}}
	if id != "" {
		m.Header.Set(natsgo.MsgIdHdr, id)
	}
	if _, err := js.PublishMsg(ctxT(t), m); err != nil {
		t.Fatalf("publish direction: %v", err)
	}
}

func TestDirectionsReachTheAgentOncePerMessageID(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	c := newTestClient(t, []string{serverURL(s)}, nil)
	_, js := rawJS(t, serverURL(s))
	ctx := ctxT(t)

	// Nothing there: a timeout answer in Q-Day's shape.
	if a := wait(t, c, "builder", 1); a.Woke != "timeout" || a.Events == nil || len(a.Events) != 0 {
		t.Fatalf("empty wait: %+v", a)
	}
	subj := c.DirectionSubject("builder")
	if subj != "continuityd.directions.builder" {
		t.Fatalf("subject %s", subj)
	}
	publishDirection(t, js, subj, "d-1", "rebase on main first")
	publishDirection(t, js, subj, "d-1", "rebase on main first") // the operator's retry
	publishDirection(t, js, subj, "d-2", `{"text":"pause the deploy","from":"ops"}`)
	publishDirection(t, js, subj, "", "no id given")
	publishDirection(t, js, c.DirectionSubject("other"), "d-9", "for another agent")

	var got []direction
	for len(got) < 3 {
		a := wait(t, c, "builder", 5)
		if a.Woke != "event" {
			t.Fatalf("woke %q with %d of 3", a.Woke, len(got))
		}
		got = append(got, a.Events...)
	}
	if len(got) != 3 || got[0].ID != "d-1" || got[0].Text != "rebase on main first" || got[1].ID != "d-2" ||
		string(got[1].Body) != `{"text":"pause the deploy","from":"ops"}` || got[2].ID == "" || got[2].Text != "no id given" || got[2].Kind != "direction" {
		t.Fatalf("directions: %+v", got)
	}
	if a := wait(t, c, "builder", 1); a.Woke != "timeout" {
		t.Fatalf("delivered again: %+v", a)
	}

	// The agent resumed on another machine: the durable consumer has them
	// acknowledged, so they are not relayed again; a new one is.
	c2 := newTestClient(t, []string{serverURL(s)}, func(o *Options) { o.Machine = "m2" })
	publishDirection(t, js, subj, "d-3", "new one")
	if a := wait(t, c2, "builder", 5); a.Woke != "event" || len(a.Events) != 1 || a.Events[0].ID != "d-3" {
		t.Fatalf("after the move: %+v", a)
	}

	// A redelivery of a relayed id (its acknowledgement lost) is dropped.
	cons, err := js.Consumer(ctx, DefaultStream, ConsumerName("builder"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil || info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("consumer %+v %v", info, err)
	}

	// Resume shows the directions this daemon relayed, each once.
	raw, err := c.Resume(ctx, "builder")
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		Directions []direction `json:"directions"`
	}
	if json.Unmarshal(raw, &view) != nil || len(view.Directions) != 3 || view.Directions[0].ID != "d-1" {
		t.Fatalf("resume directions: %s", raw)
	}
}

func TestSeenSetForgetsOnlyTheOldest(t *testing.T) {
	s := &seenSet{ids: map[string]struct{}{}}
	if !s.add("a") || s.add("a") {
		t.Fatal("a repeated id counted as new")
	}
	for i := range seenIDs {
		s.add(fmt.Sprint(i))
	}
	if len(s.ids) != seenIDs || !s.add("a") || s.add(fmt.Sprint(seenIDs-1)) {
		t.Fatalf("bound: %d ids", len(s.ids))
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	s := startServer(t, testServerOpts(t.TempDir()))
	c := newTestClient(t, []string{serverURL(s)}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	subs := s.NumSubscriptions()
	go func() {
		_, err := c.Wait(ctx, "builder", 90)
		done <- err
	}()
	// Cancelled while it waits: once the server holds its subscription.
	for deadline := time.Now().Add(60 * time.Second); s.NumSubscriptions() <= subs; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the wait never subscribed (%d subscriptions)", s.NumSubscriptions())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled wait answered")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("wait ignored its context")
	}
}
