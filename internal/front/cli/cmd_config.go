package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// cmdConfig is `config check [FILE]` and `config default`. Without FILE,
// check checks the file `run` would use and says which.
func cmdConfig(_ context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "config", "check [FILE] | default")
	args, err := ParseFlags(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(args) == 0 {
		return Missing(e, "config", "the action: check [FILE] or default")
	}
	switch args[0] {
	case "default":
		if len(args) != 1 {
			return TooMany(e, "config default", args[1])
		}
		e.Stdout.Write(config.DefaultTOML())
		return ExitOK
	case "check":
		var cfg *config.Config
		var err error
		switch len(args) {
		case 1:
			// The file `run` would use: its own when it exists, else
			// the embedded default.
			cfg, err = LoadConfig(e, "")
		case 2:
			cfg, err = config.Load(args[1])
		default:
			return TooMany(e, "config check", args[2])
		}
		if err != nil {
			fmt.Fprintln(e.Stderr, err)
			return ExitUsage
		}
		if errs := cfg.CheckSecretFiles(); len(errs) > 0 {
			for _, err := range errs {
				fmt.Fprintln(e.Stderr, err)
			}
			return ExitUsage
		}
		src := cfg.Path
		if src == "" {
			src = "the embedded default"
			if f := config.UserFileFor(e.Getenv, os.Geteuid()); f != "" {
				src += " (" + f + " does not exist)"
			}
		}
		fmt.Fprintf(e.Stdout, "%s is valid: %s, socket %s, state in %s\n", termsafe.Line(src), servesWhat(cfg), cfg.Daemon.Socket, cfg.Daemon.StateDir)
		return ExitOK
	default:
		return UnknownSub(e, "config", args[0])
	}
}

// servesWhat says what a checked config serves: its agents, and the
// places sessions adopt.
func servesWhat(cfg *config.Config) string {
	out := fmt.Sprintf("%d agent(s)", len(cfg.Agents))
	if !cfg.Places.Adopt {
		return out + ", no places adopted"
	}
	return fmt.Sprintf("%s, places adopted under %s (%d watched at once)", out, strings.Join(cfg.Places.Roots, ", "), cfg.Places.MaxWatched)
}
