//go:build checkviews

package agent

// Built with -tags checkviews (the end-to-end tests' daemons are), every
// resume checks its kept view (CheckViews).
func init() { CheckViews() }
