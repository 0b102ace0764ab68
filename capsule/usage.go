package capsule

// ContextUsage is how full an agent's context window is, as a transcript
// or the statusline tells it.
type ContextUsage struct {
	// Tokens is the number of tokens in context as of the latest model
	// request.
	Tokens int64
	// Window is the size of the context window; 0 means unknown.
	Window int64
	// Fraction is Tokens/Window, clamped to [0, 1]; 0 when Window is 0
	// (unknown), in which case the caller decides. The clamp exists because
	// a wrong window guess (a 1M-token session tracked with the 200k
	// default) must not yield a fraction above one.
	Fraction float64
}

// NewContextUsage builds a ContextUsage from raw numbers, computing the clamped Fraction.
// Negative inputs are treated as 0.
func NewContextUsage(tokens, window int64) ContextUsage {
	tokens, window = max(tokens, 0), max(window, 0)
	u := ContextUsage{Tokens: tokens, Window: window}
	if window > 0 {
		u.Fraction = min(float64(tokens)/float64(window), 1)
	}
	return u
}
