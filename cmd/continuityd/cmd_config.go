package main

import (
	"context"
	"fmt"

	"github.com/continuityd/continuityd/config"
)

// cmdConfig is `config check [FILE]` and `config default`.
func cmdConfig(_ context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, "usage: continuityd config check [FILE] | config default")
		return exitUsage
	}
	switch args[0] {
	case "default":
		if len(args) != 1 {
			fmt.Fprintln(e.stderr, "usage: continuityd config default")
			return exitUsage
		}
		e.stdout.Write(config.DefaultTOML())
		return exitOK
	case "check":
		var cfg *config.Config
		var err error
		switch len(args) {
		case 1:
			cfg, err = config.Default()
		case 2:
			cfg, err = config.Load(args[1])
		default:
			fmt.Fprintln(e.stderr, "usage: continuityd config check [FILE]")
			return exitUsage
		}
		if err != nil {
			fmt.Fprintln(e.stderr, err)
			return exitUsage
		}
		if errs := cfg.CheckSecretFiles(); len(errs) > 0 {
			for _, err := range errs {
				fmt.Fprintln(e.stderr, err)
			}
			return exitUsage
		}
		src := cfg.Path
		if src == "" {
			src = "the embedded default"
		}
		fmt.Fprintf(e.stdout, "%s is valid: %d agent(s), socket %s, state in %s\n", src, len(cfg.Agents), cfg.Daemon.Socket, cfg.Daemon.StateDir)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "continuityd: unknown config subcommand %q; use check or default\n", args[0])
		return exitUsage
	}
}
