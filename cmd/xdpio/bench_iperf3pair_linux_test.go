package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// pairRun is one UDP test between namespaces A (client) and B (server)
// in which xdpio bench plays one end and a real iperf3 the other, or
// iperf3 both (a reference run).
type pairRun struct {
	// Ours is the end xdpio plays: "client", "server", or "" for
	// iperf3 at both ends.
	Ours string
	// Backend is xdpio's --backend: socket or xsk (with -i, the veth of
	// its namespace).
	Backend string
	// JSON runs xdpio with --json.
	JSON bool
	// Args are the test's, as both iperf3 -c and xdpio bench client take
	// them (-u -P 2 -t 2 -b 20M …).
	Args []string
	// Loss, when above 0, drops that share of the test's datagrams on
	// iperf3's veth (lossyLink): at its egress when it sends, at its
	// ingress when it receives, so that the drop is before any AF_XDP
	// socket of xdpio's.
	Loss float64
}

// pairResult is what a pairRun printed and what the kernel counted.
type pairResult struct {
	// Ours is what xdpio printed; Theirs is iperf3's -J output (the
	// client's in a reference run), TheirServer the iperf3 server's in a
	// reference run.
	Ours                string
	Theirs, TheirServer []byte
	// Passed and Dropped are the test's datagrams (not the 4-byte stream
	// setups) the lossy link let through and dropped.
	Passed, Dropped uint64
	// Overflow is the datagrams the receiving namespace's kernel
	// refused for a full socket buffer (Udp RcvbufErrors) during the run.
	Overflow int64
	// VethDrops is the packets the veth pair dropped on the way during
	// the run: the sending end's tx_dropped and the receiving end's
	// rx_dropped (a full backlog or NAPI ring on a stalled machine).
	VethDrops int64
}

// vethDrops is the packets h's veth dropped so far, as it sends (tx) or
// receives.
func vethDrops(t *testing.T, h *netnstest.Host, tx bool) int64 {
	t.Helper()
	a, err := h.Attrs()
	if err != nil {
		t.Fatal(err)
	}
	if a.Statistics == nil {
		t.Fatalf("%s in %s: no statistics", h.Link, h.NS)
	}
	if tx {
		return int64(a.Statistics.TxDropped)
	}
	return int64(a.Statistics.RxDropped)
}

// reverse reports whether r's test runs with -R: the server sends.
func (r pairRun) reverse() bool {
	for _, a := range r.Args {
		if a == "-R" {
			return true
		}
	}
	return false
}

// iperf3Sends reports whether the iperf3 end of r sends the datagrams.
func (r pairRun) iperf3Sends() bool { return (r.Ours == "server") != r.reverse() }

// run runs r on port: the server first, in B, then the client in A, each
// bounded by ctx; it fails t on any error of either.
func (r pairRun) run(ctx context.Context, t *testing.T, pair *netnstest.Pair, port int) pairResult {
	t.Helper()
	ps := strconv.Itoa(port)
	var res pairResult
	var lossy *lossyLink
	if r.Loss > 0 {
		h := pair.B // iperf3 is the server
		if r.Ours == "server" {
			h = pair.A
		}
		lossy = newLossyLink(t, h, r.iperf3Sends(), uint16(port), r.Loss)
	}
	recvHost := pair.B
	if r.reverse() {
		recvHost = pair.A
	}
	sendHost := pair.Peer(recvHost)
	overflow0 := netnstest.Counter(t, recvHost, "UdpRcvbufErrors")
	veth0 := vethDrops(t, sendHost, true) + vethDrops(t, recvHost, false)
	ours := func(side string, h *netnstest.Host) []string {
		a := []string{"bench", side, "--netns", h.NS, "--port", ps, "--backend", r.Backend}
		if r.Backend == "xsk" {
			a = append(a, "-i", h.Link)
		}
		if r.JSON {
			a = append(a, "--json")
		}
		return a
	}

	var srvOut syncBuffer
	var srvDone chan error
	if r.Ours == "server" {
		srvDone = make(chan error, 1)
		go func() {
			srvDone <- runWith(ctx, &globals{stdout: &srvOut, stderr: &srvOut}, append(ours("server", pair.B), "-1"))
		}()
	} else {
		srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", ps)
		srv.Stdout = &srvOut
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		srvDone = make(chan error, 1)
		go func() { srvDone <- srv.Wait() }()
	}
	waitListening(ctx, t, pair.B, port)

	if r.Ours == "client" {
		var out, errOut bytes.Buffer
		args := append(append(ours("client", pair.A), "-c", pair.B.IPv4.String()), r.Args...)
		if err := runWith(ctx, &globals{stdout: &out, stderr: &errOut}, args); err != nil {
			t.Fatalf("xdpio %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		res.Ours = out.String()
	} else {
		args := append([]string{"-c", pair.B.IPv4.String(), "-p", ps, "-J"}, r.Args...)
		out, err := pair.A.Command(ctx, "iperf3", args...).Output()
		if err != nil {
			t.Fatalf("iperf3 %s: %v\n%s\nserver:\n%s", strings.Join(args, " "), err, out, srvOut.String())
		}
		res.Theirs = out
	}
	if err := <-srvDone; err != nil {
		t.Fatalf("server (%s): %v\n%s", map[bool]string{true: "xdpio", false: "iperf3"}[r.Ours == "server"], err, srvOut.String())
	}
	switch r.Ours {
	case "server":
		res.Ours = srvOut.String()
	case "client":
		res.Theirs = []byte(srvOut.String())
	default:
		res.TheirServer = []byte(srvOut.String())
	}
	if lossy != nil {
		res.Passed, res.Dropped = lossy.counts(t)
	}
	res.Overflow = netnstest.Counter(t, recvHost, "UdpRcvbufErrors") - overflow0
	res.VethDrops = vethDrops(t, sendHost, true) + vethDrops(t, recvHost, false) - veth0
	return res
}

// lossyLink drops a share of a test's UDP datagrams on one veth end, in
// one direction, and counts what it passed and dropped: a tc BPF program
// (cls_bpf, direct action, on a clsact qdisc) that draws a random number
// per datagram. It stands in for netem, which this kernel does not have
// (CONFIG_NET_SCH_NETEM is off, and so are tc's gact and flower): the
// loss is the kernel's, on the link, as netem's would be. Only IPv4 UDP
// datagrams to or from the test's port with more than 4 bytes of payload
// are candidates: the stream setup messages and the control connection
// always pass.
//
// At egress a dropped datagram is stolen (TC_ACT_STOLEN): the sender's
// send succeeds, as over a lossy wire (TC_ACT_SHOT would fail it with
// ENOBUFS, and a sender may retry). At ingress it is dropped
// (TC_ACT_SHOT). An AF_XDP socket's frames bypass both hooks (copy-mode
// transmit skips the qdisc layer, XDP runs before tc ingress): put the
// link on a kernel socket's end.
type lossyLink struct {
	counts func(t *testing.T) (passed, dropped uint64)
}

// tc verdicts and struct __sk_buff offsets.
const (
	tcActOK      = 0
	tcActShot    = 2
	tcActStolen  = 4
	skbData      = 76
	skbDataEnd   = 80
	lossFilterID = 1
)

// lossInstructions is the program:
//
//	if not IPv4 (no options) UDP with src or dst port == port and a
//	payload over 4 bytes: return TC_ACT_OK
//	i = prandom() < threshold ? 1 : 0   // 1: drop
//	counts[i]++ (per CPU)
//	return i ? drop : TC_ACT_OK
func lossInstructions(countsFD int, port uint16, threshold uint32, drop int32) asm.Instructions {
	be16 := func(v uint16) int32 { return int32(binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v))) }
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 14+20+8),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 12, asm.Half), // EtherType
		asm.JNE.Imm(asm.R4, be16(unix.ETH_P_IP), "pass"),
		asm.LoadMem(asm.R4, asm.R2, 14, asm.Byte), // version and IHL
		asm.JNE.Imm(asm.R4, 0x45, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 14+9, asm.Byte), // protocol
		asm.JNE.Imm(asm.R4, unix.IPPROTO_UDP, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 14+20+4, asm.Half), // UDP length
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.JLE.Imm(asm.R4, 8+4, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 14+20, asm.Half), // source port
		asm.JEq.Imm(asm.R4, be16(port), "match"),
		asm.LoadMem(asm.R4, asm.R2, 14+20+2, asm.Half), // destination port
		asm.JNE.Imm(asm.R4, be16(port), "pass"),
		asm.FnGetPrandomU32.Call().WithSymbol("match"),
		asm.Mov.Imm(asm.R6, 0),
		asm.LoadImm(asm.R7, int64(threshold), asm.DWord),
		asm.JGE.Reg(asm.R0, asm.R7, "count"),
		asm.Mov.Imm(asm.R6, 1),
		asm.StoreMem(asm.RFP, -4, asm.R6, asm.Word).WithSymbol("count"),
		asm.LoadMapPtr(asm.R1, countsFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "verdict"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, tcActOK).WithSymbol("verdict"),
		asm.JEq.Imm(asm.R6, 0, "out"),
		asm.Mov.Imm(asm.R0, drop),
		asm.Return().WithSymbol("out"),
		asm.Mov.Imm(asm.R0, tcActOK).WithSymbol("pass"),
		asm.Return(),
	}
}

// tcpLossInstructions is lossInstructions' program for TCP: the
// candidates are IPv4 TCP segments (no IP options) to or from port with
// at least minPayload bytes of payload (a GSO packet at egress counts
// once).
func tcpLossInstructions(countsFD int, port uint16, threshold uint32, drop int32, minPayload int32) asm.Instructions {
	be16 := func(v uint16) int32 { return int32(binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v))) }
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 14+20+20),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 12, asm.Half), // EtherType
		asm.JNE.Imm(asm.R4, be16(unix.ETH_P_IP), "pass"),
		asm.LoadMem(asm.R4, asm.R2, 14, asm.Byte), // version and IHL
		asm.JNE.Imm(asm.R4, 0x45, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 14+9, asm.Byte), // protocol
		asm.JNE.Imm(asm.R4, unix.IPPROTO_TCP, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 14+2, asm.Half), // IP total length
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.LoadMem(asm.R5, asm.R2, 14+20+12, asm.Byte), // data offset
		asm.RSh.Imm(asm.R5, 4),
		asm.LSh.Imm(asm.R5, 2),
		asm.Add.Imm(asm.R5, 20),
		asm.JGT.Reg(asm.R5, asm.R4, "pass"),
		asm.Sub.Reg(asm.R4, asm.R5), // payload
		asm.JLT.Imm(asm.R4, minPayload, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 14+20, asm.Half), // source port
		asm.JEq.Imm(asm.R4, be16(port), "match"),
		asm.LoadMem(asm.R4, asm.R2, 14+20+2, asm.Half), // destination port
		asm.JNE.Imm(asm.R4, be16(port), "pass"),
	}
	// The rest, from the random draw on, is the UDP program's.
	udp := lossInstructions(countsFD, port, threshold, drop)
	for i, ins := range udp {
		if ins.Symbol() == "match" {
			return append(insns, udp[i:]...)
		}
	}
	panic("lossInstructions has no match label")
}

// newLossyLink puts a lossyLink on h's veth, at its egress or ingress,
// dropping share (0-1) of the datagrams to or from port; t's cleanup
// removes it.
func newLossyLink(t *testing.T, h *netnstest.Host, egress bool, port uint16, share float64) *lossyLink {
	t.Helper()
	return loadLossyLink(t, h, egress, share, func(fd int, threshold uint32, drop int32) asm.Instructions {
		return lossInstructions(fd, port, threshold, drop)
	})
}

// newLossyTCPLink puts a lossyLink on h's veth, at its egress or
// ingress, dropping share (0-1) of the TCP segments to or from port with
// at least minPayload bytes of payload (tcpLossInstructions); t's cleanup
// removes it.
func newLossyTCPLink(t *testing.T, h *netnstest.Host, egress bool, port uint16, share float64, minPayload int32) *lossyLink {
	t.Helper()
	return loadLossyLink(t, h, egress, share, func(fd int, threshold uint32, drop int32) asm.Instructions {
		return tcpLossInstructions(fd, port, threshold, drop, minPayload)
	})
}

// loadLossyLink puts the lossy program prog builds on h's veth.
func loadLossyLink(t *testing.T, h *netnstest.Host, egress bool, share float64, build func(countsFD int, threshold uint32, drop int32) asm.Instructions) *lossyLink {
	t.Helper()
	if share <= 0 || share >= 1 {
		t.Fatalf("loss share %v: want 0 < share < 1", share)
	}
	counts, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xdpio_loss", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 2})
	if err != nil {
		t.Fatalf("lossy link: counter map: %v", err)
	}
	t.Cleanup(func() { counts.Close() })
	drop := int32(tcActShot)
	if egress {
		drop = tcActStolen
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xdpio_loss", Type: ebpf.SchedCLS, License: "Dual MIT/GPL",
		Instructions: build(counts.FD(), uint32(share*(1<<32)), drop)})
	if err != nil {
		t.Fatalf("lossy link: load program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	nh, err := h.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nh.Close)
	qdisc := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: h.Ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := nh.QdiscAdd(qdisc); err != nil {
		t.Fatalf("lossy link: clsact qdisc on %s in %s: %v", h.Link, h.NS, err)
	}
	t.Cleanup(func() {
		if err := nh.QdiscDel(qdisc); err != nil && !errors.Is(err, unix.ENODEV) {
			t.Errorf("lossy link: remove the clsact qdisc of %s: %v", h.Link, err)
		}
	})
	parent := uint32(netlink.HANDLE_MIN_INGRESS)
	if egress {
		parent = netlink.HANDLE_MIN_EGRESS
	}
	filter := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: h.Ifindex, Parent: parent,
		Handle: netlink.MakeHandle(0, lossFilterID), Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd: prog.FD(), Name: "xdpio_loss", DirectAction: true}
	if err := nh.FilterAdd(filter); err != nil {
		t.Fatalf("lossy link: bpf filter on %s in %s: %v", h.Link, h.NS, err)
	}
	return &lossyLink{counts: func(t *testing.T) (passed, dropped uint64) {
		t.Helper()
		var sums [2]uint64
		for i := range sums {
			var per []uint64
			if err := counts.Lookup(uint32(i), &per); err != nil {
				t.Fatalf("lossy link: read counters: %v", err)
			}
			for _, v := range per {
				sums[i] += v
			}
		}
		return sums[0], sums[1]
	}}
}

// TestLossyLink checks the lossy link against iperf3 at both ends: the
// receiving iperf3 -s counts as received exactly what the link passed
// (less what overflowed its socket buffer) and as lost about the share
// it was told to drop; the sender sees no error.
func TestLossyLink(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, egress := range []bool{true, false} {
		t.Run(fmt.Sprintf("egress=%v", egress), func(t *testing.T) {
			port := 15471 + i
			srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", strconv.Itoa(port))
			var srvOut syncBuffer
			srv.Stdout = &srvOut
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			waitListening(ctx, t, pair.B, port)
			h := pair.B
			if egress {
				h = pair.A
			}
			l := newLossyLink(t, h, egress, uint16(port), 0.6)
			over0 := netnstest.Counter(t, pair.B, "UdpRcvbufErrors") + vethDrops(t, pair.A, true) + vethDrops(t, pair.B, false)
			if out, err := pair.A.Command(ctx, "iperf3", "-c", pair.B.IPv4.String(), "-p", strconv.Itoa(port), "-u", "-b", "10M", "-l", "1000", "-t", "1").CombinedOutput(); err != nil {
				t.Fatalf("iperf3 -c: %v\n%s", err, out)
			}
			if err := srv.Wait(); err != nil {
				t.Fatalf("iperf3 -s: %v", err)
			}
			// What the kernel dropped after the link: a full socket
			// buffer, veth's queues.
			over := netnstest.Counter(t, pair.B, "UdpRcvbufErrors") + vethDrops(t, pair.A, true) + vethDrops(t, pair.B, false) - over0
			var j iperf3Report
			if err := json.Unmarshal([]byte(srvOut.String()), &j); err != nil {
				t.Fatalf("iperf3 -s -J: %v\n%s", err, srvOut.String())
			}
			passed, dropped := l.counts(t)
			r := j.End.SumReceived
			t.Logf("link passed %d, dropped %d; iperf3 -s: %d of %d lost, %d received; the kernel dropped %d after the link", passed, dropped, r.LostPackets, r.Packets, r.Packets-r.LostPackets, over)
			if int64(passed)-over != r.Packets-r.LostPackets {
				t.Errorf("iperf3 -s received %d datagrams, the link passed %d (and the kernel dropped %d after it)", r.Packets-r.LostPackets, passed, over)
			}
			if share := float64(dropped) / float64(passed+dropped); passed+dropped < 1000 || share < 0.55 || share > 0.65 {
				t.Errorf("the link dropped %d of %d datagrams, want about 60%%", dropped, passed+dropped)
			}
		})
	}
}

// iperf3Report is what the tests read of an iperf3 -J report, or of
// xdpio's --json (the same names, and received_packets).
type iperf3Report struct {
	Error string `json:"error"`
	End   struct {
		Streams []struct {
			UDP      udpFigures  `json:"udp"`
			Receiver *udpFigures `json:"receiver"`
		} `json:"streams"`
		Sum         udpFigures `json:"sum"`
		SumSent     udpFigures `json:"sum_sent"`
		SumReceived udpFigures `json:"sum_received"`
		RXQueues    []struct {
			Dropped uint64 `json:"dropped"`
		} `json:"rx_queues"`
	} `json:"end"`
	Intervals []struct {
		Streams []udpFigures `json:"streams"`
		Sum     udpFigures   `json:"sum"`
	} `json:"intervals"`
}

// udpFigures is one of a report's UDP entries.
type udpFigures struct {
	Start           float64 `json:"start"`
	End             float64 `json:"end"`
	Seconds         float64 `json:"seconds"`
	Bytes           uint64  `json:"bytes"`
	Packets         int64   `json:"packets"`
	LostPackets     int64   `json:"lost_packets"`
	ReceivedPackets *int64  `json:"received_packets"`
	Sender          bool    `json:"sender"`
}

func parseReport(t *testing.T, who string, b []byte) iperf3Report {
	t.Helper()
	var j iperf3Report
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("%s's JSON: %v\n%s", who, err, b)
	}
	if j.Error != "" {
		t.Fatalf("%s reports an error: %s", who, j.Error)
	}
	return j
}
