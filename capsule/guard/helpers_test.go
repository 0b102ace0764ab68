package guard

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/schema"
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
	sharedGuardOnce.Do(func() {
		sch, err := schema.Compile()
		if err != nil {
			sharedGuardErr = err
			return
		}
		sharedGuard, sharedGuardErr = New(Options{CapsuleSchema: sch})
	})
	if sharedGuardErr != nil {
		tb.Fatalf("New: %v", sharedGuardErr)
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
func asError(tb testing.TB, err error) *capsule.Error {
	tb.Helper()
	var e *capsule.Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %v (%T) is not a *capsule.Error", err, err)
	}
	return e
}

// wantRefusal asserts err is a *Error with code and field.
func wantRefusal(tb testing.TB, err error, code, field string) *capsule.Error {
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
	capsule.CodeInvalidPublicStatus: 400, capsule.CodeInvalidWorkingState: 400, capsule.CodeMotiveRequired: 400,
	capsule.CodeTooManyOpenLoops: 400, capsule.CodeEvidenceRequired: 400, capsule.CodeInvalidCapsule: 400,
	capsule.CodeSecretDetected: 400, capsule.CodeInvalidJSON: 400, capsule.CodeInvalidUTF8: 400, capsule.CodeUnknownField: 400,
	capsule.CodeInvalidField: 400, capsule.CodeInvalidFocus: 400, capsule.CodeInvalidDecision: 400,
	capsule.CodeInvalidCommitment: 400, capsule.CodeInvalidStop: 400, capsule.CodeEmptyCheckpoint: 400,
	capsule.CodeInvalidSignal: 400, capsule.CodeBodyTooLarge: 413,
}

// checkGuardError asserts that a guard error is a known *Error.
func checkGuardError(tb testing.TB, err error) *capsule.Error {
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
