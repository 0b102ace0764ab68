package cli

import (
	"context"
	"fmt"

	"github.com/continuityd/continuityd/config"
)

// cmdConfig is `config check [FILE]` and `config default`.
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
			cfg, err = config.Default()
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
		}
		fmt.Fprintf(e.Stdout, "%s is valid: %d agent(s), socket %s, state in %s\n", src, len(cfg.Agents), cfg.Daemon.Socket, cfg.Daemon.StateDir)
		return ExitOK
	default:
		return UnknownSub(e, "config", args[0])
	}
}
