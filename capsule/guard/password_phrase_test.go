package guard

import "testing"

// TestPasswordPhrase pins the judgement of the password-phrase rule: a
// value after "password is", "password:" or "pwd=" is refused only when it
// looks like a credential, not like the next word of a sentence.
func TestPasswordPhrase(t *testing.T) {
	g := testGuard(t)
	pw := fake(900, alnum, 8) + "!" + fake(901, digits, 3)
	for _, s := range []string{
		"the staging db password is " + pw,
		"the staging db password is " + pw + ".",
		"Password: " + pw,
		"admin pwd=" + pw,
		"the router passcode is " + fake(902, digits, 8),
		"the wifi password is gHtRkWpqZmNv",
		"the vault passphrase is correcthorsebatterystaple",
		"the password is p@ssword!x",
		"the prod password was Summer2024-prod until the rotation",
		`"password": "` + pw + `"`,
	} {
		if rule := g.secretRule(s); rule == "" {
			t.Errorf("not refused: %q", s)
		}
	}
	for _, s := range []string{
		"the password is stored in vault",
		"password is required",
		"reset the password is the next step",
		"the password is base64-encoded in the k8s secret",
		"the password is 1Password-managed now",
		"the password is AES-256 encrypted at rest",
		"the password is argon2id hashed",
		"the password is JavaScript-validated; PostgreSQL stores only the hash",
		"the password was PostgreSQL's default",
		"password: !vault |",
		"password: ********",
		"password: ${DB_PASSWORD}",
		"PWD=/home/agent/work2",
		"pwd: ./build-2026",
		"the password is at https://vault.internal/ui/secret/db2",
		"the password is 12 characters",
	} {
		if rule := g.secretRule(s); rule != "" {
			t.Errorf("refused by %s: %q", rule, s)
		}
	}
}
