//go:build linux

package main

import (
	"net"
	"net/netip"
	"testing"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/xsk"
)

// The filter backends' programs redirect the generator's frames (or they
// would measure nothing) and pass frames to another port.
func TestFilterBackendsMatchGenerated(t *testing.T) {
	netnstest.RequirePriv(t)
	const port = 7777
	var frames [][]byte
	for _, spec := range []struct {
		size  int
		dport uint16
	}{{60, port}, {1514, port}, {60, port + 1}} {
		f, err := trafficgen.BuildFrame(trafficgen.FrameSpec{
			SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
			Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"),
			SrcPort: 40000, DstPort: spec.dport, Size: spec.size,
		})
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	o := &Options{Port: port}
	for _, be := range []string{beXDPIORule, beXDPIOExpr, beXDPIOExpr10} {
		r := newRX(be, o).(*xdpioRX)
		got, err := xsk.Verdicts(r.program(o), frames)
		if err != nil {
			t.Fatalf("%s: %v", be, err)
		}
		if !got[0] || !got[1] || got[2] {
			t.Errorf("%s: verdicts %v, want [true true false]", be, got)
		}
	}
}
