// Package openapitest checks live HTTP traffic against an OpenAPI 3.1
// document, for tests: a client whose Transport is a *Transport fails any
// call whose request or answer the document does not describe. The
// checking is github.com/pb33f/libopenapi-validator's (maintained, and
// OpenAPI 3.1 with JSON Schema 2020-12), kept out of package openapi so
// the daemon that serves the document does not link it.
package openapitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
)

// Transport is an http.RoundTripper that checks each request against the
// document before sending it and each answer after: a request the
// document does not describe, or an answer it does not, is an error of
// the call (with what did not match), so the test that made it fails.
type Transport struct {
	// Base sends the requests.
	Base http.RoundTripper
	v    validator.Validator
}

// NewTransport returns a Transport checking against doc, after checking
// doc itself against the OpenAPI specification's schema.
func NewTransport(doc []byte, base http.RoundTripper) (*Transport, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("openapitest: the document does not parse: %w", err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapitest: the document does not build: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapitest: the document is not valid OpenAPI: %s", describe(verrs))
	}
	return &Transport{Base: base, v: v}, nil
}

type refusedKey struct{}

// OutsideDocument marks a request the test makes on purpose outside what
// the document describes (a body of the wrong shape, a query out of
// range): the Transport then requires that the document does not describe
// it (so the document is as strict as the API) and still checks the
// answer, which must be a refusal the document describes.
func OutsideDocument(ctx context.Context) context.Context {
	return context.WithValue(ctx, refusedKey{}, true)
}

// RoundTrip checks req, sends it, and checks the answer.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readAll(req.Body)
	if err != nil {
		return nil, err
	}
	check := req.Clone(req.Context())
	check.Body = io.NopCloser(bytes.NewReader(body))
	reqOK, reqErrs := t.v.ValidateHttpRequestSync(check)
	outside, _ := req.Context().Value(refusedKey{}).(bool)
	switch {
	case !reqOK && !outside:
		return nil, fmt.Errorf("openapitest: %s %s: the request does not match the document: %s", req.Method, req.URL.RequestURI(), describe(reqErrs))
	case reqOK && outside:
		return nil, fmt.Errorf("openapitest: %s %s: the request was made outside the document on purpose, but the document accepts it", req.Method, req.URL.RequestURI())
	}
	send := req.Clone(req.Context())
	if req.Body != nil {
		send.Body = io.NopCloser(bytes.NewReader(body))
		send.ContentLength = int64(len(body))
	}
	resp, err := t.Base.RoundTrip(send)
	if err != nil {
		return nil, err
	}
	answer, err := readAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	check = req.Clone(req.Context())
	check.Body = io.NopCloser(bytes.NewReader(body))
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	ok, errs := t.v.ValidateHttpResponse(check, resp)
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	if !ok {
		return nil, fmt.Errorf("openapitest: %s %s: the answer (%d) does not match the document: %s\nanswer: %.2000s",
			req.Method, req.URL.RequestURI(), resp.StatusCode, describe(errs), answer)
	}
	return resp, nil
}

func readAll(r io.ReadCloser) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	defer r.Close()
	return io.ReadAll(r)
}

// describe lists validation errors with the schema failures under them.
func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  - %s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      at %s (%s): %s", se.FieldPath, se.KeywordLocation, se.Reason)
		}
	}
	return b.String()
}
