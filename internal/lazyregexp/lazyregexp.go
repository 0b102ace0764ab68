// Package lazyregexp is a regular expression compiled on its first use.
//
// continuityd is one binary: the daemon, and the short-lived processes an
// agent starts many times a session (`continuityd hook`, `statusline`, the
// client commands). Every package linked into it runs its package-level
// initialisation in each of them, so a regexp.MustCompile in a var costs
// every hook its compilation (some of ours expand to hundreds of
// instructions: {1,64} repeated eight times) whether or not the process
// ever matches it. A Regexp declared with New costs nothing until a method
// is called; the first call compiles it once, safely for concurrent use.
//
// Under `go test` (a binary named *.test) New compiles at once, as
// regexp.MustCompile would, so an invalid expression still fails every
// test run of the package that declares it, not a rarely taken path.
package lazyregexp

import (
	"os"
	"regexp"
	"strings"
	"sync"
)

// Regexp is a regular expression compiled on the first call of one of its
// methods. Its methods are regexp.Regexp's; Regexp gives the compiled
// expression for anything else.
type Regexp struct {
	expr     string
	compiled func() *regexp.Regexp
}

// New returns expr, to be compiled on first use. An invalid expr panics
// then (and at New under go test), as regexp.MustCompile does.
func New(expr string) *Regexp {
	r := &Regexp{expr: expr, compiled: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
	if underTest() {
		r.compiled()
	}
	return r
}

// underTest reports whether this process is a test binary.
func underTest() bool {
	return len(os.Args) > 0 && strings.HasSuffix(strings.TrimSuffix(os.Args[0], ".exe"), ".test")
}

// Regexp returns the compiled expression, compiling it on the first call.
func (r *Regexp) Regexp() *regexp.Regexp { return r.compiled() }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.compiled().MatchString(s) }

// Match is regexp.Regexp.Match.
func (r *Regexp) Match(b []byte) bool { return r.compiled().Match(b) }

// FindString is regexp.Regexp.FindString.
func (r *Regexp) FindString(s string) string { return r.compiled().FindString(s) }

// FindStringIndex is regexp.Regexp.FindStringIndex.
func (r *Regexp) FindStringIndex(s string) []int { return r.compiled().FindStringIndex(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.compiled().FindStringSubmatch(s) }

// FindStringSubmatchIndex is regexp.Regexp.FindStringSubmatchIndex.
func (r *Regexp) FindStringSubmatchIndex(s string) []int {
	return r.compiled().FindStringSubmatchIndex(s)
}

// FindAllString is regexp.Regexp.FindAllString.
func (r *Regexp) FindAllString(s string, n int) []string { return r.compiled().FindAllString(s, n) }

// FindAllStringIndex is regexp.Regexp.FindAllStringIndex.
func (r *Regexp) FindAllStringIndex(s string, n int) [][]int {
	return r.compiled().FindAllStringIndex(s, n)
}

// FindAllStringSubmatch is regexp.Regexp.FindAllStringSubmatch.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.compiled().FindAllStringSubmatch(s, n)
}

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.compiled().ReplaceAllString(src, repl)
}

// ReplaceAllStringFunc is regexp.Regexp.ReplaceAllStringFunc.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.compiled().ReplaceAllStringFunc(src, repl)
}

// String is the source text of the expression; it does not compile it.
func (r *Regexp) String() string { return r.expr }
