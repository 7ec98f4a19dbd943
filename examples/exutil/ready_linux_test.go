//go:build linux

package exutil

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// ipXDPMode asks ip(8), not this package's netlink library, in which mode
// the XDP program of h's link runs: "driver", "generic" or "none".
func ipXDPMode(t *testing.T, h *netnstest.Host) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "-n", h.NS, "-j", "link", "show", "dev", h.Link).Output()
	if err != nil {
		t.Fatalf("ip link show: %v", err)
	}
	var links []struct {
		XDP *struct {
			Mode int `json:"mode"`
		} `json:"xdp"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show: %v in %s", err, out)
	}
	switch {
	case links[0].XDP == nil:
		return "none"
	case links[0].XDP.Mode == 1: // XDP_ATTACHED_DRV
		return "driver"
	case links[0].XDP.Mode == 2: // XDP_ATTACHED_SKB
		return "generic"
	}
	return "mode " + string(out)
}

// The ready lines of a device and of an xdpnet conn name the queues bound
// and the mode the XDP program runs in, as ip link reports it, in either
// attach mode; veth has no zero-copy.
func TestReadyOnVeth(t *testing.T) {
	netnstest.RequireTool(t, "ip")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	for _, mode := range []xsk.AttachMode{xsk.AttachDriver, xsk.AttachGeneric} {
		t.Run(mode.String(), func(t *testing.T) {
			want := "ready: " + pair.B.Link + ", queues 0-1, copy mode, " + mode.String() + " attach"
			var b strings.Builder
			err := pair.B.Do(func() error {
				dev, err := xsk.Open(pair.B.Link, xsk.Config{Program: xsk.ProgramConfig{Attach: mode}})
				if err != nil {
					return err
				}
				defer dev.Close()
				Ready(&b, dev, "the runner")
				if got := ipXDPMode(t, pair.B); got != mode.String() {
					t.Errorf("ip link says the program runs in %s mode, want %v", got, mode)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != want+"; the runner\n" {
				t.Errorf("Ready printed %q, want %q", got, want+"; the runner\n")
			}

			b.Reset()
			err = pair.B.Do(func() error {
				c, err := xdpnet.ListenUDP(pair.B.Link, netip.AddrPortFrom(pair.B.IPv4, 7), xdpnet.Config{Attach: mode, Queues: []int{1}})
				if err != nil {
					return err
				}
				defer c.Close()
				ReadyConn(&b, c, "")
				if got := ipXDPMode(t, pair.B); got != mode.String() {
					t.Errorf("ip link says the conn's program runs in %s mode, want %v", got, mode)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want = "ready: " + pair.B.Link + ", queues 1, copy mode, " + mode.String() + " attach\n"
			if got := b.String(); got != want {
				t.Errorf("ReadyConn printed %q, want %q", got, want)
			}
		})
	}
}

// Drain leaves every frame that reached the sockets in their counters,
// those nobody read included, and sends what comes after it to the
// kernel (which counts UDP to a port nobody listens on).
func TestDrain(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	send := func(n int) {
		t.Helper()
		err := pair.A.Do(func() error {
			// Not connected: the ICMP port unreachable that B's kernel
			// answers once Drain is done must not fail the next write.
			c, err := net.ListenUDP("udp4", nil)
			if err != nil {
				return err
			}
			defer c.Close()
			for range n {
				if _, err := c.WriteToUDPAddrPort([]byte("drain me"), netip.AddrPortFrom(pair.B.IPv4, 9000)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var dev *xsk.Device
	if err := pair.B.Do(func() (err error) {
		dev, err = xsk.Open(pair.B.Link, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	noPorts0 := netnstest.Counter(t, pair.B, "UdpNoPorts")
	send(100) // nobody reads them
	if err := Drain(dev, 64); err != nil {
		t.Fatal(err)
	}
	count := func() (rx uint64) {
		for _, s := range dev.Sockets() {
			st, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			rx += st.RXFrames + st.RXDropped + st.RXRingFull
		}
		return rx
	}
	if got := count(); got != 100 {
		t.Errorf("after Drain the sockets counted %d frames, want the 100 sent", got)
	}
	send(50)
	var noPorts int64
	for deadline := time.Now().Add(2 * time.Second); noPorts < 50 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		noPorts = netnstest.Counter(t, pair.B, "UdpNoPorts") - noPorts0
	}
	if noPorts != 50 || count() != 100 {
		t.Errorf("of 50 datagrams sent after Drain, the kernel got %d to no port and the sockets counted %d more", noPorts, count()-100)
	}
}
