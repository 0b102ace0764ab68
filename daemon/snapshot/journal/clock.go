package journal

import (
	"os"
	"strings"
	"time"
)

// ClockEnv is a test hook, read by the snapshot store as it opens the
// journal: the name of a file holding a Go duration ("26h"). The
// journal's clock (its versions' times, the age its retention reads)
// runs that far ahead of the real one, the file read again at each use,
// so that a test can live a day of edits in a minute and see the day's
// retention with the real daemon. A file that is missing or does not
// hold a duration means no skew.
const ClockEnv = "CONTINUITYD_TEST_JOURNAL_CLOCK"

// SkewFromEnv is the skew ClockEnv asks for (Options.Skew), or nil.
func SkewFromEnv() func() time.Duration {
	name := os.Getenv(ClockEnv)
	if name == "" {
		return nil
	}
	return func() time.Duration {
		b, err := os.ReadFile(name)
		if err != nil {
			return 0
		}
		d, err := time.ParseDuration(strings.TrimSpace(string(b)))
		if err != nil {
			return 0
		}
		return d
	}
}
