package guard

import (
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

func TestDecodeTakeRequest(t *testing.T) {
	g := testGuard(t)
	for _, body := range []string{"", " ", "{}"} {
		if req, err := g.DecodeTakeRequest([]byte(body)); err != nil || req.Message != "" {
			t.Fatalf("%q: %+v %v", body, req, err)
		}
	}
	if req, err := g.DecodeTakeRequest([]byte(`{"message":"before the parser rewrite"}`)); err != nil || req.Message != "before the parser rewrite" {
		t.Fatalf("%+v %v", req, err)
	}
	secret := "ghp_" + fake(4, alnum, 36)
	for body, want := range map[string]struct{ code, field string }{
		`{"message":3}`:                                  {capsule.CodeInvalidField, "message"},
		`{"message":"a\nb"}`:                             {capsule.CodeInvalidField, "message"},
		`{"message":"a\u0007b"}`:                         {capsule.CodeInvalidField, "message"},
		`{"message":"` + strings.Repeat("x", 501) + `"}`: {capsule.CodeInvalidField, "message"},
		`{"message":"token ` + secret + `"}`:             {capsule.CodeSecretDetected, "message"},
		`{"note":"a"}`:                                   {capsule.CodeUnknownField, "note"},
		`{"message":"a","message":"b"}`:                  {capsule.CodeInvalidJSON, "message"},
	} {
		_, err := g.DecodeTakeRequest([]byte(body))
		ce, ok := err.(*capsule.Error)
		if !ok || ce.Code != want.code || ce.Field != want.field {
			t.Errorf("%.60s: %v, want %s %s", body, err, want.code, want.field)
			continue
		}
		if strings.Contains(ce.Message, secret) {
			t.Errorf("the refusal repeats the secret: %s", ce.Message)
		}
	}
}
