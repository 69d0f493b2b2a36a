// Package typo finds the word a mistyped one was meant to be, for the "did you mean" hints of the command line,
// the config and agent files and the terminal chat's slash commands: one rule for how close is close enough.
package typo

// Nearest is the candidate closest to w by edit distance, if close enough to be a typo of it, else "".
func Nearest(w string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := Distance(w, c)
		if d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(2, len(w)/3) {
		return best
	}
	return ""
}

// Distance is the edit distance between a and b, an adjacent swap counting as one edit: how far a typo is
// from the word meant, for "did you mean" hints.
func Distance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
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
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
