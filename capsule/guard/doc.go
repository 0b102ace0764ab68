// Package guard stands between untrusted input and the disk: it decodes
// request bodies strictly (unknown fields and duplicate keys refused, errors
// that name the field and never a Go type) and applies the checks every
// write must pass, whatever door it came through: the seed's shape rules,
// the public-status rules, lengths, control characters, and the secret
// detector (gitleaks' rules, see secrets.go).
package guard
