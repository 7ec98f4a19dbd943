package exutil

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseQueues(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"all", nil, false},
		{"", nil, false},
		{"3", []int{3}, false},
		{"0,2", []int{0, 2}, false},
		{"0-3", []int{0, 1, 2, 3}, false},
		{" 1 - 2 ,5", []int{1, 2, 5}, false},
		{"-1", nil, true},
		{"3-1", nil, true},
		{"x", nil, true},
		{"0-4096", nil, true},
		{"0-1000000000", nil, true}, // a range that size must be an error, not a billion-entry list
		{"0-4095,0", nil, true},
	} {
		got, err := ParseQueues(tc.in)
		if (err != nil) != tc.err || !equal(got, tc.want) {
			t.Errorf("ParseQueues(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// FuzzParseQueues: any string is a list of queues or an error, never a
// panic or an unbounded list; a list written back out parses to itself.
func FuzzParseQueues(f *testing.F) {
	for _, s := range []string{"all", "0", "0,1", "0-3", "1-1,7", "4095", "0-4095", "-", ",", "1-", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		qs, err := ParseQueues(s)
		if err != nil {
			if qs != nil {
				t.Fatalf("ParseQueues(%q) returned %v with error %v", s, qs, err)
			}
			return
		}
		if len(qs) > MaxQueue+1 {
			t.Fatalf("ParseQueues(%q): %d queues", s, len(qs))
		}
		parts := make([]string, len(qs))
		for i, q := range qs {
			if q < 0 || q > MaxQueue {
				t.Fatalf("ParseQueues(%q): queue %d out of range", s, q)
			}
			parts[i] = strconv.Itoa(q)
		}
		if len(qs) == 0 {
			return
		}
		again, err := ParseQueues(strings.Join(parts, ","))
		if err != nil || !equal(again, qs) {
			t.Fatalf("ParseQueues(%q) = %v, which reads back as %v, %v", s, qs, again, errors.Unwrap(err))
		}
	})
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
