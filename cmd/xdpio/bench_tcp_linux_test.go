package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// tcpReport is what the tests read of a TCP test's -J report, iperf3's
// or xdpio's.
type tcpReport struct {
	Error string `json:"error"`
	Start struct {
		TCPStack *plane.TCPStack `json:"tcp_stack"`
	} `json:"start"`
	End struct {
		Streams []struct {
			Sender struct {
				Bytes       uint64 `json:"bytes"`
				Retransmits *int64 `json:"retransmits"`
			} `json:"sender"`
			Receiver struct {
				Bytes uint64 `json:"bytes"`
			} `json:"receiver"`
		} `json:"streams"`
		SumSent struct {
			Bytes       uint64 `json:"bytes"`
			Retransmits *int64 `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			Bytes uint64 `json:"bytes"`
		} `json:"sum_received"`
		Counters *plane.TCPStackCounters `json:"tcp_stack_counters"`
	} `json:"end"`
}

func parseTCPReport(t *testing.T, who string, b []byte) tcpReport {
	t.Helper()
	var r tcpReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s's JSON: %v\n%s", who, err, b)
	}
	if r.Error != "" {
		t.Fatalf("%s reports an error: %s", who, r.Error)
	}
	return r
}

func retransmits(r tcpReport) int64 {
	if r.End.SumSent.Retransmits == nil {
		return -1
	}
	return *r.End.SumSent.Retransmits
}

// TestBenchTCPUnderLoss: 1% of the data segments on the link of a real
// iperf3's end are dropped (a tc BPF program on its veth: this kernel has
// no netem), and the TCP test over xdpio's netstack still completes with
// the bytes agreeing. The lossy link's count of what it dropped is the
// oracle of the retransmissions: every dropped segment was sent again at
// least once. Where netstack sends (our client to iperf3 -s; our server
// to iperf3 -c -R) its report's retransmissions are its stack's
// (tcp_stack_counters.retrans_segs); where it receives (our client -R),
// the sending kernel's own TcpRetransSegs counts them, as does the
// report. (Reordering: TestBenchTCPReordered.)
func TestBenchTCPUnderLoss(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	const share, minPayload = 0.01, 1000
	for i, tc := range []struct {
		name       string
		oursServer bool
		reverse    bool
	}{
		{"client sends", false, false},
		{"client receives", false, true},
		{"server sends", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			port := 15501 + i
			ps := strconv.Itoa(port)
			// The link of iperf3's end, where netstack's frames arrive
			// (its ingress) or iperf3's kernel sends (its egress, with
			// one segment a packet so that a dropped packet is a
			// segment: the kernel's TCP builds GSO packets whatever the
			// device's features, as large as its gso_max_size).
			iperfHost, egress := pair.B, tc.reverse
			if tc.oursServer {
				iperfHost, egress = pair.A, false
			}
			if egress {
				runIn(t, iperfHost, "ip", "link", "set", "dev", iperfHost.Link, "gso_max_size", "1500")
			}
			retrans0 := netnstest.Counter(t, iperfHost, "TcpRetransSegs")
			var ours, theirs []byte
			if tc.oursServer {
				var srvOut syncBuffer
				done := make(chan error, 1)
				go func() {
					done <- runWith(ctx, &globals{stdout: &srvOut, stderr: &srvOut},
						[]string{"bench", "server", "--netns", pair.B.NS, "-i", pair.B.Link, "--port", ps, "-1", "--json"})
				}()
				waitListening(ctx, t, pair.B, port)
				link := newLossyTCPLink(t, iperfHost, egress, uint16(port), share, minPayload)
				out, err := pair.A.Command(ctx, "iperf3", "-c", pair.B.IPv4.String(), "-p", ps, "-t", "2", "-R", "-J").Output()
				if err != nil {
					t.Fatalf("iperf3 -c: %v\n%s", err, out)
				}
				if err := <-done; err != nil {
					t.Fatalf("bench server: %v\n%s", err, srvOut.String())
				}
				ours, theirs = []byte(srvOut.String()), out
				checkLoss(t, link, ours, theirs, tc.reverse, true, netnstest.Counter(t, iperfHost, "TcpRetransSegs")-retrans0)
				return
			}
			srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", ps)
			var srvOut syncBuffer
			srv.Stdout = &srvOut
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			waitListening(ctx, t, pair.B, port)
			link := newLossyTCPLink(t, iperfHost, egress, uint16(port), share, minPayload)
			args := []string{"bench", "client", "--netns", pair.A.NS, "-i", pair.A.Link, "-c", pair.B.IPv4.String(), "--port", ps, "-t", "2", "--json"}
			if tc.reverse {
				args = append(args, "-R")
			}
			var out, errOut bytes.Buffer
			if err := runWith(ctx, &globals{stdout: &out, stderr: &errOut}, args); err != nil {
				t.Fatalf("bench client: %v\n%s%s", err, out.String(), errOut.String())
			}
			if err := srv.Wait(); err != nil {
				t.Fatalf("iperf3 -s: %v\n%s", err, srvOut.String())
			}
			checkLoss(t, link, out.Bytes(), []byte(srvOut.String()), tc.reverse, false, netnstest.Counter(t, iperfHost, "TcpRetransSegs")-retrans0)
		})
	}
}

// checkLoss checks a TCP test over a lossy link: ours is xdpio's --json,
// theirs iperf3's -J (a server's knows its own side only), kernelRetrans
// what iperf3's kernel counted sent again.
func checkLoss(t *testing.T, link *lossyLink, ours, theirs []byte, reverse, oursServer bool, kernelRetrans int64) {
	t.Helper()
	o, th := parseTCPReport(t, "xdpio", ours), parseTCPReport(t, "iperf3", theirs)
	passed, dropped := link.counts(t)
	c := o.End.Counters
	if c == nil || o.Start.TCPStack == nil || o.Start.TCPStack.Name != "netstack" {
		t.Fatalf("xdpio's report: stack %+v, counters %+v: want netstack's", o.Start.TCPStack, c)
	}
	netstackSends := oursServer == reverse
	t.Logf("link passed %d, dropped %d segments; xdpio: sent %d, received %d, retransmits %d, netstack %+v; iperf3: sent %d, received %d, retransmits %d; its kernel sent %d again",
		passed, dropped, o.End.SumSent.Bytes, o.End.SumReceived.Bytes, retransmits(o), *c, th.End.SumSent.Bytes, th.End.SumReceived.Bytes, retransmits(th), kernelRetrans)
	if dropped == 0 || float64(dropped) > 0.02*float64(passed+dropped) {
		t.Fatalf("the link dropped %d of %d segments, want about 1%%", dropped, passed+dropped)
	}
	// The bytes agree: xdpio's report holds both ends' counts, iperf3's
	// its own side's (all of it but a receiving iperf3 client's, which
	// stops counting at TEST_END, as against an iperf3 server).
	switch {
	case oursServer:
		if th.End.SumSent.Bytes != o.End.SumSent.Bytes || th.End.SumReceived.Bytes != o.End.SumReceived.Bytes || o.End.SumReceived.Bytes > o.End.SumSent.Bytes || o.End.SumReceived.Bytes == 0 {
			t.Errorf("bytes: xdpio sent %d, iperf3 received %d; iperf3's report: %d and %d", o.End.SumSent.Bytes, o.End.SumReceived.Bytes, th.End.SumSent.Bytes, th.End.SumReceived.Bytes)
		}
	case reverse:
		if o.End.SumReceived.Bytes != th.End.SumSent.Bytes || o.End.SumSent.Bytes != th.End.SumSent.Bytes {
			t.Errorf("bytes: iperf3 -s sent %d, xdpio received %d (and says %d were sent)", th.End.SumSent.Bytes, o.End.SumReceived.Bytes, o.End.SumSent.Bytes)
		}
	default:
		if th.End.SumReceived.Bytes != o.End.SumSent.Bytes || o.End.SumReceived.Bytes != o.End.SumSent.Bytes {
			t.Errorf("bytes: xdpio sent %d, iperf3 -s received %d (and xdpio says %d)", o.End.SumSent.Bytes, th.End.SumReceived.Bytes, o.End.SumReceived.Bytes)
		}
	}
	// Every dropped segment was sent again, and all was delivered before
	// the results were exchanged: our sending client waits for the
	// server's acknowledgement of everything before TEST_END, our
	// sending server for the client's before EXCHANGE_RESULTS (iperf3
	// goes on reading after TEST_END).
	r := retransmits(o)
	if !netstackSends {
		// iperf3 reports what it read from TCP_INFO at TEST_END; the
		// kernel's counters hold the tail's too.
		if kernelRetrans < int64(dropped) || r != retransmits(th) || r <= 0 {
			t.Errorf("iperf3's kernel sent %d segments again and reported %d, the link dropped %d (xdpio says %d)", kernelRetrans, retransmits(th), dropped, r)
		}
	} else if r < int64(dropped) || c.RetransSegs < uint64(r) {
		t.Errorf("xdpio reports %d retransmissions, netstack counted %d, the link dropped %d segments", r, c.RetransSegs, dropped)
	}
}

// runIn runs a command in h's namespace, failing t if it fails.
func runIn(t *testing.T, h *netnstest.Host, name string, args ...string) {
	t.Helper()
	if out, err := h.Command(context.Background(), name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), h.NS, err, out)
	}
}

// xdpAttached reports whether h's veth has an XDP program (netlink's
// IFLA_XDP, as `ip -d link` shows it).
func xdpAttached(t *testing.T, h *netnstest.Host) bool {
	t.Helper()
	a, err := h.Attrs()
	if err != nil {
		t.Fatal(err)
	}
	return a.Xdp != nil && a.Xdp.Attached
}

// TestBenchServerSIGKILL: `xdpio bench server` (this test binary running
// xdpio's main, in a process of its own) killed with SIGKILL while a
// real iperf3 client's TCP test runs on its netstack leaves no XDP
// program on the interface: the kernel detaches it when the process's
// file descriptors close. The port is the kernel's again: a new server
// serves the next TCP test at once.
func TestBenchServerSIGKILL(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.CommandContext(ctx, exe, "--netns", pair.B.NS, "bench", "server", "-i", pair.B.Link, "--port", "15521")
	srv.Env = append(os.Environ(), demoServerEnv+"=1")
	var srvOut syncBuffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	defer func() {
		srv.Process.Kill()
		<-srvDone
	}()
	waitListening(ctx, t, pair.B, 15521)
	if xdpAttached(t, pair.B) {
		t.Fatal("an XDP program on the interface before the test")
	}
	cli := pair.A.Command(ctx, "iperf3", "-c", pair.B.IPv4.String(), "-p", "15521", "-t", "5", "--forceflush")
	var cliOut syncBuffer
	cli.Stdout, cli.Stderr = &cliOut, &cliOut
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	cliDone := make(chan error, 1)
	go func() { cliDone <- cli.Wait() }()
	// The test runs once iperf3 prints its first interval.
	for !strings.Contains(cliOut.String(), "0.00-1.00") {
		select {
		case err := <-cliDone:
			t.Fatalf("iperf3 ended before its first interval: %v\n%s\nserver:\n%s", err, cliOut.String(), srvOut.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !xdpAttached(t, pair.B) {
		t.Fatalf("no XDP program while the TCP test runs on netstack\nserver:\n%s", srvOut.String())
	}
	kill := time.Now()
	srv.Process.Signal(syscall.SIGKILL)
	select {
	case err := <-srvDone:
		srvDone <- err // for the deferred wait
	case <-time.After(3 * time.Second):
		t.Fatal("bench server still running 3 s after SIGKILL")
	}
	for xdpAttached(t, pair.B) {
		if time.Since(kill) > 2*time.Second {
			t.Fatalf("an XDP program is still attached %v after SIGKILL", time.Since(kill))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("XDP program gone %v after SIGKILL", time.Since(kill).Round(time.Millisecond))
	<-cliDone // iperf3 fails: its server is gone

	// A new server on the same port, and a test on its netstack.
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, &globals{stdout: &out, stderr: &out}, []string{"bench", "server", "--netns", pair.B.NS, "-i", pair.B.Link, "--port", "15521", "-1"})
	}()
	waitListening(ctx, t, pair.B, 15521)
	if res, err := pair.A.Command(ctx, "iperf3", "-c", pair.B.IPv4.String(), "-p", "15521", "-t", "1").CombinedOutput(); err != nil {
		t.Errorf("iperf3 against a new server: %v\n%s", err, res)
	}
	if err := <-done; err != nil {
		t.Errorf("new server: %v\n%s", err, out.String())
	}
	if xdpAttached(t, pair.B) {
		t.Error("an XDP program is left after the new server's test")
	}
}

// TestBenchTCPNetstackBothEnds: `xdpio bench client` and `xdpio bench
// server`, both on netstack (the xsk backend), run TCP tests both ways
// byte for byte; the stack settings given on the command line (--tso,
// --rx-csum, --rx-usecs, --tx-usecs, --tx-frames, --queues) are in force
// and in each report, and they show in the stack's counters: without
// TSO the link cut no segment, with it (the default) it did.
func TestBenchTCPNetstackBothEnds(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	set := []string{"--tso", "off", "--rx-csum", "off", "--rx-usecs", "50", "--tx-usecs", "20", "--tx-frames", "16", "--queues", "0-1"}
	for i, tc := range []struct {
		name    string
		options []string
		client  []string
	}{
		{"options", set, []string{"-P", "2"}},
		{"defaults reverse", nil, []string{"-R"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := serveOnceText(t, pair, 15531+i, append([]string{"--json", "-i", pair.B.Link}, tc.options...),
				append(append([]string{"--json", "-i", pair.A.Link}, tc.options...), tc.client...))
			for _, side := range []struct {
				who string
				out string
			}{{"server", srv}, {"client", cli}} {
				r := parseTCPReport(t, side.who, []byte(side.out))
				s, c := r.Start.TCPStack, r.End.Counters
				if s == nil || c == nil {
					t.Fatalf("%s: no stack or counters in its report:\n%s", side.who, side.out)
				}
				t.Logf("%s: %+v %+v; sent %d received %d", side.who, *s, *c, r.End.SumSent.Bytes, r.End.SumReceived.Bytes)
				if r.End.SumSent.Bytes == 0 || r.End.SumSent.Bytes != r.End.SumReceived.Bytes {
					t.Errorf("%s: sent %d bytes, received %d", side.who, r.End.SumSent.Bytes, r.End.SumReceived.Bytes)
				}
				on := tc.options == nil
				if s.Name != "netstack" || s.TSO != on || s.RXChecksumOffload != on || (s.RXCoalesce != nil) == on || (s.TXCoalesce != nil) == on ||
					len(s.Queues) != 2 || !on && (s.RXCoalesce.RXUsecs != 50 || s.TXCoalesce.TXUsecs != 20 || s.TXCoalesce.TXFrames != 16) {
					t.Errorf("%s: stack %+v, want the settings %v", side.who, *s, tc.options)
				}
				sends := (side.who == "client") != (tc.client[0] == "-R")
				if sends && (c.TXSegmented > 0) != on {
					t.Errorf("%s: TSO %v, and the link cut %d segments", side.who, on, c.TXSegmented)
				}
				if c.RXBadChecksum != 0 || c.RXPartialChecksum != 0 || c.TXDropped != 0 {
					t.Errorf("%s: counters %+v: bad frames between two netstacks", side.who, *c)
				}
			}
		})
	}
}

// A cls_bpf program picks an HTB class by writing its minor number to
// the __sk_buff's tc_classid (the kernel keeps 16 bits of it); the
// filter's classid gives the major, 1.
const (
	skbTCClassid = 72
	htbFast      = 1
	htbSlow      = 2
)

// reorderInstructions is a cls_bpf program (direct action) for an HTB
// root qdisc 1: that puts share (threshold/2^32) of the IPv4 TCP segments
// from or to port with at least minPayload bytes of payload in class 1:2,
// a slow one, and everything else in 1:1: a segment in 1:2 waits while
// later ones pass it. counts[0] counts the candidates sent on, counts[1]
// those held back.
func reorderInstructions(countsFD int, port uint16, threshold uint32, minPayload int32) asm.Instructions {
	be16 := func(v uint16) int32 { return int32(binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v))) }
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 14+20+20),
		asm.JGT.Reg(asm.R4, asm.R3, "fast"),
		asm.LoadMem(asm.R4, asm.R2, 12, asm.Half),
		asm.JNE.Imm(asm.R4, be16(unix.ETH_P_IP), "fast"),
		asm.LoadMem(asm.R4, asm.R2, 14, asm.Byte),
		asm.JNE.Imm(asm.R4, 0x45, "fast"),
		asm.LoadMem(asm.R4, asm.R2, 14+9, asm.Byte),
		asm.JNE.Imm(asm.R4, unix.IPPROTO_TCP, "fast"),
		asm.LoadMem(asm.R4, asm.R2, 14+2, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.LoadMem(asm.R5, asm.R2, 14+20+12, asm.Byte),
		asm.RSh.Imm(asm.R5, 4),
		asm.LSh.Imm(asm.R5, 2),
		asm.Add.Imm(asm.R5, 20),
		asm.JGT.Reg(asm.R5, asm.R4, "fast"),
		asm.Sub.Reg(asm.R4, asm.R5),
		asm.JLT.Imm(asm.R4, minPayload, "fast"),
		asm.LoadMem(asm.R4, asm.R2, 14+20, asm.Half),
		asm.JEq.Imm(asm.R4, be16(port), "match"),
		asm.LoadMem(asm.R4, asm.R2, 14+20+2, asm.Half),
		asm.JNE.Imm(asm.R4, be16(port), "fast"),
		asm.FnGetPrandomU32.Call().WithSymbol("match"),
		asm.Mov.Imm(asm.R7, htbFast),
		asm.Mov.Imm(asm.R8, 0),
		asm.LoadImm(asm.R9, int64(threshold), asm.DWord),
		asm.JGE.Reg(asm.R0, asm.R9, "count"),
		asm.Mov.Imm(asm.R7, htbSlow),
		asm.Mov.Imm(asm.R8, 1),
		asm.StoreMem(asm.RFP, -4, asm.R8, asm.Word).WithSymbol("count"),
		asm.LoadMapPtr(asm.R1, countsFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "set"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.StoreMem(asm.R6, skbTCClassid, asm.R7, asm.Word).WithSymbol("set"),
		asm.Mov.Imm(asm.R0, tcActOK),
		asm.Return(),
		asm.Mov.Imm(asm.R7, htbFast).WithSymbol("fast"),
		asm.StoreMem(asm.R6, skbTCClassid, asm.R7, asm.Word),
		asm.Mov.Imm(asm.R0, tcActOK),
		asm.Return(),
	}
}

// newReorderLink puts an HTB qdisc on h's veth (its egress) with a fast
// class and a slow one (slowRate bits/s), and reorderInstructions'
// program to pick the class: share of the data segments to or from port
// wait in the slow class while later ones pass. It returns the
// candidates sent on and held back so far; t's cleanup removes it.
func newReorderLink(t *testing.T, h *netnstest.Host, port uint16, share float64, slowRate uint64) func() (passed, held uint64) {
	t.Helper()
	counts, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xdpio_reorder", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { counts.Close() })
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xdpio_reorder", Type: ebpf.SchedCLS, License: "Dual MIT/GPL",
		Instructions: reorderInstructions(counts.FD(), port, uint32(share*(1<<32)), 1000)})
	if err != nil {
		t.Fatalf("reorder link: load program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	nh, err := h.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nh.Close)
	htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: h.Ifindex, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	htb.Defcls = 1
	if err := nh.QdiscAdd(htb); err != nil {
		t.Fatalf("reorder link: htb qdisc on %s: %v", h.Link, err)
	}
	t.Cleanup(func() {
		if err := nh.QdiscDel(htb); err != nil && !errors.Is(err, unix.ENODEV) {
			t.Errorf("reorder link: remove the htb qdisc of %s: %v", h.Link, err)
		}
	})
	for _, c := range []struct {
		minor uint16
		rate  uint64
	}{{htbFast, 10e9}, {htbSlow, slowRate}} {
		class := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: h.Ifindex, Parent: netlink.MakeHandle(1, 0), Handle: netlink.MakeHandle(1, c.minor)},
			netlink.HtbClassAttrs{Rate: c.rate, Ceil: c.rate})
		if err := nh.ClassAdd(class); err != nil {
			t.Fatalf("reorder link: htb class 1:%d: %v", c.minor, err)
		}
	}
	filter := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: h.Ifindex, Parent: netlink.MakeHandle(1, 0),
		Handle: netlink.MakeHandle(0, 1), Protocol: unix.ETH_P_ALL, Priority: 1}, Fd: prog.FD(), Name: "xdpio_reorder", DirectAction: true,
		ClassId: netlink.MakeHandle(1, 0)}
	if err := nh.FilterAdd(filter); err != nil {
		t.Fatalf("reorder link: bpf filter on %s: %v", h.Link, err)
	}
	return func() (passed, held uint64) {
		var sums [2]uint64
		for i := range sums {
			var per []uint64
			if err := counts.Lookup(uint32(i), &per); err != nil {
				t.Fatalf("reorder link: read counters: %v", err)
			}
			for _, v := range per {
				sums[i] += v
			}
		}
		return sums[0], sums[1]
	}
}

// TestBenchTCPReordered: iperf3 -s sends (at 100 Mbit/s) to `xdpio bench
// client -R` on netstack through a link that holds 2% of its segments
// back in a slow HTB class, while the others pass them (a tc BPF
// classifier picks them: this kernel has no netem, fq or etf to delay a
// packet): netstack receives them out of order and still counts every
// byte the server sent. The
// oracle of the reordering is iperf3's kernel: netstack's SACKs put it in
// recovery, and it found segments it had taken for lost arrived late
// (TcpExtTCPTSReorder, TCPSACKReorder).
func TestBenchTCPReordered(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One segment a packet, so that what is held back is one segment
	// (the kernel's TCP builds GSO packets whatever the device's
	// features; their size it bounds by the device's gso_max_size).
	runIn(t, pair.B, "ip", "link", "set", "dev", pair.B.Link, "gso_max_size", "1500")
	const port = 15541
	srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", strconv.Itoa(port))
	var srvOut syncBuffer
	srv.Stdout = &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	waitListening(ctx, t, pair.B, port)
	counts := newReorderLink(t, pair.B, port, 0.02, 20e6)
	before, err := pair.B.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := runWith(ctx, &globals{stdout: &out, stderr: &errOut}, []string{"bench", "client", "--netns", pair.A.NS, "-i", pair.A.Link,
		"-c", pair.B.IPv4.String(), "--port", strconv.Itoa(port), "-t", "2", "-b", "100M", "-R", "--json"}); err != nil {
		t.Fatalf("bench client: %v\n%s%s", err, out.String(), errOut.String())
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("iperf3 -s: %v\n%s", err, srvOut.String())
	}
	after, err := pair.B.Counters()
	if err != nil {
		t.Fatal(err)
	}
	passed, held := counts()
	o, th := parseTCPReport(t, "xdpio", out.Bytes()), parseTCPReport(t, "iperf3 -s", []byte(srvOut.String()))
	d := func(k string) int64 { return after[k] - before[k] }
	var moved []string
	for k := range after {
		if strings.HasPrefix(k, "TcpExt") && d(k) != 0 && (strings.Contains(k, "Reorder") || strings.Contains(k, "Sack") || strings.Contains(k, "Undo")) {
			moved = append(moved, fmt.Sprintf("%s +%d", k, d(k)))
		}
	}
	t.Logf("link sent on %d packets, held back %d; iperf3 -s sent %d bytes, xdpio received %d; iperf3's kernel: %v", passed, held, th.End.SumSent.Bytes, o.End.SumReceived.Bytes, moved)
	if held == 0 || passed == 0 {
		t.Errorf("the link held back %d of %d packets: nothing to reorder", held, passed+held)
	}
	if th.End.SumSent.Bytes == 0 || o.End.SumReceived.Bytes != th.End.SumSent.Bytes {
		t.Errorf("iperf3 -s sent %d bytes, xdpio received %d", th.End.SumSent.Bytes, o.End.SumReceived.Bytes)
	}
	// netstack told of the holes (SACK), and the sender found the
	// segments it had taken for lost arrived late.
	if reorder := d("TcpExtTCPSACKReorder") + d("TcpExtTCPTSReorder") + d("TcpExtTCPRenoReorder"); reorder == 0 || d("TcpExtTCPSackRecovery") == 0 {
		if cls, err := pair.B.Command(ctx, "tc", "-s", "class", "show", "dev", pair.B.Link).CombinedOutput(); err == nil {
			t.Logf("classes:\n%s", cls)
		}
		t.Errorf("iperf3's kernel saw no reordering (%v)", moved)
	}
}
