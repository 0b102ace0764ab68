package outbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream"
)

// A rejected upstream says why in last_error, even after later writes went
// through and after a restart: the upstream's code and message.
func TestRejectedStateNamesTheRefusal(t *testing.T) {
	refusal := &upstream.Error{Outcome: upstream.Rejected, Code: "SESSION_NOT_FOUND",
		Err: errors.New("leave_hive_note refused: session_id is not a session Delx issued")}
	up := &scripted{answers: []error{refusal}}
	r := newRig(t, up, Options{})
	r.run()
	r.write(decide("bad"))
	good := r.write(decide("good"))
	r.waitDelivered(good)
	st := r.sh.State()
	if st.State != capsule.UpstreamRejected || st.LastError == nil ||
		!strings.Contains(*st.LastError, "SESSION_NOT_FOUND") || !strings.Contains(*st.LastError, "not a session Delx issued") {
		t.Fatalf("state %+v (last_error %v)", st, st.LastError)
	}
	// A new shipper (a restart) reads it from the dead letter.
	sh := New(Options{Agent: "a", Store: r.store, Upstream: up, Upstreams: []string{"up"}})
	if st := sh.State(); st.LastError == nil || !strings.Contains(*st.LastError, "SESSION_NOT_FOUND") {
		t.Fatalf("after a restart: %+v", st)
	}
}
