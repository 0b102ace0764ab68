package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/internal/ops"
)

// maxStreams bounds the live streams open at once on the page (a browser
// tab holds one).
const maxStreams = 32

// change is what the live stream tells the page: an agent had events (a
// snapshot's work record, a checkpoint, a signal, work lost); the page
// then fetches its view again.
type change struct {
	Agent string   `json:"agent"`
	Kinds []string `json:"kinds"`
}

// events is the page's live stream (Server-Sent Events): for each place
// the session's user may see (or the one ?agent= names), the agent's wait
// operation, as that user, in a loop; each wake-up with events is one
// message. The long polls sleep in the daemon until something happens:
// an idle page costs no work.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if s.streams.Add(1) > maxStreams {
		s.streams.Add(-1)
		s.refuse(w, r, http.StatusServiceUnavailable, "TOO_MANY_STREAMS", "too many live streams are open; close a tab of the page")
		return
	}
	defer s.streams.Add(-1)
	names := []string{r.URL.Query().Get("agent")}
	if names[0] == "" {
		st, err := call(r.Context(), s, ops.Status, ops.Args{})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		names = names[:0]
		for _, a := range st.Agents {
			if a.Damaged == "" {
				names = append(names, a.Name)
			}
		}
	}
	api.ExtendWriteDeadline(r, 0) // a stream lasts as long as the page
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": live\n\n")
	if rc.Flush() != nil {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	changes := make(chan change)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // the followers end with the stream
	for _, name := range names {
		wg.Go(func() { s.follow(ctx, name, changes) })
	}
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-changes:
			b, _ := json.Marshal(c)
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
			if rc.Flush() != nil {
				return
			}
		}
	}
}

// follow long-polls one agent's events until ctx ends, sending a change
// for each wake-up with events. A refusal (the agent went away, the
// daemon is stopping) ends it.
func (s *Server) follow(ctx context.Context, name string, out chan<- change) {
	var after string
	for ctx.Err() == nil {
		q := agentQuery(name, "max_seconds", "90")
		if after != "" {
			q.Set("after", after)
		}
		ans, err := call(ctx, s, ops.Wait, ops.Args{Query: q})
		if err != nil {
			return
		}
		after = strconv.FormatUint(ans.Cursor, 10)
		if len(ans.Events) == 0 {
			continue
		}
		c := change{Agent: name}
		for _, e := range ans.Events {
			c.Kinds = append(c.Kinds, e.Kind)
		}
		select {
		case out <- c:
		case <-ctx.Done():
			return
		}
	}
}
