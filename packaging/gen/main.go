// Command gen writes the files the packages build rather than carry in the
// repository: the system service's config (packaging.SystemConfig, which
// follows `continuityd config default`), the gzipped man page and the
// shells' completion scripts (made from the command table, as `continuityd
// completion SHELL` prints them).
//
//	go run ./packaging/gen DIR    # writes DIR/continuityd.toml, DIR/continuityd.1.gz and DIR/completion/{continuityd.bash,_continuityd,continuityd.fish}
//
// packaging/build-deb.sh and the before hook of .goreleaser.yaml run it with
// DIR = packaging/generated (ignored by git).
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"

	"github.com/continuityd/continuityd/internal/front/cli"
	"github.com/continuityd/continuityd/packaging"
)

// completionFiles names each shell's script as its completion directory
// expects it (bash-completion loads by command name, zsh by _NAME).
var completionFiles = map[string]string{"bash": "continuityd.bash", "zsh": "_continuityd", "fish": "continuityd.fish"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./packaging/gen DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	cfg, err := packaging.SystemConfig()
	if err != nil {
		return err
	}
	// Reproducible: no name and no time in the gzip header.
	var man bytes.Buffer
	zw, err := gzip.NewWriterLevel(&man, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(packaging.ManPage()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "continuityd.toml"), cfg, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "continuityd.1.gz"), man.Bytes(), 0o644); err != nil {
		return err
	}
	return writeCompletions(filepath.Join(dir, "completion"))
}

func writeCompletions(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, shell := range cli.CompletionShells {
		var b bytes.Buffer
		if !cli.CompletionScript(&b, shell) {
			return fmt.Errorf("no completion script for %s", shell)
		}
		if err := os.WriteFile(filepath.Join(dir, completionFiles[shell]), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
