// Package suggest finds, for a word a person typed that is not one of the
// known ones, the known word they most likely meant: the "did you mean"
// of the config's unknown keys and of the command line's unknown
// commands, subcommands and flags, so that both judge a typo alike.
package suggest

// Closest returns the known word nearest to typed, when it is near enough
// to be a typo of it (at most a third of its letters wrong, or typed a
// prefix of it), and whether there is one; a word that is known itself
// has none. Among equally near words the first in known wins.
func Closest(typed string, known []string) (string, bool) {
	best, bestDist := "", len(typed)/3+1
	for _, k := range known {
		if k == typed {
			return "", false
		}
		if d := Distance(typed, k); d <= bestDist && (best == "" || d < Distance(typed, best)) {
			best = k
		}
	}
	if best == "" && len(typed) >= 3 {
		// "snap" for "snapshot": a start of one word only.
		for _, k := range known {
			if len(k) > len(typed) && k[:len(typed)] == typed {
				if best != "" {
					return "", false
				}
				best = k
			}
		}
	}
	return best, best != ""
}

// Distance is the Levenshtein distance between a and b, in bytes (the
// words compared are ASCII names).
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
