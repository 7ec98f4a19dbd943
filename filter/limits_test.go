package filter

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// workBound is the most parser steps an expression of n bytes may take:
// the parser reads each token once, and each byte starts at most a few
// parsing functions.
func workBound(n int) int { return 8*n + 8 }

// nestShapes are expressions nested n levels deep by each construct that
// nests; open is the token that opens a level, and at its offset in the
// expression for level i (from 0).
var nestShapes = []struct {
	name, open string
	make       func(n int) string
	at         func(i int) int
}{
	{"parenthesized primitive", "(", func(n int) string { return strings.Repeat("(", n) + "udp" + strings.Repeat(")", n) },
		func(i int) int { return i }},
	{"parenthesized relation", "(", func(n int) string { return strings.Repeat("(", n) + "len = 1" + strings.Repeat(")", n) },
		func(i int) int { return i }},
	{"parenthesized arithmetic", "(", func(n int) string { return strings.Repeat("(", n) + "len" + strings.Repeat(")", n) + " = 1" },
		func(i int) int { return i }},
	{"parentheses in arithmetic", "(", func(n int) string { return "len = " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) },
		func(i int) int { return 6 + i }},
	{"parenthesized bare id", "(", func(n int) string { return "port 53 or " + strings.Repeat("(", n) + "80" + strings.Repeat(")", n) },
		func(i int) int { return 11 + i }},
	{"nested groups", "(", func(n int) string { return strings.Repeat("(udp and ", n) + "tcp" + strings.Repeat(")", n) },
		func(i int) int { return 9 * i }},
	{"ids in nested parentheses", "(", func(n int) string {
		return "port 53 or (80" + strings.Repeat(" or (80", n-1) + strings.Repeat(")", n)
	}, func(i int) int { return 11 + 7*i }},
	{"not", "not", func(n int) string { return strings.Repeat("not ", n) + "udp" },
		func(i int) int { return 4 * i }},
	{"!", "!", func(n int) string { return strings.Repeat("!", n) + "udp" },
		func(i int) int { return i }},
	{"unary minus", "-", func(n int) string { return "len = " + strings.Repeat("-", n) + "1" },
		func(i int) int { return 6 + i }},
	{"loads", "[", func(n int) string { return strings.Repeat("ip[", n) + "0" + strings.Repeat("]", n) + " = 1" },
		func(i int) int { return 3*i + 2 }},
}

// TestParseLinear: the parser's work (tokens read plus parsing functions
// entered) grows linearly with the expression. Nested parentheses made
// the old parser backtrack — each "(" tried as arithmetic, then again as
// a boolean — so that 2,500 levels took 0.37 s, 10,000 took 10.6 s and
// 65,000 ran for more than ten minutes. Each nesting shape, and long flat
// chains, are parsed here at 2,000 and 20,000 levels (the depth limit
// lifted, to measure the parser alone): ten times the length must cost
// about ten times the work, counted, not timed.
func TestParseLinear(t *testing.T) {
	type shape struct {
		name string
		make func(n int) string
	}
	var shapes []shape
	for _, s := range nestShapes {
		shapes = append(shapes, shape{s.name, s.make})
	}
	shapes = append(shapes,
		shape{"or chain", func(n int) string { return strings.Repeat("udp or ", n) + "udp" }},
		shape{"port chain", func(n int) string { return strings.Repeat("port 1 or ", n) + "2" }},
		shape{"bare port chain", func(n int) string { return "port 1" + strings.Repeat(" or 2", n) }},
		shape{"arithmetic chain", func(n int) string { return "len" + strings.Repeat(" + ip[0]", n) + " > 1" }},
		shape{"parenthesized terms", func(n int) string { return strings.Repeat("(udp) or ", n) + "(tcp)" }},
	)
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			work := func(n int) (steps int, bytes uint64) {
				expr := s.make(n)
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				_, err := parse(expr, limits{1 << 30, 1 << 30}, &steps)
				runtime.ReadMemStats(&after)
				if err != nil {
					t.Fatalf("%d levels: %v", n, err)
				}
				if steps > workBound(len(expr)) {
					t.Errorf("%d levels (%d bytes): %d steps, more than %d", n, len(expr), steps, workBound(len(expr)))
				}
				return steps, after.TotalAlloc - before.TotalAlloc
			}
			small, smallBytes := work(2000)
			large, largeBytes := work(20000)
			if ratio := float64(large) / float64(small); ratio > 10.5 {
				t.Errorf("2,000 levels: %d steps, 20,000: %d (×%.1f): not linear", small, large, ratio)
			}
			// Memory allocated counts what steps do not: copies that
			// grow with the expression (as merging nested port lists
			// once did), which would allocate about 100 times more for
			// ten times the length. Slices that grow by a factor make
			// the measure coarse: up to 20 times passes.
			if ratio := float64(largeBytes) / float64(smallBytes); ratio > 20 {
				t.Errorf("2,000 levels: %d bytes allocated, 20,000: %d (×%.1f): not linear", smallBytes, largeBytes, ratio)
			}
			t.Logf("2,000 levels: %d steps, %d bytes allocated; 20,000: %d steps, %d bytes", small, smallBytes, large, largeBytes)
		})
	}
}

// TestDepthLimit: every construct that nests is read to MaxDepth levels;
// one more is refused with an *Error that names the limit and points at
// the token opening the level too many, without parsing the rest.
func TestDepthLimit(t *testing.T) {
	for _, s := range nestShapes {
		t.Run(s.name, func(t *testing.T) {
			if _, err := parse(s.make(MaxDepth), limits{MaxDepth, MaxLength}, nil); err != nil {
				t.Errorf("%d levels: %v", MaxDepth, err)
			}
			for _, n := range []int{MaxDepth + 1, 5 * MaxDepth} {
				expr := s.make(n)
				steps := 0
				_, err := parse(expr, limits{MaxDepth, MaxLength}, &steps)
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%d levels: %v, want an *Error", n, err)
				}
				if e.Construct != s.open || e.Pos != s.at(MaxDepth) || !e.Unsupported || !errors.Is(err, ErrUnsupportedConstruct) {
					t.Errorf("%d levels: %q at %d (unsupported %v), want %q at %d, unsupported", n, e.Construct, e.Pos, e.Unsupported, s.open, s.at(MaxDepth))
				}
				msg := err.Error()
				want := fmt.Sprintf("%q at offset %d: the expression nests deeper than %d levels", s.open, s.at(MaxDepth), MaxDepth)
				if !strings.Contains(msg, want) || len(msg) > 500 {
					t.Errorf("%d levels: %q, want a short message with %q", n, msg, want)
				}
				if limit := workBound(s.at(MaxDepth) + 10); steps > limit {
					t.Errorf("%d levels: %d steps to refuse it, more than %d", n, steps, limit)
				}
			}
		})
	}
}

// TestLengthLimit: an expression of MaxLength bytes compiles; a longer
// one is refused, naming the limit.
func TestLengthLimit(t *testing.T) {
	if _, err := Compile(strings.Repeat(" ", MaxLength-3) + "udp"); err != nil {
		t.Errorf("%d bytes: %v", MaxLength, err)
	}
	_, err := Compile(strings.Repeat(" ", MaxLength-2) + "udp")
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrUnsupportedConstruct) || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes long, more than the %d", MaxLength+1, MaxLength)) || len(err.Error()) > 500 {
		t.Errorf("%d bytes: %v, want an unsupported *Error naming the limit", MaxLength+1, err)
	}
}
