package main

import (
	"strconv"
	"testing"
)

// FuzzParseNonNegDuration: any --gro-flush-timeout/--irq-suspend-timeout
// value is a non-negative duration or an error, never a panic, and the
// duration written back as nanoseconds parses to itself.
func FuzzParseNonNegDuration(f *testing.F) {
	for _, s := range []string{"200us", "200µs", "0", "1ms", "-5us", "18446744073709551615", "1.5ms", "", "x", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseNonNegDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("parseNonNegDuration(%q) = %v", s, d)
		}
		if again, err := parseNonNegDuration(strconv.FormatInt(int64(d), 10)); err != nil || again != d {
			t.Fatalf("parseNonNegDuration(%q) = %v, reads back as %v, %v", s, d, again, err)
		}
	})
}
