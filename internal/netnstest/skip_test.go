package netnstest

import "testing"

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"6.18.44", "6.13", 1}, {"6.12", "6.13", -1}, {"6.13", "6.13.0", 0}, {"7.3.4", "6.13", 1}, {"5.10.200", "5.18", -1}} {
		if got := compareVersions(c.a, c.b); got != c.want {
			t.Errorf("compareVersions(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	v, err := KernelVersion()
	if err != nil || v == "" {
		t.Fatalf("KernelVersion: %q, %v", v, err)
	}
}
