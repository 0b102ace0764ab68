package upstream

import (
	"strings"
	"testing"
)

// TestCleanMessageUsesTheGuardsShapes: an upstream's error text is
// redacted with the secret guard's rules (guard.RedactCredentialShapes:
// gitleaks' set and continuityd's own), so the shapes the guard refuses do
// not come back through an echoed error: passwords in URLs (letters only,
// empty user), a Docker Hub token, a Square secret, a password told in
// words, provider tokens only gitleaks' rules know. Values are built here, with
// few digits, so CleanMessage's own digit-counting rule cannot be what
// catches them.
func TestCleanMessageUsesTheGuardsShapes(t *testing.T) {
	letters := strings.Repeat("QwErTyUiOp", 5)
	for _, tc := range []struct{ name, msg, secret string }{
		{"url password letters only", "cannot push to https://deploy:" + letters[:16] + "@git.internal/repo.git", letters[:16]},
		{"mongodb srv url", "auth failed for mongodb+srv://admin:" + strings.ToLower(letters[:12]) + "@cluster0.example.net/prod", strings.ToLower(letters[:12])},
		{"redis url empty user", "NOAUTH redis://:" + letters[:9] + "@cache.internal:6379/0", letters[:9]},
		{"docker hub token", "denied: dckr_pat_" + letters[:26] + "x is revoked", letters[:26]},
		{"square oauth secret", "invalid client_secret sq0csp-" + letters[:43], letters[:43]},
		{"password in words", "login failed: the staging db password is Zq!vR#kpLm", "Zq!vR#kpLm"},
		// gitleaks' rules, not only continuityd's own: a Hugging Face
		// token and an AWS temporary key id with too few digits for the
		// digit-counting rule.
		{"hugging face token (gitleaks rule)", "401: token hf_" + letters[:34] + " is not valid", letters[:34]},
		{"aws key id (gitleaks rule)", "InvalidClientTokenId: ASIA" + strings.ToUpper(letters[:14]) + "Q2 unknown", strings.ToUpper(letters[:14])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CleanMessage(tc.msg)
			if strings.Contains(got, tc.secret) || !strings.Contains(got, "[redacted]") {
				t.Fatalf("CleanMessage(%q) = %q: the credential is still there", tc.msg, got)
			}
		})
	}
	for _, s := range []string{
		"the password is stored in vault",
		"password is required",
		"see https://qdaybunker.fun/v1/continuity/checkpoint",
	} {
		if got := CleanMessage(s); got != s {
			t.Errorf("CleanMessage(%q) = %q, want it unchanged", s, got)
		}
	}
}
