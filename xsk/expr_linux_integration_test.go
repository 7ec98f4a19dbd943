//go:build linux

package xsk_test

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/net/bpf"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// drainAll counts every frame the sockets receive until stop is closed
// (or 10 s pass), and how many of them are UDP to port.
func drainAll(sockets []*xsk.Socket, port uint16, stop <-chan struct{}) (all, matching int) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-stop:
			return all, matching
		default:
		}
		for _, s := range sockets {
			b := s.NewBatch(64)
			if n := s.Receive(b); n > 0 {
				for i := 0; i < b.Len(); i++ {
					all++
					if _, ok := udpPayload(b.Frame(i), port); ok {
						matching++
					}
				}
				s.Release(b)
				continue
			}
			s.Wait(10*time.Millisecond, false)
		}
	}
	return all, matching
}

// With an expression on, only matching frames reach the sockets; ping, a
// TCP connection and UDP to another port keep reaching the kernel stack.
// Both sides are counted.
func TestExprOnVeth(t *testing.T) {
	ping := netnstest.RequireTool(t, "ping")
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	const port, other, tcpPort = 9160, 9161, 9162
	expr := fmt.Sprintf("udp dst port %d and not src net 198.19.99.0/24 or (ip6 and udp dst port %d)", port, port)
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Expr: expr}})
	kernelMatch := listenUDP(t, pair.B, netip.AddrPortFrom(netip.IPv4Unspecified(), port))
	kernelOther := listenUDP(t, pair.B, netip.AddrPortFrom(netip.IPv4Unspecified(), other))
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen("tcp4", fmt.Sprintf("%s:%d", pair.B.IPv4, tcpPort))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.Copy(c, c) // echo
	}()

	type counts struct{ all, matching int }
	done := make(chan counts)
	stop := make(chan struct{})
	go func() {
		a, m := drainAll(d.Sockets(), port, stop)
		done <- counts{a, m}
	}()

	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, port), 1, 30, 64, 0)
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv6, port), 1, 20, 64, 0)
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, other), 1, 25, 64, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := pair.A.Command(ctx, ping, "-c", "3", "-i", "0.2", "-W", "2", pair.B.IPv4.String()).CombinedOutput(); err != nil || !strings.Contains(string(out), " 3 received") {
		t.Errorf("ping through the filter: %v, want 3 of 3 replies\n%s", err, out)
	}
	var echoed string
	if err := pair.A.Do(func() error {
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", pair.B.IPv4, tcpPort), 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write([]byte("through the kernel")); err != nil {
			return err
		}
		buf := make([]byte, 18)
		_, err = io.ReadFull(c, buf)
		echoed = string(buf)
		return err
	}); err != nil || echoed != "through the kernel" {
		t.Errorf("TCP connection through the filter: %v (echoed %q)", err, echoed)
	}

	// The sockets' RX ring holds what arrived; a last look after 100 ms.
	time.Sleep(100 * time.Millisecond)
	close(stop)
	c := <-done
	if c.matching != 50 || c.all != 50 {
		t.Errorf("sockets got %d frames, %d of them UDP to port %d; want 50 and 50", c.all, c.matching, port)
	}
	if got := readAll(kernelOther, 25, 2*time.Second); len(got) != 25 {
		t.Errorf("the kernel got %d of 25 datagrams to port %d", len(got), other)
	}
	if got := readAll(kernelMatch, 1, 200*time.Millisecond); len(got) != 0 {
		t.Errorf("the kernel got %d datagrams to the filtered port %d, want 0", len(got), port)
	}
}

func TestProgramConfigConflicts(t *testing.T) {
	for _, tc := range []struct {
		cfg  xsk.ProgramConfig
		want string
	}{
		{xsk.ProgramConfig{Expr: "udp", BPF: []bpf.Instruction{bpf.RetConstant{Val: 1}}}, "Expr and BPF"},
		{xsk.ProgramConfig{Expr: "ip protochain 6"}, `"protochain"`},
		{xsk.ProgramConfig{Expr: "udp port"}, "syntax error"},
	} {
		_, err := xsk.NewProgram(1, tc.cfg)
		if !errors.Is(err, xsk.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewProgram(%+v) = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.want)
		}
	}
}

// Another XDP program on the interface: Open fails with ErrBusy naming it,
// and saying that another xdpio user holds it through a bpf_link (which
// `ip link set xdp off` cannot detach).
func TestOpenBusy(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	first := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Expr: "udp"}})
	id, err := first.Program().ProgramID()
	if err != nil {
		t.Fatal(err)
	}
	err = pair.B.Do(func() error {
		d, err := xsk.Open(pair.B.Link, xsk.Config{Program: xsk.ProgramConfig{Expr: "tcp"}})
		if err == nil {
			d.Close()
		}
		return err
	})
	if !errors.Is(err, xsk.ErrBusy) {
		t.Fatalf("second Open: %v, want ErrBusy", err)
	}
	t.Log(err)
	mode := first.Program().Mode().String()
	for _, want := range []string{fmt.Sprintf("id %d", id), "xdpio's own program", mode + " mode", "held by bpf_link", "ShareDispatcher"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ErrBusy text %q lacks %q", err, want)
		}
	}
}

// userRedirect is a user's own XDP program: every UDP-to-port IPv4 frame
// (no IP options) to the XSKMAP by RX queue, the rest to the kernel.
func userRedirect(t *testing.T, xsks *ebpf.Map, port uint16) *ebpf.Program {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "user_prog",
		Type: ebpf.XDP,
		Instructions: asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			asm.LoadMem(asm.R2, asm.R6, 0, asm.Word),
			asm.LoadMem(asm.R3, asm.R6, 4, asm.Word),
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, 14+20+4),
			asm.JGT.Reg(asm.R4, asm.R3, "pass"),
			asm.LoadMem(asm.R4, asm.R2, 12, asm.Half),
			asm.JNE.Imm(asm.R4, 0x0008, "pass"), // 0x0800 read little-endian
			asm.LoadMem(asm.R4, asm.R2, 23, asm.Byte),
			asm.JNE.Imm(asm.R4, 17, "pass"),
			asm.LoadMem(asm.R4, asm.R2, 36, asm.Half),
			asm.HostTo(asm.BE, asm.R4, asm.Half),
			asm.JNE.Imm(asm.R4, int32(port), "pass"),
			asm.LoadMem(asm.R2, asm.R6, 16, asm.Word),
			asm.LoadMapPtr(asm.R1, xsks.FD()),
			asm.Mov.Imm(asm.R3, 2),
			asm.FnRedirectMap.Call(),
			asm.Return(),
			asm.Mov.Imm(asm.R0, 2).WithSymbol("pass"),
			asm.Return(),
		},
		License: "MIT",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// Bring your own program: xdpio attaches it and registers the sockets in
// its XSKMAP; or only registers them, the user having attached it.
func TestUserProgram(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	const port = 9163
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer xsks.Close()
	prog := userRedirect(t, xsks, port)

	t.Run("xdpio attaches", func(t *testing.T) {
		d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{UserProgram: prog, UserMap: xsks}})
		done := make(chan *collector)
		go func() { done <- collect(t, d.Sockets(), port, 20, 3*time.Second) }()
		sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, port), 1, 20, 64, 0)
		if c := <-done; c.frames != 20 {
			t.Errorf("sockets got %v, want 20", c)
		}
		d.Close()
		// The program and the map are still the user's.
		if _, err := prog.Info(); err != nil {
			t.Errorf("the user's program after Close: %v", err)
		}
	})
	t.Run("user attaches", func(t *testing.T) {
		var l link.Link
		if err := pair.B.Do(func() (err error) {
			l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: pair.B.Ifindex, Flags: link.XDPGenericMode})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{UserMap: xsks}})
		done := make(chan *collector)
		go func() { done <- collect(t, d.Sockets(), port, 20, 3*time.Second) }()
		sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, port), 1, 20, 64, 0)
		if c := <-done; c.frames != 20 {
			t.Errorf("sockets got %v, want 20", c)
		}
	})
}

// The compiled expression and the hand-built rule for the same thing give
// the same verdicts on plain frames.
func TestVerdictsExprAndRule(t *testing.T) {
	netnstest.RequirePriv(t)
	a, b := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	src4, dst4 := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	src6, dst6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	var frames [][]byte
	for _, dport := range []uint16{9000, 9001, 53} {
		frames = append(frames,
			udpFrame(a, b, netip.AddrPortFrom(src4, 1000), netip.AddrPortFrom(dst4, dport), []byte("x")),
			udpFrame(a, b, netip.AddrPortFrom(src6, 1000), netip.AddrPortFrom(dst6, dport), []byte("x")),
			udpFrame(a, b, netip.AddrPortFrom(src4, dport), netip.AddrPortFrom(dst4, 1000), []byte("x")),
		)
	}
	rule, err := xsk.Verdicts(xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(9000)}}, frames)
	if err != nil {
		t.Fatal(err)
	}
	expr, err := xsk.Verdicts(xsk.ProgramConfig{Expr: "udp dst port 9000"}, frames)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range frames {
		if rule[i] != expr[i] {
			t.Errorf("frame %d: rule %v, expression %v", i, rule[i], expr[i])
		}
		if expr[i] {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d frames matched, want 2", n)
	}
}
