//go:build linux

package xsk_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
	"golang.org/x/sys/unix"
)

const envBPFFSChild = "XDPIO_TEST_BPFFS_CHILD"

// inPrivateBPFFS runs the calling test again in a child process with a
// private mount namespace and a fresh bpffs, which it names in
// LIBXDP_BPFFS for xdpio and for xdp-tools alike (ip netns exec remounts
// /sys, so a bpffs under /sys/fs/bpf would not reach them). Nothing it
// pins survives the child. It returns true in the child, which runs the
// test; in the parent it reports the child's result and returns false.
func inPrivateBPFFS(t *testing.T) bool {
	t.Helper()
	netnstest.RequirePriv(t)
	if err := haveExtension(); err != nil {
		// Some kernels refuse freplace even to root (this project's 6.18
		// VM: EPERM); libxdp's dispatcher cannot work there either. The
		// lab's guests (test/lab) run these tests.
		netnstest.SkipIfNotSupported(t, fmt.Errorf("load freplace (BPF_PROG_TYPE_EXT) programs, which any libxdp dispatcher needs: %w: %w", xsk.ErrNotSupported, err))
	}
	if os.Getenv(envBPFFSChild) == "1" {
		dir := t.TempDir()
		if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
			t.Fatalf("mount bpffs at %s: %v", dir, err)
		}
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		t.Setenv("LIBXDP_BPFFS", dir)
		return true
	}
	args := []string{"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.v", "-test.count=1"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envBPFFSChild+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		t.Log(l)
	}
	if err != nil {
		t.Fatalf("the test in its own mount namespace: %v", err)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skip("skipped in the child (see above)")
	}
	return false
}

// dispatcherPair is the start of a dispatcher test: in the parent it runs
// the test in its own mount namespace and returns nil; in that child it
// returns a fresh veth pair with queues queues, xdp-tools at hand.
func dispatcherPair(t *testing.T, queues int) *netnstest.Pair {
	t.Helper()
	if !inPrivateBPFFS(t) {
		return nil
	}
	netnstest.RequireTool(t, "xdp-loader")
	netnstest.RequireTool(t, "xdp-filter")
	return netnstest.New(t, netnstest.Config{Queues: queues})
}

func haveExtension() error { return features.HaveProgramType(ebpf.Extension) }

// libxdpObject returns the path of one of xdp-tools' BPF objects.
func libxdpObject(t *testing.T, name string) string {
	t.Helper()
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu/bpf", "/usr/lib/aarch64-linux-gnu/bpf", "/usr/lib/bpf", "/usr/local/lib/bpf"} {
		if _, err := os.Stat(d + "/" + name); err == nil {
			return d + "/" + name
		}
	}
	netnstest.Missing(t, "xdp-tools' "+name)
	return ""
}

func run(t *testing.T, h *netnstest.Host, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// loaderStatus is `xdp-loader status DEV`'s program rows: name → (kind of
// row) for the dispatcher and each component.
func loaderStatus(t *testing.T, h *netnstest.Host) (dispatcher bool, progs []string, out string) {
	t.Helper()
	out = run(t, h, "xdp-loader", "status", h.Link)
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == h.Link && f[1] == "xdp_dispatcher":
			dispatcher = true
		case len(f) >= 3 && f[0] == "=>":
			progs = append(progs, f[2])
		case len(f) >= 2 && f[0] == h.Link && f[1] != "<No":
			progs = append(progs, f[1])
		}
	}
	return dispatcher, progs, out
}

// wantPrograms fails t unless `xdp-loader status` lists exactly want (in
// run order) as the programs on h's link, behind a dispatcher; with want
// empty, no program and no dispatcher. It returns the status text.
func wantPrograms(t *testing.T, h *netnstest.Host, when string, want ...string) string {
	t.Helper()
	disp, progs, out := loaderStatus(t, h)
	if !slices.Equal(progs, want) || disp != (len(want) > 0) {
		t.Fatalf("%s: xdp-loader status lists %v (dispatcher %v), want %v (dispatcher %v):\n%s", when, progs, disp, want, len(want) > 0, out)
	}
	return out
}

// reaches sends n datagrams to port on B and reports how many the sockets
// and a kernel socket on the port got.
func reaches(t *testing.T, pair *netnstest.Pair, d *xsk.Device, port uint16, n int) (sockets, kernel int) {
	t.Helper()
	k := listenUDP(t, pair.B, netip.AddrPortFrom(netip.IPv4Unspecified(), port))
	defer k.Close()
	done := make(chan int, 1)
	if d != nil {
		go func() { done <- collect(t, d.Sockets(), port, n, 3*time.Second).frames }()
	} else {
		done <- 0
	}
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, port), 1, n, 64, 0)
	kernel = len(readAll(k, n, 2*time.Second))
	return <-done, kernel
}

func ping(t *testing.T, pair *netnstest.Pair) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := pair.A.Command(ctx, "ping", "-c", "3", "-i", "0.2", "-W", "2", pair.B.IPv4.String()).CombinedOutput()
	if err != nil {
		return errors.New(string(out))
	}
	return nil
}

// xdpio joins the dispatcher xdp-filter loaded, runs behind xdp-filter's
// rules, survives libxdp rebuilding the dispatcher around it in both
// directions, and leaves it whole on Close.
func TestDispatcherJoinXDPFilter(t *testing.T) {
	pair := dispatcherPair(t, 2)
	if pair == nil {
		return // run in the child
	}
	const port, other uint16 = 9160, 9161

	run(t, pair.B, "xdp-filter", "load", pair.B.Link)
	wantPrograms(t, pair.B, "after xdp-filter load (a single program: libxdp fell back from its dispatcher?)", "xdpfilt_alw_all")
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}}})
	t.Logf("joined:\n%s", wantPrograms(t, pair.B, "after Open", "xdpfilt_alw_all", "xdpio_redirect"))
	if s, k := reaches(t, pair, d, port, 40); s != 40 || k != 0 {
		t.Errorf("UDP to the sockets' port: sockets %d, kernel %d, want 40 and 0", s, k)
	}
	if s, k := reaches(t, pair, d, other, 40); s != 0 || k != 40 {
		t.Errorf("UDP to another port: sockets %d, kernel %d, want 0 and 40", s, k)
	}
	if err := ping(t, pair); err != nil {
		t.Errorf("ping through the dispatcher: %v", err)
	}

	// xdp-filter runs first: its deny rule stops the frames before xdpio.
	run(t, pair.B, "xdp-filter", "port", strconv.Itoa(int(port)), "--mode", "dst")
	if s, k := reaches(t, pair, d, port, 40); s != 0 || k != 0 {
		t.Errorf("behind xdp-filter's deny rule: sockets %d, kernel %d, want 0 and 0", s, k)
	}
	run(t, pair.B, "xdp-filter", "port", strconv.Itoa(int(port)), "--mode", "dst", "--remove")
	if s, _ := reaches(t, pair, d, port, 40); s != 40 {
		t.Errorf("after the rule's removal: sockets %d, want 40", s)
	}

	// libxdp rebuilds the dispatcher without xdp-filter, carrying xdpio's
	// program over from its pins, and again with it.
	run(t, pair.B, "xdp-filter", "unload", pair.B.Link)
	wantPrograms(t, pair.B, "after xdp-filter unload", "xdpio_redirect")
	if s, k := reaches(t, pair, d, port, 40); s != 40 || k != 0 {
		t.Errorf("after libxdp rebuilt the dispatcher: sockets %d, kernel %d, want 40 and 0", s, k)
	}
	run(t, pair.B, "xdp-filter", "load", pair.B.Link)
	wantPrograms(t, pair.B, "after xdp-filter load next to xdpio", "xdpfilt_alw_all", "xdpio_redirect")
	if s, _ := reaches(t, pair, d, port, 40); s != 40 {
		t.Errorf("after xdp-filter joined again: sockets %d, want 40", s)
	}

	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantPrograms(t, pair.B, "after Close", "xdpfilt_alw_all")
	if s, k := reaches(t, pair, nil, port, 40); s != 0 || k != 40 {
		t.Errorf("after Close, the port goes to the kernel: kernel %d, want 40", k)
	}
	run(t, pair.B, "xdp-filter", "unload", pair.B.Link)
	wantPrograms(t, pair.B, "after xdp-filter unload")
	checkNoPins(t)
}

// Someone else taking xdpio's program out of the dispatcher (xdp-loader
// unload -i ID), or detaching the whole dispatcher (ip link set xdp off),
// ends the runner with ErrDetached within about a second.
func TestDispatcherDetached(t *testing.T) {
	pair := dispatcherPair(t, 2)
	if pair == nil {
		return // run in the child
	}
	const port uint16 = 9164
	run(t, pair.B, "xdp-filter", "load", pair.B.Link)
	for _, how := range []string{"xdp-loader unload -i", "ip link set xdp off"} {
		d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}}})
		wantPrograms(t, pair.B, "after Open", "xdpfilt_alw_all", "xdpio_redirect")
		if s, _ := reaches(t, pair, d, port, 20); s != 20 {
			t.Fatalf("%s: before, the sockets got %d of 20", how, s)
		}
		id, err := d.Program().ProgramID()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ran := make(chan error, 1)
		go func() { ran <- d.Receive(ctx, xsk.RunConfig{}, func(*xsk.Socket, *xsk.Batch) {}) }()
		time.Sleep(50 * time.Millisecond) // the runner is in its wait
		at := time.Now()
		if how == "ip link set xdp off" {
			run(t, pair.B, "ip", "link", "set", "dev", pair.B.Link, "xdp", "off")
		} else {
			run(t, pair.B, "xdp-loader", "unload", pair.B.Link, "-i", strconv.Itoa(int(id)))
		}
		select {
		case err := <-ran:
			took := time.Since(at)
			if !errors.Is(err, xsk.ErrDetached) || took > 1500*time.Millisecond {
				t.Errorf("%s: Receive ended after %v with %v; want ErrDetached within about a second", how, took, err)
			}
			t.Logf("%s: noticed after %v: %v", how, took.Round(time.Millisecond), err)
		case <-ctx.Done():
			t.Errorf("%s: Receive did not notice in 10 s", how)
		}
		cancel()
		if err := d.Close(); err != nil {
			t.Errorf("%s: Close: %v", how, err)
		}
	}
	// The dispatcher detached behind libxdp's back leaves its pins, as it
	// would for libxdp's own programs; its cleaner removes them.
	run(t, pair.B, "xdp-loader", "clean", pair.B.Link)
	checkNoPins(t)
}

// ShareDispatcher puts xdpio's program in a dispatcher of its own that
// libxdp's tools recognise and join; when xdpio leaves, the others stay.
func TestDispatcherCreate(t *testing.T) {
	pair := dispatcherPair(t, 2)
	if pair == nil {
		return // run in the child
	}
	const port uint16 = 9162
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{
		Filter: []xsk.Rule{xsk.UDPPort(port)}, Share: xsk.ShareDispatcher, Priority: 5,
	}})
	out := wantPrograms(t, pair.B, "after Open with ShareDispatcher", "xdpio_redirect")
	if !strings.Contains(out, " 5 ") {
		t.Errorf("xdp-loader status does not show run priority 5:\n%s", out)
	}
	if s, k := reaches(t, pair, d, port, 40); s != 40 || k != 0 {
		t.Errorf("sockets %d, kernel %d, want 40 and 0", s, k)
	}
	// Priority 5 runs before xdp-filter's 50: a deny rule does not stop
	// what xdpio takes.
	run(t, pair.B, "xdp-filter", "load", pair.B.Link)
	run(t, pair.B, "xdp-filter", "port", strconv.Itoa(int(port)), "--mode", "dst")
	wantPrograms(t, pair.B, "after xdp-filter joined xdpio's dispatcher", "xdpio_redirect", "xdpfilt_alw_all")
	if s, _ := reaches(t, pair, d, port, 40); s != 40 {
		t.Errorf("xdpio before xdp-filter's deny rule: sockets %d, want 40", s)
	}
	if err := ping(t, pair); err != nil {
		t.Errorf("ping: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantPrograms(t, pair.B, "after Close", "xdpfilt_alw_all")
	if _, k := reaches(t, pair, nil, port, 40); k != 0 {
		t.Errorf("xdp-filter's deny rule after xdpio left: the kernel got %d, want 0", k)
	}
	run(t, pair.B, "xdp-filter", "unload", pair.B.Link)

	// Alone, xdpio's Close detaches the dispatcher it made.
	d = openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Share: xsk.ShareDispatcher}})
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantPrograms(t, pair.B, "after the last program left")
	checkNoPins(t)
}

// Two Devices split an interface's queues, each one program of the same
// dispatcher: frames of a queue whose socket belongs to the other Device
// pass through the first program (no socket in its XSKMAP) to the second.
func TestDispatcherTwoDevices(t *testing.T) {
	pair := dispatcherPair(t, 2)
	if pair == nil {
		return // run in the child
	}
	const port uint16 = 9164
	filter := []xsk.Rule{xsk.UDPPort(port)}
	d0 := openOn(t, pair.B, xsk.Config{Queues: []int{0}, Program: xsk.ProgramConfig{Filter: filter, Share: xsk.ShareDispatcher}})
	d1 := openOn(t, pair.B, xsk.Config{Queues: []int{1}, Program: xsk.ProgramConfig{Filter: filter, Share: xsk.ShareDispatcher}})
	wantPrograms(t, pair.B, "after two Opens", "xdpio_redirect", "xdpio_redirect")
	const n = 400
	done := make(chan [2]int, 1)
	go func() {
		var c0, c1 *collector
		ch := make(chan struct{}, 2)
		go func() { c0 = collect(t, d0.Sockets(), port, n, 4*time.Second); ch <- struct{}{} }()
		go func() { c1 = collect(t, d1.Sockets(), port, n, 4*time.Second); ch <- struct{}{} }()
		<-ch
		<-ch
		done <- [2]int{c0.frames, c1.frames}
	}()
	sendUDP(t, pair.A, netip.AddrPortFrom(pair.B.IPv4, port), 16, n, 64, 0)
	got := <-done
	if got[0]+got[1] != n || got[0] == 0 || got[1] == 0 {
		t.Errorf("queue 0's Device got %d, queue 1's %d: want all %d between them, some on each", got[0], got[1], n)
	}
	if err := d0.Close(); err != nil {
		t.Fatal(err)
	}
	wantPrograms(t, pair.B, "after the first Close", "xdpio_redirect")
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	wantPrograms(t, pair.B, "after both Closed")
	checkNoPins(t)
}

// A process killed in a dispatcher leaves its program pinned there, as
// documented: with its sockets gone the program passes every frame on to
// the kernel, and xdp-loader removes it by id, leaving the others.
func TestDispatcherKilledMember(t *testing.T) {
	pair := dispatcherPair(t, 2)
	if pair == nil {
		return // run in the child
	}
	const port uint16 = 9163
	run(t, pair.B, "xdp-filter", "load", pair.B.Link)
	cmd := holdSockets(t, pair.B, "XDPIO_HELPER_IFACE="+pair.B.Link, "XDPIO_HELPER_UDPPORT="+strconv.Itoa(int(port)))
	wantPrograms(t, pair.B, "after the helper joined", "xdpfilt_alw_all", "xdpio_redirect")
	if _, k := reaches(t, pair, nil, port, 20); k != 0 {
		t.Errorf("while the helper's sockets live, the kernel got %d of 20 for their port", k)
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	out := wantPrograms(t, pair.B, "after SIGKILL (the program stays pinned)", "xdpfilt_alw_all", "xdpio_redirect")
	if _, k := reaches(t, pair, nil, port, 40); k != 40 {
		t.Errorf("after SIGKILL the orphaned program must pass frames on: the kernel got %d of 40", k)
	}
	id := ""
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == "=>" && f[2] == "xdpio_redirect" {
			id = f[3]
		}
	}
	run(t, pair.B, "xdp-loader", "unload", pair.B.Link, "-i", id)
	wantPrograms(t, pair.B, "after xdp-loader unload -i "+id, "xdpfilt_alw_all")
	// And the interface takes xdpio again.
	d := openOn(t, pair.B, xsk.Config{Program: xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(port)}}})
	if s, _ := reaches(t, pair, d, port, 20); s != 20 {
		t.Errorf("a new Open after the cleanup: sockets %d of 20", s)
	}
}

// The refusals with a libxdp dispatcher attached: ShareExclusive, and RX
// hash metadata.
func TestDispatcherRefusals(t *testing.T) {
	pair := dispatcherPair(t, 1)
	if pair == nil {
		return // run in the child
	}
	run(t, pair.B, "xdp-loader", "load", pair.B.Link, libxdpObject(t, "xdpfilt_alw_all.o"))
	err := openErr(pair.B, xsk.ProgramConfig{Share: xsk.ShareExclusive})
	if !errors.Is(err, xsk.ErrBusy) || !strings.Contains(err.Error(), "xdp_dispatcher") || !strings.Contains(err.Error(), "ShareExclusive") {
		t.Errorf("ShareExclusive over a dispatcher: %v, want ErrBusy naming it", err)
	}
	err = openErr(pair.B, xsk.ProgramConfig{RXHash: true})
	if !errors.Is(err, xsk.ErrNotSupported) || !strings.Contains(err.Error(), "device-bound") {
		t.Errorf("RXHash in a dispatcher: %v, want ErrNotSupported saying why", err)
	}
	// Multi-buffer sockets behind a program that is not frags-aware: the
	// dispatcher cannot be either, and jumbo frames would not arrive.
	err = pair.B.Do(func() error {
		d, err := xsk.Open(pair.B.Link, xsk.Config{Socket: xsk.SocketConfig{MultiBuffer: true}})
		if err == nil {
			d.Close()
		}
		return err
	})
	if !errors.Is(err, xsk.ErrNotSupported) || !strings.Contains(err.Error(), "xdpfilt_alw_all") {
		t.Errorf("multi-buffer sockets in a dispatcher that is not frags-aware: %v, want ErrNotSupported naming the program", err)
	}
	wantPrograms(t, pair.B, "after the refused Opens", "xdpfilt_alw_all")
}

// The refusals that need no dispatcher, on any kernel: ShareDispatcher
// without a bpffs, over a program that is no dispatcher, and, where the
// kernel refuses freplace programs, the error that says so.
func TestShareDispatcherRefusals(t *testing.T) {
	netnstest.RequirePriv(t)
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	t.Setenv("LIBXDP_BPFFS", t.TempDir()) // a tmpfs or disk directory: no bpffs
	err := openErr(pair.B, xsk.ProgramConfig{Share: xsk.ShareDispatcher})
	if !errors.Is(err, xsk.ErrNotSupported) || !strings.Contains(err.Error(), "mount -t bpf") {
		t.Errorf("no bpffs: %v, want ErrNotSupported saying what to mount", err)
	}
	if haveExtension() != nil {
		// This kernel refuses freplace: with a bpffs, the refusal
		// must say so rather than blame permissions.
		dir := t.TempDir()
		if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
			t.Fatalf("mount bpffs at %s: %v", dir, err)
		}
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		t.Setenv("LIBXDP_BPFFS", dir)
		err := openErr(pair.B, xsk.ProgramConfig{Share: xsk.ShareDispatcher})
		if !errors.Is(err, xsk.ErrNotSupported) || !strings.Contains(err.Error(), "BPF_PROG_TYPE_EXT") {
			t.Errorf("freplace refused by the kernel: %v, want ErrNotSupported naming BPF_PROG_TYPE_EXT", err)
		}
		if out := run(t, pair.B, "ip", "link", "show", pair.B.Link); strings.Contains(out, "prog/xdp") {
			t.Errorf("a failed join left a program attached:\n%s", out)
		}
		if ents, _ := os.ReadDir(dir + "/xdp"); len(ents) != 0 {
			t.Errorf("a failed join left pins: %v", ents)
		}
	}
	run(t, pair.B, "ip", "link", "set", "dev", pair.B.Link, "xdp", "obj", libxdpObject(t, "xdpfilt_alw_all.o"), "sec", "xdp")
	err = openErr(pair.B, xsk.ProgramConfig{Share: xsk.ShareDispatcher})
	if !errors.Is(err, xsk.ErrBusy) || !strings.Contains(err.Error(), "xdpfilt_alw_all") {
		t.Errorf("ShareDispatcher over a plain program: %v, want ErrBusy naming it", err)
	}
	run(t, pair.B, "ip", "link", "set", "dev", pair.B.Link, "xdp", "off")
}

func openErr(h *netnstest.Host, cfg xsk.ProgramConfig) error {
	return h.Do(func() error {
		d, err := xsk.Open(h.Link, xsk.Config{Program: cfg})
		if err == nil {
			d.Close()
		}
		return err
	})
}

func checkNoPins(t *testing.T) {
	t.Helper()
	ents, err := os.ReadDir(os.Getenv("LIBXDP_BPFFS") + "/xdp")
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "dispatch-") {
			t.Errorf("pins left in bpffs: %s", e.Name())
		}
	}
}
