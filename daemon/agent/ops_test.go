package agent

import (
	"bytes"
	"encoding/json"
	"testing"
)

// JSONAround, with the state between its parts, is what encoding/json
// (HTML left unescaped, as writeJSON sets it) would write.
func TestCheckpointAnswerEncodesLikeEncodingJSON(t *testing.T) {
	msg := "refused: <html> & more"
	for _, ans := range []CheckpointAnswer{
		{Seq: 7, State: json.RawMessage(`{"agent":"builder","focus":"a <b>"}`)},
		{Seq: 8, State: json.RawMessage(`{}`), Sync: []SyncedUpstream{{Name: "qday", Delivered: false, State: "retrying", Error: &msg}, {Name: "local", Delivered: true, State: "ok"}}},
	} {
		head, tail, err := ans.JSONAround()
		if err != nil {
			t.Fatal(err)
		}
		got := append(append(head, ans.State...), tail...)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(ans); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("\n got %s\nwant %s", got, want.Bytes())
		}
	}
}
