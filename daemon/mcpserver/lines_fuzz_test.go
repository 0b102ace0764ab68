package mcpserver

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FuzzDecodeLine: whatever a client writes on a line, decodeLine returns
// a message or what is wrong with it, never both or neither; a message
// encodes again; a refusal's answer is one line of JSON.
//
//	go test -run '^$' -fuzz FuzzDecodeLine -fuzztime 60s ./daemon/mcpserver/
func FuzzDecodeLine(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"resume","arguments":{"peek":true}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"x","result":{}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":2,"error":null,"result":1}`,
		`[{"jsonrpc":"2.0","id":7,"method":"ping"}]`,
		`{"id":8,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":3}`,
		`{"JSONRPC":"2.0","ID":10,"METHOD":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\x01\"}",
		"hello\x00",
		`"just a string"`,
		`null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return // Read skips blank lines before decoding
		}
		msg, id, code, problem := decodeLine(line)
		if (msg == nil) == (problem == "") {
			t.Fatalf("%q: message %v and problem %q: want exactly one", line, msg, problem)
		}
		if msg != nil {
			if _, err := jsonrpc.EncodeMessage(msg); err != nil {
				t.Fatalf("%q: the message does not encode again: %v", line, err)
			}
			return
		}
		if code != jsonrpc.CodeParseError && code != jsonrpc.CodeInvalidRequest {
			t.Errorf("%q: code %d", line, code)
		}
		if id != nil && !json.Valid(id) {
			t.Errorf("%q: the id echoed is not JSON: %q", line, id)
		}
		var out bytes.Buffer
		c := &lineConn{out: nopWriteCloser{&out}}
		if err := c.refuse(id, code, problem); err != nil {
			t.Fatalf("%q: the refusal does not encode: %v", line, err)
		}
		answer := out.Bytes()
		if bytes.IndexByte(answer, '\n') != len(answer)-1 || !json.Valid(answer[:len(answer)-1]) {
			t.Fatalf("%q: the refusal is not one line of JSON: %q", line, answer)
		}
		for _, b := range answer[:len(answer)-1] {
			if b < 0x20 {
				t.Fatalf("%q: the refusal carries a control character: %q", line, answer)
			}
		}
	})
}

type nopWriteCloser struct{ *bytes.Buffer }

func (nopWriteCloser) Close() error { return nil }
