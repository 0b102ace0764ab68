package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/atomicfile"
)

// mcpFloorEnv, set in the environment of this test binary, makes it the
// MCP floor of BenchmarkMCPStdioVsReference instead of running tests
// (TestMain): the least a stdio MCP server can do. It reads a line,
// decodes the id and method, and writes an answer made in advance: a tool
// call's is a result of the size the variable gives (characters of the
// result's JSON, as the harness counts them). No SDK, no tool, no disk:
// what remains of a call is the client, the pipes and two wake-ups.
const mcpFloorEnv = "CONTINUITYD_TEST_MCP_FLOOR"

// mcpFloorSyncEnv, set too, names a preallocated file (mcpFloorLog): the
// floor is then the least a durable server can do. A checkpoint call's
// request line is written into the file and fdatasync'ed before the
// answer, as our checkpoint is in the log before its answer; a resume
// reads nothing.
const mcpFloorSyncEnv = "CONTINUITYD_TEST_MCP_FLOOR_SYNC"

// mcpFloorLogSize is the size of the durable floor's file, made (zeros,
// synced) by createMCPFloorLog before the floor starts: its writes then
// change no metadata, as the residency's preallocated log.
const mcpFloorLogSize = 4 << 20

// createMCPFloorLog makes the durable floor's preallocated file.
func createMCPFloorLog(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, mcpFloorLogSize))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// serveMCPFloor serves the floor on in and out until in ends; log, when
// not nil, is the durable floor's file.
func serveMCPFloor(in io.Reader, out io.Writer, size int, log *os.File) int {
	pad := func(fixed string) string {
		if n := size - len(fixed) - 2*len(`""`); n > 0 {
			return strings.Repeat("x", n/2)
		}
		return ""
	}
	text := pad(`{"content":[{"type":"text","text":}],"structuredContent":{"text":}}`)
	call, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": text}},
		"structuredContent": map[string]any{"text": text},
	})
	tools := `{"tools":[{"name":"checkpoint","inputSchema":{"type":"object"}},{"name":"resume","inputSchema":{"type":"object"}}]}`
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	var off int64
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue // a notification
		}
		result := []byte("{}")
		switch m.Method {
		case "initialize":
			result = []byte(`{"protocolVersion":` + strconv.Quote(m.Params.ProtocolVersion) + `,"capabilities":{"tools":{}},"serverInfo":{"name":"floor","version":"1"}}`)
		case "tools/list":
			result = []byte(tools)
		case "tools/call":
			result = call
			if log != nil && m.Params.Name == "checkpoint" {
				if off+int64(len(line)) > mcpFloorLogSize {
					off = 0
				}
				if _, err := log.WriteAt(line, off); err != nil {
					return 1
				}
				off += int64(len(line))
				if err := atomicfile.SyncData(log); err != nil {
					return 1
				}
			}
		}
		w.WriteString(`{"jsonrpc":"2.0","id":`)
		w.Write(m.ID)
		w.WriteString(`,"result":`)
		w.Write(result)
		w.WriteString("}\n")
		if w.Flush() != nil {
			return 1
		}
	}
}

// mcpFloorMain is TestMain's branch for the floor: it serves, then exits.
func mcpFloorMain() {
	size, _ := strconv.Atoi(os.Getenv(mcpFloorEnv))
	var log *os.File
	if path := os.Getenv(mcpFloorSyncEnv); path != "" {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "the durable MCP floor:", err)
			os.Exit(1)
		}
		log = f
	}
	os.Exit(serveMCPFloor(os.Stdin, os.Stdout, size, log))
}

// TestMCPDurableFloorWritesCheckpoints: the durable floor answers every
// call, and a checkpoint's request is in its file (synced) when the
// answer comes; a resume writes nothing.
func TestMCPDurableFloorWritesCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "floor.log")
	if err := createMCPFloorLog(path); err != nil {
		t.Fatal(err)
	}
	log, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	calls := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkpoint","arguments":{"focus":"first"}}}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"resume","arguments":{}}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"checkpoint","arguments":{"focus":"second"}}}
`
	var out bytes.Buffer
	if code := serveMCPFloor(strings.NewReader(calls), &out, 100, log); code != 0 {
		t.Fatalf("the floor exited %d", code)
	}
	if n := strings.Count(out.String(), `"result":`); n != 3 {
		t.Fatalf("%d answers, want 3:\n%s", n, out.String())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != mcpFloorLogSize {
		t.Fatalf("the file is %d bytes, want its preallocated %d", len(raw), mcpFloorLogSize)
	}
	lines := strings.Split(strings.TrimRight(string(bytes.TrimRight(raw, "\x00")), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"first"`) || !strings.Contains(lines[1], `"second"`) {
		t.Fatalf("the file holds %q, want the two checkpoints' requests", lines)
	}
}
