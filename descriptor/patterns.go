package descriptor

import (
	"regexp/syntax"
)

// Bounds of a descriptor's signaturePatterns. servicegate checks every
// pattern when it reads a descriptor (at adapt, at each config load, in
// `caddy service-app check`), and a pattern's cost is that of the program
// it compiles to: a repetition such as \w{1000} is copied a thousand
// times. Real patterns are a few dozen bytes and steps.
const (
	// MaxPatternBytes bounds one pattern's length.
	MaxPatternBytes = 1000
	// MaxPatternSteps bounds the compiled program of one pattern, in
	// instructions of Go's regexp/syntax.
	MaxPatternSteps = 10_000
	// MaxPatterns, MaxPatternsBytes and MaxPatternsSteps bound the
	// patterns of one descriptor in all.
	MaxPatterns      = 500
	MaxPatternsBytes = 64 << 10
	MaxPatternsSteps = 200_000
)

// patternCost adds up the cost of a descriptor's patterns as they are
// checked; once a total is over its bound, the patterns after it are
// not compiled.
type patternCost struct {
	count, bytes, steps int
	over                bool
}

// check reports the defects of one pattern; what names it.
func (c *patternCost) check(defects *Defects, what, re string) {
	if c.over {
		return
	}
	if len(re) > MaxPatternBytes {
		defects.add("%s is %d bytes long; a pattern may have at most %d", what, len(re), MaxPatternBytes)
		return
	}
	c.count++
	c.bytes += len(re)
	if c.count > MaxPatterns || c.bytes > MaxPatternsBytes {
		c.over = true
		defects.add("%s brings the descriptor's signaturePatterns over %d patterns or %d bytes in all; "+
			"the patterns after it were not checked", what, MaxPatterns, MaxPatternsBytes)
		return
	}
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		defects.add("%s %q does not compile as a Go (RE2) regular expression: %s "+
			"(the service's own regular-expression dialect may accept it; servicegate uses the pattern to pick "+
			"the module for a file, so write it in the common subset: no look-around or backreferences)",
			what, re, regexpProblem(err))
		return
	}
	// The estimate keeps a costly program from being compiled at all;
	// the count of the compiled program is the one that is kept.
	steps := estimateSteps(parsed, MaxPatternSteps+1)
	if steps <= MaxPatternSteps {
		prog, err := syntax.Compile(parsed.Simplify())
		if err != nil {
			defects.add("%s %q does not compile: %s", what, re, regexpProblem(err))
			return
		}
		steps = len(prog.Inst)
	}
	if steps > MaxPatternSteps {
		defects.add("%s compiles to more than %d steps (each repetition such as {100} copies what it repeats); "+
			"write it with fewer or smaller repetitions", what, MaxPatternSteps)
		return
	}
	c.steps += steps
	if c.steps > MaxPatternsSteps {
		c.over = true
		defects.add("%s brings the descriptor's signaturePatterns over %d compiled steps in all; "+
			"the patterns after it were not checked", what, MaxPatternsSteps)
	}
}

// estimateSteps is about the number of instructions re compiles to,
// counted only up to limit: repetitions multiply what they repeat, the
// way the compiler copies it.
func estimateSteps(re *syntax.Regexp, limit int) int {
	sat := func(n int) int { return min(n, limit) }
	switch re.Op {
	case syntax.OpLiteral:
		return sat(len(re.Rune))
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return sat(2 + estimateSteps(re.Sub[0], limit))
	case syntax.OpConcat, syntax.OpAlternate:
		n := len(re.Sub)
		for _, sub := range re.Sub {
			n = sat(n + estimateSteps(sub, limit))
		}
		return n
	case syntax.OpRepeat:
		// x{n,m} is n copies of x, then m-n optional ones; x{n,} is n
		// copies, then x*.
		copies := re.Max
		if copies < 0 {
			copies = re.Min + 1
		}
		sub := estimateSteps(re.Sub[0], limit)
		if copies > 0 && sub > limit/copies {
			return limit
		}
		return sat(copies*sub + copies - re.Min + 1)
	default:
		return 1
	}
}
