package capsule

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// One Guard for the whole test binary: building one costs tens of
// milliseconds, and sharing it is what the daemon does too.
var (
	sharedGuardOnce sync.Once
	sharedGuard     *Guard
	sharedGuardErr  error
)

func testGuard(tb testing.TB) *Guard {
	tb.Helper()
	sharedGuardOnce.Do(func() { sharedGuard, sharedGuardErr = NewGuard(GuardOptions{}) })
	if sharedGuardErr != nil {
		tb.Fatalf("NewGuard: %v", sharedGuardErr)
	}
	return sharedGuard
}

// Alphabets for fake credentials.
const (
	upper      = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower      = "abcdefghijklmnopqrstuvwxyz"
	digits     = "0123456789"
	alnum      = upper + lower + digits
	lowerAlnum = lower + digits
	upperAlnum = upper + digits
	hexLower   = "0123456789abcdef"
	base32     = upper + "234567"
	b64        = alnum + "+/"
	b64url     = alnum + "-_"
)

// fake returns n random-looking characters from alphabet, the same for the
// same seed. Test credentials are generated rather than written out so the
// source holds no literal token (a repository's push protection would
// rightly object) and none of the "EXAMPLE"/"xxxx" stand-ins that gitleaks
// allow-lists.
func fake(seed uint64, alphabet string, n int) string {
	r := rand.New(rand.NewPCG(seed, 0x636f6e74696e7569))
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// asError asserts err is a *Error and returns it.
func asError(tb testing.TB, err error) *Error {
	tb.Helper()
	var e *Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %v (%T) is not a *capsule.Error", err, err)
	}
	return e
}

// wantRefusal asserts err is a *Error with code and field.
func wantRefusal(tb testing.TB, err error, code, field string) *Error {
	tb.Helper()
	if err == nil {
		tb.Fatalf("accepted; want %s at %q", code, field)
	}
	e := asError(tb, err)
	if e.Code != code || e.Field != field {
		tb.Fatalf("got %s at %q (%s); want %s at %q", e.Code, e.Field, e.Message, code, field)
	}
	if e.Status != 400 && e.Status != 413 {
		tb.Fatalf("status %d", e.Status)
	}
	if e.Message == "" {
		tb.Fatalf("empty message")
	}
	return e
}

// knownCodes are the codes a guard may return.
var knownCodes = map[string]int{
	CodeInvalidPublicStatus: 400, CodeInvalidWorkingState: 400, CodeMotiveRequired: 400,
	CodeTooManyOpenLoops: 400, CodeEvidenceRequired: 400, CodeInvalidCapsule: 400,
	CodeSecretDetected: 400, CodeInvalidJSON: 400, CodeInvalidUTF8: 400, CodeUnknownField: 400,
	CodeInvalidField: 400, CodeInvalidFocus: 400, CodeInvalidDecision: 400,
	CodeInvalidCommitment: 400, CodeInvalidStop: 400, CodeEmptyCheckpoint: 400,
	CodeInvalidSignal: 400, CodeBodyTooLarge: 413,
}

// checkGuardError asserts that a guard error is a known *Error.
func checkGuardError(tb testing.TB, err error) *Error {
	tb.Helper()
	e := asError(tb, err)
	status, ok := knownCodes[e.Code]
	if !ok {
		tb.Fatalf("unknown code %q: %v", e.Code, e)
	}
	if e.Status != status {
		tb.Fatalf("code %s with status %d, want %d", e.Code, e.Status, status)
	}
	if e.Message == "" {
		tb.Fatalf("refusal without a message: %v", e)
	}
	return e
}
