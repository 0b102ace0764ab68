package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule/guard"
)

// MaxMessageBytes bounds one MCP message, on every transport continuityd
// serves (/mcp's bodies, stdio's lines): the API's largest body and room
// for the JSON-RPC envelope around it, so any body the API takes also fits
// as a tool's arguments.
const MaxMessageBytes = guard.MaxBodyBytes + 4<<10

// LineTransport is MCP's stdio transport (one JSON-RPC message per line,
// no batches, as in protocol 2025-06-18 and later) on a reader and a
// writer.
//
// It is the SDK's mcp.IOTransport less its cost per message: that one
// probes each line for a batch and then decodes it twice more, each time
// through a Decoder that takes a fresh 32 KiB buffer, and hands the line
// between two goroutines before the SDK's own reader sees it; a call paid
// more in garbage collection than in its work (docs/PERFORMANCE.md, "MCP
// over stdio against the reference memory server"). Here a line is read
// and decoded once, by the goroutine that asks for it.
//
// A line that is no message (not JSON, a batch, longer than MaxLine, no
// "jsonrpc":"2.0") is answered with a JSON-RPC error naming what is wrong
// and the session goes on; the SDK's transport ends it. Read must be
// unblocked by Close: In must be a pipe or socket the runtime polls (an
// *os.File made by os.Pipe or from a non-blocking descriptor) or a reader
// whose Close ends a pending Read.
type LineTransport struct {
	In  io.ReadCloser
	Out io.WriteCloser
	// MaxLine bounds one message in bytes (0: MaxMessageBytes).
	MaxLine int
}

// Connect implements mcp.Transport.
func (t *LineTransport) Connect(context.Context) (mcp.Connection, error) {
	max := t.MaxLine
	if max <= 0 {
		max = MaxMessageBytes
	}
	return &lineConn{in: t.In, out: t.Out, r: bufio.NewReaderSize(t.In, 16<<10), max: max, closed: make(chan struct{})}, nil
}

type lineConn struct {
	in  io.ReadCloser
	out io.WriteCloser
	r   *bufio.Reader // read by one goroutine at a time: the SDK's reader
	max int
	// long holds a line longer than r's buffer while it is read.
	long []byte

	writeMu sync.Mutex

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// errLineTooLong is a line over MaxLine, read to its end and dropped.
var errLineTooLong = errors.New("line too long")

// Read implements mcp.Connection: the next message, answering every line
// that is none (see LineTransport) and going on. It returns io.EOF when
// In ends, and when the connection is closed.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line, err := c.readLine()
		if errors.Is(err, errLineTooLong) {
			if err := c.refuse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("a message over %d bytes: this server takes one JSON-RPC message per line, up to %d bytes", c.max, c.max)); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			select {
			case <-c.closed:
				return nil, io.EOF
			default:
			}
			return nil, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		msg, id, code, problem := decodeLine(line)
		if msg != nil {
			return msg, nil
		}
		if err := c.refuse(id, code, problem); err != nil {
			return nil, err
		}
	}
}

// readLine returns the next line, its newline included; valid until the
// next call. A last line without a newline is returned too.
func (c *lineConn) readLine() ([]byte, error) {
	chunk, err := c.r.ReadSlice('\n')
	if err == nil || (err == io.EOF && len(chunk) > 0) {
		if len(chunk) > c.max {
			return nil, errLineTooLong
		}
		return chunk, nil
	}
	if err != bufio.ErrBufferFull {
		return nil, err
	}
	c.long = append(c.long[:0], chunk...)
	over := false
	for {
		chunk, err = c.r.ReadSlice('\n')
		if !over && len(c.long)+len(chunk) > c.max {
			over, c.long = true, c.long[:0]
		}
		if !over {
			c.long = append(c.long, chunk...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil && (err != io.EOF || (len(c.long) == 0 && !over)):
			return nil, err
		case over:
			c.long = nil // what a long line grew is not kept for the session
			return nil, errLineTooLong
		}
		line := c.long
		if cap(c.long) > 64<<10 {
			c.long = nil
		}
		return line, nil
	}
}

// decodeLine decodes one line, with the keys spelled exactly as JSON-RPC
// does (the SDK matches them so too). When it is no message it returns
// the request's id if one could be read (raw JSON, nil: null), the
// JSON-RPC error code and what is wrong.
func decodeLine(line []byte) (_ jsonrpc.Message, id json.RawMessage, code int64, problem string) {
	if line[0] == '[' {
		return nil, nil, jsonrpc.CodeInvalidRequest, "a JSON-RPC batch: MCP 2025-06-18 and later have none; send one message per line"
	}
	var wire map[string]json.RawMessage
	if err := json.Unmarshal(line, &wire); err != nil {
		return nil, nil, jsonrpc.CodeParseError, "not a JSON object: " + err.Error()
	}
	id = wire["id"]
	var version string
	if err := json.Unmarshal(wire["jsonrpc"], &version); err != nil || version != "2.0" {
		return nil, id, jsonrpc.CodeInvalidRequest, `no "jsonrpc": "2.0" in the message`
	}
	var idValue any
	if id != nil {
		if err := json.Unmarshal(id, &idValue); err != nil {
			return nil, nil, jsonrpc.CodeInvalidRequest, "the message's id: " + err.Error()
		}
	}
	rid, err := jsonrpc.MakeID(idValue)
	if err != nil {
		return nil, nil, jsonrpc.CodeInvalidRequest, "the message's id is neither a string nor a number"
	}
	if raw, ok := wire["method"]; ok {
		var method string
		if err := json.Unmarshal(raw, &method); err != nil {
			return nil, id, jsonrpc.CodeInvalidRequest, "the message's method is not a string"
		}
		return &jsonrpc.Request{ID: rid, Method: method, Params: wire["params"]}, nil, 0, ""
	}
	if !rid.IsValid() {
		return nil, nil, jsonrpc.CodeInvalidRequest, "a message with neither a method nor an id"
	}
	resp := &jsonrpc.Response{ID: rid, Result: wire["result"]}
	if raw, ok := wire["error"]; ok && !bytes.Equal(raw, []byte("null")) {
		var werr jsonrpc.Error
		if err := json.Unmarshal(raw, &werr); err != nil {
			return nil, nil, jsonrpc.CodeInvalidRequest, "the response's error: " + err.Error()
		}
		resp.Error = &werr
	}
	return resp, nil, 0, ""
}

// refuse answers a line that is no message with a JSON-RPC error, its id
// the request's when it could be read (else null, as JSON-RPC says).
func (c *lineConn) refuse(id json.RawMessage, code int64, problem string) error {
	if id == nil {
		id = json.RawMessage("null")
	}
	answer, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: problem}})
	if err != nil {
		return err
	}
	return c.writeLine(answer)
}

// Write implements mcp.Connection: the message and its newline in one
// write, so a client never sees half of one.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	return c.writeLine(data)
}

// writeLine writes data, which it may append to, and a newline.
func (c *lineConn) writeLine(data []byte) error {
	data = append(data, '\n')
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.out.Write(data)
	return err
}

// Close implements mcp.Connection: it closes In and Out, once.
func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.closeErr = errors.Join(c.in.Close(), c.out.Close())
	})
	return c.closeErr
}

// SessionID implements mcp.Connection: stdio has no session id.
func (c *lineConn) SessionID() string { return "" }
