package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/nic"
)

// FuzzParseQueueList: any --queues value is a sorted list of distinct
// queues below nic.MaxCoalesceQueues or an error, never a panic; the list
// written back out parses to itself.
func FuzzParseQueueList(f *testing.F) {
	for _, s := range []string{"", "0", "0,2-3", "3,1,1", "0-63", "1-0", "-1", "a", "1-2-3", " 4 , 5-6"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		qs, err := parseQueueList(s)
		if err != nil {
			return
		}
		if !slices.IsSorted(qs) || len(slices.Compact(slices.Clone(qs))) != len(qs) {
			t.Fatalf("parseQueueList(%q) = %v: want sorted, distinct", s, qs)
		}
		parts := make([]string, len(qs))
		for i, q := range qs {
			if q < 0 || q >= nic.MaxCoalesceQueues {
				t.Fatalf("parseQueueList(%q): queue %d out of range", s, q)
			}
			parts[i] = strconv.Itoa(q)
		}
		if again, err := parseQueueList(strings.Join(parts, ",")); err != nil || !slices.Equal(again, qs) {
			t.Fatalf("parseQueueList(%q) = %v, which reads back as %v, %v", s, qs, again, err)
		}
	})
}

// FuzzParseRate: any -b value is a rate of at most 1000G bit/s (or
// unlimited, for 0) or an error, never a panic; a rate written back out in
// bits parses to itself.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"0", "100M", "1.5g", "10k", "1000G", "1001G", "-1", "NaN", "Inf", "1e12", "M", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRate(s)
		if err != nil {
			return
		}
		if r == bench.BitrateUnlimited {
			return
		}
		if r > 1e12 {
			t.Fatalf("parseRate(%q) = %d: above 1000G", s, r)
		}
		if again, err := parseRate(strconv.FormatUint(r, 10)); r > 0 && (err != nil || again != r) {
			t.Fatalf("parseRate(%q) = %d, which reads back as %d, %v", s, r, again, err)
		}
	})
}
