package guard

import (
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

func TestDecodeRestoreRequest(t *testing.T) {
	for _, body := range []string{"", "  ", "{}", `{"paths":null}`} {
		req, err := DecodeRestoreRequest([]byte(body))
		if err != nil || req.DryRun || req.All || len(req.Paths) != 0 {
			t.Fatalf("%q: %+v %v", body, req, err)
		}
	}
	req, err := DecodeRestoreRequest([]byte(`{"paths":["src/a.go","b"],"dry_run":true}`))
	if err != nil || !req.DryRun || !slices.Equal(req.Paths, []string{"src/a.go", "b"}) {
		t.Fatalf("%+v %v", req, err)
	}
	if req, err := DecodeRestoreRequest([]byte(`{"all":true,"paths":null}`)); err != nil || !req.All {
		t.Fatalf("all: %+v %v", req, err)
	}
	for body, want := range map[string]struct{ code, field string }{
		`{"all":1}`:                        {capsule.CodeInvalidField, "all"},
		`{"all":true,"paths":["a"]}`:       {capsule.CodeInvalidField, "all"},
		`{"paths":"a"}`:                    {capsule.CodeInvalidField, "paths"},
		`{"paths":["a",3]}`:                {capsule.CodeInvalidField, "paths[1]"},
		`{"dry_run":"yes"}`:                {capsule.CodeInvalidField, "dry_run"},
		`{"path":["a"]}`:                   {capsule.CodeUnknownField, "path"},
		`{"dry_run":true,"dry_run":false}`: {capsule.CodeInvalidJSON, ""},
		`["a"]`:                            {capsule.CodeInvalidJSON, ""},
		`{"paths":["a","\"open"]}`:         {capsule.CodeInvalidField, "paths[1]"},
		`{"paths":["\"bad \\q\""]}`:        {capsule.CodeInvalidField, "paths[0]"},
	} {
		_, err := DecodeRestoreRequest([]byte(body))
		ce, ok := err.(*capsule.Error)
		if !ok || ce.Code != want.code || (want.field != "" && ce.Field != want.field) {
			t.Errorf("%s: %v, want %s %s", body, err, want.code, want.field)
			continue
		}
		if strings.Contains(ce.Message, "of type") || strings.Contains(ce.Message, "Go value") {
			t.Errorf("%s: a Go type in %q", body, ce.Message)
		}
	}
}

// A path in the body is in its exact form (termsafe.Exact): one that
// begins with a double quote is unquoted, with C escapes, so a name that
// is not UTF-8 (which JSON cannot carry as it is) or that begins with a
// quote comes through whole; any other is the name itself, backslashes
// and line breaks included.
func TestDecodeRestoreRequestExactPaths(t *testing.T) {
	req, err := DecodeRestoreRequest([]byte(`{"paths":["\"\\377.txt\"","\"\\xfe\\n\\\\ \\\"q\\\"\"","dir\\file","a\nb","\"\\\"quoted\\\"\""]}`))
	want := []string{"\xff.txt", "\xfe\n\\ \"q\"", `dir\file`, "a\nb", `"quoted"`}
	if err != nil || !slices.Equal(req.Paths, want) {
		t.Fatalf("paths %q, %v; want %q", req.Paths, err, want)
	}
}

func TestDecodeLostRestoreRequest(t *testing.T) {
	for body, dry := range map[string]bool{"": false, "{}": false, `{"dry_run":true}`: true} {
		req, err := DecodeLostRestoreRequest([]byte(body))
		if err != nil || req.DryRun != dry {
			t.Errorf("%q: %+v %v", body, req, err)
		}
	}
	for body, want := range map[string]struct{ code, field string }{
		`{"paths":["a"]}`:  {capsule.CodeUnknownField, "paths"},
		`{"dry_run":"1"}`:  {capsule.CodeInvalidField, "dry_run"},
		`{"dry_run":true,`: {capsule.CodeInvalidJSON, ""},
	} {
		_, err := DecodeLostRestoreRequest([]byte(body))
		ce, ok := err.(*capsule.Error)
		if !ok || ce.Code != want.code || (want.field != "" && ce.Field != want.field) {
			t.Errorf("%s: %v, want %s %s", body, err, want.code, want.field)
		}
	}
}
