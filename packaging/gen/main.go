// Command gen writes the files the packages build rather than carry in the
// repository: the system service's config (packaging.SystemConfig, which
// follows `continuityd config default`) and the gzipped man page.
//
//	go run ./packaging/gen DIR    # writes DIR/continuityd.toml and DIR/continuityd.1.gz
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

	"github.com/continuityd/continuityd/packaging"
)

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
	return os.WriteFile(filepath.Join(dir, "continuityd.1.gz"), man.Bytes(), 0o644)
}
