package xsk

import "testing"

// Info reads as the examples' ready lines do.
func TestInfoString(t *testing.T) {
	for _, c := range []struct {
		in   Info
		want string
	}{
		{Info{Interface: "vb", Queues: []int{0, 1, 2, 3}, Attach: AttachDriver}, "vb, queues 0-3, copy mode, driver attach"},
		{Info{Interface: "eth1", Queues: []int{0, 2, 3, 5}, ZeroCopy: true, Attach: AttachGeneric}, "eth1, queues 0,2-3,5, zero-copy mode, generic attach"},
		{Info{Interface: "x"}, "x, queues none, copy mode, auto attach"},
	} {
		if got := c.in.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.in, got, c.want)
		}
	}
}
