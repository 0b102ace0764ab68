package openapitest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/daemonside/openapi"
	"github.com/continuityd/continuityd/internal/daemonside/openapi/openapitest"
)

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type note struct {
	Text string `json:"text"`
	Size int    `json:"size"`
}

// notesDoc describes GET and PUT /notes/{id}.
func notesDoc(t *testing.T) []byte {
	t.Helper()
	doc, err := openapi.Document(openapi.Info{Title: "notes", Version: "1", ErrorBody: apiError{}}, []openapi.Operation{
		{ID: "getNote", Method: "GET", Path: "/notes/{id}", Answer: note{}, Errors: []int{404}},
		{ID: "putNote", Method: "PUT", Path: "/notes/{id}", Request: note{}, Answer: note{}, Errors: []int{400}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// notesServer answers every request with the status and body the test
// sets, whatever was asked.
func notesServer(t *testing.T, status *int, body *string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(*status)
		io.WriteString(w, *body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTransportChecksRequestsAndAnswers(t *testing.T) {
	status, answer := 200, `{"text":"hi","size":2}`
	srv := notesServer(t, &status, &answer)
	tr, err := openapitest.NewTransport(notesDoc(t), http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	call := func(ctx context.Context, method, path, body string) error {
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if got, _ := io.ReadAll(resp.Body); string(got) != answer {
			t.Errorf("the answer reached the caller as %q, want %q", got, answer)
		}
		return nil
	}
	ctx := context.Background()
	mustFail := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want one saying %q", err, want)
		}
	}

	if err := call(ctx, "GET", "/notes/a", ""); err != nil {
		t.Errorf("a described call failed: %v", err)
	}
	if err := call(ctx, "PUT", "/notes/a", `{"text":"hi","size":2}`); err != nil {
		t.Errorf("a described call with a body failed: %v", err)
	}
	status, answer = 404, `{"error":{"code":"NOT_FOUND","message":"no note a"}}`
	if err := call(ctx, "GET", "/notes/a", ""); err != nil {
		t.Errorf("a described refusal failed: %v", err)
	}

	status, answer = 200, `{"text":"hi","size":"two"}`
	mustFail(call(ctx, "GET", "/notes/a", ""), "the answer (200) does not match")
	status, answer = 200, `{"text":"hi","size":2,"extra":true}`
	mustFail(call(ctx, "GET", "/notes/a", ""), "the answer (200) does not match")
	status, answer = 404, `{"code":"NOT_FOUND"}`
	mustFail(call(ctx, "GET", "/notes/a", ""), "the answer (404) does not match")
	status, answer = 500, `{"error":{"code":"INTERNAL","message":"x"}}`
	mustFail(call(ctx, "GET", "/notes/a", ""), "the answer (500) does not match")

	status, answer = 400, `{"error":{"code":"INVALID","message":"size must be a number"}}`
	mustFail(call(ctx, "PUT", "/notes/a", `{"text":"hi","size":"two"}`), "the request does not match")
	mustFail(call(ctx, "DELETE", "/notes/a", ""), "the request does not match")
	if err := call(openapitest.OutsideDocument(ctx), "PUT", "/notes/a", `{"text":"hi","size":"two"}`); err != nil {
		t.Errorf("a request made outside the document on purpose, refused as described: %v", err)
	}
	mustFail(call(openapitest.OutsideDocument(ctx), "PUT", "/notes/a", `{"text":"hi","size":2}`), "but the document accepts it")
}

func TestNewTransportRefusesAnInvalidDocument(t *testing.T) {
	_, err := openapitest.NewTransport([]byte(`{"openapi":"3.1.0","info":{"title":"x"},"paths":{"/a":{"get":{"responses":{"200":{}}}}}}`), http.DefaultTransport)
	if err == nil {
		t.Fatal("a document without info.version or a response description was taken")
	}
}
