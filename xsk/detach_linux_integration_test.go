//go:build linux

package xsk_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// linkOf returns the ID of the bpf_link attaching program id, as bpftool
// lists it (an outside view of what xdpio attached).
func linkOf(t *testing.T, id uint32) int {
	t.Helper()
	bpftool := netnstest.RequireTool(t, "bpftool")
	out, err := exec.Command(bpftool, "-j", "link", "show").Output()
	if err != nil {
		t.Fatalf("bpftool link show: %v", err)
	}
	var links []struct {
		ID     int    `json:"id"`
		ProgID uint32 `json:"prog_id"`
		Type   string `json:"type"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatalf("bpftool link show: %v\n%s", err, out)
	}
	for _, l := range links {
		if l.ProgID == id {
			return l.ID
		}
	}
	t.Fatalf("bpftool lists no link of program %d:\n%s", id, out)
	return 0
}

// Someone else detaching the program's bpf_link (bpftool link detach)
// ends the runner and every RX wait with ErrDetached within about a
// second, and the frames go to the kernel's stack again.
func TestDetachedByBpftool(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	const port = 9400
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}}})
	id, err := d.Program().ProgramID()
	if err != nil {
		t.Fatal(err)
	}
	linkID := linkOf(t, id)

	// Before: frames reach the sockets.
	dst := netip.AddrPortFrom(pair.B.IPv4, port)
	sendUDP(t, pair.A, dst, 2, 20, 64, 0)
	if c := collect(t, d.Sockets(), port, 20, 5*time.Second); c.frames != 20 {
		t.Fatalf("before the detach the sockets got %v, want 20 frames", c)
	}
	if err := d.Program().Err(); err != nil {
		t.Fatalf("Program.Err before the detach: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		ran <- d.Receive(ctx, xsk.RunConfig{}, func(*xsk.Socket, *xsk.Batch) {})
	}()
	waited := make(chan error, 1)
	s := d.Sockets()[1]
	time.Sleep(50 * time.Millisecond) // the runner is in its wait
	detached := time.Now()
	if out, err := exec.Command("bpftool", "link", "detach", "id", strconv.Itoa(linkID)).CombinedOutput(); err != nil {
		t.Fatalf("bpftool link detach id %d: %v\n%s", linkID, err, out)
	}
	var took time.Duration
	select {
	case err := <-ran:
		took = time.Since(detached)
		if !errors.Is(err, xsk.ErrDetached) {
			t.Fatalf("Receive ended with %v, want ErrDetached", err)
		}
		t.Logf("Receive ended %v after the detach: %v", took.Round(time.Millisecond), err)
	case <-ctx.Done():
		t.Fatal("Receive did not notice the detach in 10 s")
	}
	if took > 1500*time.Millisecond {
		t.Errorf("the detach took %v to notice, want about a second at most", took)
	}
	go func() {
		_, err := s.Wait(5*time.Second, false)
		waited <- err
	}()
	if err := <-waited; !errors.Is(err, xsk.ErrDetached) {
		t.Errorf("Wait after the detach: %v, want ErrDetached", err)
	}
	if err := d.Program().Err(); !errors.Is(err, xsk.ErrDetached) {
		t.Errorf("Program.Err after the detach: %v, want ErrDetached", err)
	}

	// After: the kernel's stack gets the frames.
	k := listenUDP(t, pair.B, dst)
	sendUDP(t, pair.A, dst, 1, 10, 64, 0)
	if got := readAll(k, 10, 3*time.Second); len(got) != 10 {
		t.Errorf("after the detach the kernel's socket got %d datagrams, want 10", len(got))
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close after the detach: %v", err)
	}
}

// Stats after Close still report what the kernel dropped, and it agrees
// with veth's own count of failed redirects (ethtool -S).
func TestStatsAfterClose(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	const port = 9401
	d, err := func() (d *xsk.Device, err error) {
		err = pair.B.Do(func() error {
			d, err = xsk.Open(pair.B.Link, xsk.Config{
				Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}},
				UMEM:    xsk.UMEMConfig{NumFrames: 256},
			})
			return err
		})
		return d, err
	}()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := d.Sockets()[0]
	// Nobody reads: the RX ring fills and the rest is dropped.
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, port), 1, 2000, 64, time.Millisecond)
	before, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	// A collector reads the device's sockets while it closes (the race
	// detector watches), and finds the same socket after.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			for _, s := range d.Sockets() {
				s.Stats()
			}
			_ = d.Info()
		}
	}()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
	if got := d.Sockets(); len(got) != 1 || got[0] != s {
		t.Errorf("Sockets after Close: %v, want the closed socket", got)
	}
	after, err := s.Stats()
	if err != nil {
		t.Fatalf("Stats after Close: %v", err)
	}
	lost := after.RXDropped + after.RXRingFull
	if lost == 0 || lost < before.RXDropped+before.RXRingFull {
		t.Errorf("after Close: RXDropped %d + RXRingFull %d; before: %d + %d", after.RXDropped, after.RXRingFull, before.RXDropped, before.RXRingFull)
	}
	m, err := pair.B.EthtoolStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	veth, _ := netnstest.SumStats(m, "rx_queue_", "_drops")
	if veth != lost {
		t.Errorf("veth counted %d failed redirects (rx_queue_N_drops), the socket after Close %d (RXDropped %d + RXRingFull %d)", veth, lost, after.RXDropped, after.RXRingFull)
	}
	t.Logf("after Close: RXDropped %d, RXRingFull %d, fill ring empty %d; veth drops %d", after.RXDropped, after.RXRingFull, after.RXFillRingEmpty, veth)
}

// A frame longer than a socket's frame holds (MTU 9000, no multi-buffer)
// goes to the kernel's stack, not to a drop at the socket.
func TestLongFramesPassToKernel(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 1, MTU: 9000})
	const port = 9402
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}}})
	s := d.Sockets()[0]
	dst := netip.AddrPortFrom(pair.B.IPv4, port)
	k := listenUDP(t, pair.B, dst)
	max := s.UMEM().RXFrameLen() - 14 - 20 - 8 // the largest UDP payload a frame holds
	sendUDP(t, pair.A, dst, 1, 5, max, 0)
	if c := collect(t, d.Sockets(), port, 5, 3*time.Second); c.frames != 5 {
		t.Errorf("%d-byte datagrams (frames of %d bytes): the socket got %v, want 5", max, max+42, c)
	}
	sendUDP(t, pair.A, dst, 1, 5, max+1, 0)
	sendUDP(t, pair.A, dst, 1, 5, 8000, 0)
	got := readAll(k, 10, 3*time.Second)
	if len(got) != 10 {
		t.Errorf("the kernel's socket got %d of the 10 longer datagrams", len(got))
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RXDropped != 0 {
		t.Errorf("the socket dropped %d frames", st.RXDropped)
	}
}
