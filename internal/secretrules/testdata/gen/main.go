// Command gen regenerates ../gitleaks-examples.jsonl.gz, the true and false
// positives that gitleaks' rule generator checks each rule against, for the
// differential test in package secretrules.
//
// gitleaks keeps those examples as local variables of its rule functions
// (cmd/generate/config/rules/*.go), which pass them to utils.Validate. gen
// copies the gitleaks module that go.mod requires out of the module cache
// into a temporary directory (the go command refuses overlays of files in
// the module cache), runs gitleaks' own generator there with overlay/
// validate.go standing in for utils/validate.go (it records the examples
// instead of checking them), and checks that the gitleaks.toml the
// generator writes is byte for byte the embedded ../../gitleaks.toml: the
// examples then belong to exactly the rules the package embeds. No gitleaks
// code is kept in this repository.
//
// Run from the repository root:
//
//	go run ./internal/secretrules/testdata/gen
//
// The file is gzipped so that repository secret scanners do not flag the
// thousands of made-up tokens it holds; the random parts differ on every
// run (gitleaks draws them from its regexes).
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	pkgDir   = "internal/secretrules"
	outFile  = pkgDir + "/testdata/gitleaks-examples.jsonl.gz"
	ruleFile = pkgDir + "/gitleaks.toml"
	overlay  = pkgDir + "/testdata/gen/overlay/validate.go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	if _, err := os.Stat(ruleFile); err != nil {
		return fmt.Errorf("run me from the repository root: %w", err)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "github.com/zricethezav/gitleaks/v8").Output()
	if err != nil {
		return fmt.Errorf("go list -m github.com/zricethezav/gitleaks/v8: %w", err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if dir == "" {
		return fmt.Errorf("gitleaks is not in the module cache; run go mod download")
	}
	tmp, err := os.MkdirTemp("", "secretrules-gen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	mod := filepath.Join(tmp, "gitleaks")
	if err := os.CopyFS(mod, os.DirFS(dir)); err != nil {
		return fmt.Errorf("copy %s: %w", dir, err)
	}
	absOverlay, err := filepath.Abs(overlay)
	if err != nil {
		return err
	}
	ovJSON := fmt.Sprintf(`{"Replace":{%q:%q}}`, filepath.Join(mod, "cmd/generate/config/utils/validate.go"), absOverlay)
	ovFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovFile, []byte(ovJSON), 0o600); err != nil {
		return err
	}
	examples := filepath.Join(tmp, "examples.jsonl")
	genToml := filepath.Join(tmp, "gitleaks.toml")
	cmd := exec.Command("go", "run", "-overlay", ovFile, ".", genToml)
	cmd.Dir = filepath.Join(mod, "cmd/generate/config") // it reads rules/config.tmpl
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "SECRETRULES_EXAMPLES="+examples)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gitleaks' generator: %w", err)
	}
	got, err := os.ReadFile(genToml)
	if err != nil {
		return err
	}
	want, err := os.ReadFile(ruleFile)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("gitleaks %s generates a gitleaks.toml that differs from %s: copy config/gitleaks.toml of that version first", version, ruleFile)
	}
	raw, err := os.ReadFile(examples)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Comment = "gitleaks " + version + " rule examples; see testdata/gen"
	if _, err := zw.Write(raw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(outFile, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gen: %s: %d lines from gitleaks %s\n", outFile, bytes.Count(raw, []byte("\n")), version)
	return nil
}
