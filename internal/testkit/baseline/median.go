package baseline

import (
	"cmp"
	"slices"
)

// Median is the middle value of xs (the upper one of an even count); the
// benchmarks quote medians, not means, on this noisy shared machine.
func Median[T cmp.Ordered](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
