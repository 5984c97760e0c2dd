// Package suggest finds, for a name nobody declared, the known name it was
// probably meant to be: the "did you mean …" of a Caddyfile sub-directive
// or a descriptor's module kind spelt a letter off.
package suggest

import "strings"

// Nearest is the name of known that word is most likely a slip of: the
// same but for case, or at most maxEdits edits away (a letter added,
// left out, changed, or two neighbours swapped). A short name takes fewer
// edits (at most a third of its length, rounded down), so that "to" is
// not offered for any two letters. It is "" when no name is near, or
// when two are equally near.
func Nearest(word string, known []string, maxEdits int) string {
	lower := strings.ToLower(word)
	best, bestDist, tie := "", maxEdits+1, false
	for _, k := range known {
		if k == word {
			return ""
		}
		limit := min(maxEdits, len([]rune(k))/3)
		d := distance(lower, strings.ToLower(k))
		switch {
		case d > limit || d > bestDist:
		case d == bestDist:
			tie = tie || k != best
		default:
			best, bestDist, tie = k, d, false
		}
	}
	if tie {
		return ""
	}
	return best
}

// distance is the optimal string alignment distance of a and b:
// Levenshtein's, with two neighbours swapped counting as one edit.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows of the matrix: two back, one back, this one.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
