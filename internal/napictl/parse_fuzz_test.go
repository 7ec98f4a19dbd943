package napictl

import (
	"os"
	"strconv"
	"testing"
)

// FuzzParseStat: any /proc/PID/stat text gives a start time or an error,
// never a panic; a live process's own line parses.
func FuzzParseStat(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(string(b))
	}
	f.Add("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42 1000 10")
	f.Add("7 (a) b (c)) Z 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42 1000 10")
	f.Add("7 (x")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseStat(s)
		if err == nil && strconv.FormatUint(v, 10) == "" {
			t.Fatal("empty start time")
		}
	})
}

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42 1000 10", 42, true},
		{"9 (we ird) R) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 77 1000 10", 77, true},
		{"9 (z) Z 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 77 1000 10", 0, false},
		{"9 (short) S 0 1", 0, false},
	} {
		got, err := parseStat(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseStat(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
	if _, err := procStart(os.Getpid()); err != nil {
		t.Errorf("procStart(self): %v", err)
	}
}
