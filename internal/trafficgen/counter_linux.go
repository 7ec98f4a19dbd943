//go:build linux

package trafficgen

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Action is what a Counter does with a frame after counting it.
type Action int

const (
	// Drop counts and drops (XDP_DROP): measures what arrived, at the
	// cheapest possible receiver.
	Drop Action = iota
	// Pass counts and hands the frame to the kernel stack (XDP_PASS).
	Pass
)

// Counter is an XDP program attached (driver mode, through a bpf_link) to
// one interface that counts every frame it sees in a per-CPU map.
type Counter struct {
	prog *ebpf.Program
	m    *ebpf.Map
	link interface{ Close() error }
}

// AttachCounter loads a counting program and attaches it to the interface
// with index ifindex in the calling thread's network namespace.
func AttachCounter(ifindex int, action Action) (_ *Counter, err error) {
	act := int32(xdpDrop)
	if action == Pass {
		act = xdpPass
	}
	c := &Counter{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	c.m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "tgen_count", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, bpfError("trafficgen: create counter map", err)
	}
	c.prog, err = loadXDP("tgen_count", counterInstructions(c.m.FD(), act))
	if err != nil {
		return nil, fmt.Errorf("trafficgen: %w", err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: c.prog, Interface: ifindex, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("trafficgen: attach counter to interface %d: %w", ifindex, err)
	}
	c.link = l
	return c, nil
}

// Count returns the frames counted so far.
func (c *Counter) Count() (uint64, error) {
	var v []uint64
	if err := c.m.Lookup(uint32(0), &v); err != nil {
		return 0, fmt.Errorf("trafficgen: read counter: %w", err)
	}
	var n uint64
	for _, x := range v {
		n += x
	}
	return n, nil
}

// Close detaches the program and frees it.
func (c *Counter) Close() error {
	var err error
	if c.link != nil {
		err = c.link.Close()
		c.link = nil
	}
	if c.prog != nil {
		c.prog.Close()
		c.prog = nil
	}
	if c.m != nil {
		c.m.Close()
		c.m = nil
	}
	return err
}
