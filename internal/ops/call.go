package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Args are what a call sends besides the operation: the path's {id}, the
// query, the body as JSON (nil: none).
type Args struct {
	ID    string
	Query url.Values
	Body  []byte
}

// Route is the request a call of o with a makes: its method, its path with
// {id} filled in, its query (with When's parameter for a second answer of a
// route). A query parameter the operation does not take, or a missing id,
// is a mistake of the caller's code, not of the user's input.
func (o Op) Route(a Args) (method, path string, q url.Values, err error) {
	q = url.Values{}
	for k, v := range a.Query {
		if !slices.ContainsFunc(o.Params, func(p Param) bool { return p.Name == k && p.In == "query" }) {
			return "", "", nil, fmt.Errorf("ops: %s takes no query parameter %q", o.Name, k)
		}
		q[k] = v
	}
	if k, v, ok := strings.Cut(o.When, "="); ok {
		q.Set(k, v)
	}
	path = o.Path
	if strings.Contains(path, "{id}") {
		if a.ID == "" {
			return "", "", nil, fmt.Errorf("ops: %s needs an id", o.Name)
		}
		path = strings.Replace(path, "{id}", url.PathEscape(a.ID), 1)
	} else if a.ID != "" {
		return "", "", nil, fmt.Errorf("ops: %s takes no id", o.Name)
	}
	if a.Body != nil && o.Request == nil {
		return "", "", nil, fmt.Errorf("ops: %s takes no body", o.Name)
	}
	return o.Method, path, q, nil
}

// Route is the request a call of e with a makes (Op.Route).
func (e Endpoint[Req, Ans]) Route(a Args) (method, path string, q url.Values, err error) {
	return e.op.Route(a)
}

// Encode is req as the operation's body.
func (e Endpoint[Req, Ans]) Encode(req *Req) ([]byte, error) {
	return json.Marshal(req)
}

// Decode reads an answer of the operation. An answer this client does not
// understand (a daemon of another version, something else on the socket)
// is an error that says so; it is never ignored.
func (e Endpoint[Req, Ans]) Decode(out []byte) (*Ans, error) {
	var ans Ans
	if err := json.Unmarshal(out, &ans); err != nil {
		return nil, e.op.foreign(err)
	}
	return &ans, nil
}

// Decode reads an answer of the operation into a value of its answer
// type (Endpoint.Decode, for a caller that holds the table's entry only).
func (o Op) Decode(out []byte) (any, error) {
	t := o.AnswerType()
	if t == nil {
		return nil, fmt.Errorf("ops: %s answers no JSON", o.Name)
	}
	v := reflect.New(t)
	if err := json.Unmarshal(out, v.Interface()); err != nil {
		return nil, o.foreign(err)
	}
	return v.Elem().Interface(), nil
}

// foreign is the error for an answer of o this client does not understand.
func (o Op) foreign(err error) error {
	return fmt.Errorf("the daemon's answer to %s %s is not what this client understands (another version?): %w", o.Method, o.Path, err)
}

// Doer sends one request to the daemon and returns its answer: a 2xx
// answer's body, or an error (internal/client's Client, over the socket or
// in process). wait is what the call waits by design, beyond an ordinary
// answer.
type Doer interface {
	DoWaiting(ctx context.Context, wait time.Duration, method, path string, query url.Values, body []byte) ([]byte, error)
}

// Do calls the operation through c and returns its answer as it came (for
// --json, and for the MCP tools, which pass it on).
func (o Op) Do(ctx context.Context, c Doer, a Args) ([]byte, error) {
	method, path, q, err := o.Route(a)
	if err != nil {
		return nil, err
	}
	return c.DoWaiting(ctx, o.Waits(q), method, path, q, a.Body)
}

// Do calls the operation through c and returns its answer as it came
// (Op.Do).
func (e Endpoint[Req, Ans]) Do(ctx context.Context, c Doer, a Args) ([]byte, error) {
	return e.op.Do(ctx, c, a)
}

// Call calls the operation through c and decodes its answer; raw is the
// answer as it came.
func (e Endpoint[Req, Ans]) Call(ctx context.Context, c Doer, a Args) (ans *Ans, raw []byte, err error) {
	raw, err = e.Do(ctx, c, a)
	if err != nil {
		return nil, raw, err
	}
	ans, err = e.Decode(raw)
	return ans, raw, err
}
