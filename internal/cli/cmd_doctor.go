package cli

import "context"

func cmdDoctor(_ context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "doctor", "[--json]")
	fs.Bool("json", false, "the checks as JSON")
	if _, err := ParseFlags(fs, args); err != nil {
		return ExitUsage
	}
	return ExitOK
}
