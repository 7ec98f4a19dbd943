//go:build linux

package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// The sending end of examples/README.md's veth pair, whose counters the
// checks read: what veth could not hand over (TX dropped), what came back
// (RX packets).
const (
	senderNS   = "xa"
	senderLink = "veth-a"
)

// Ready lines on examples/README.md's pair: two queues, veth (copy mode,
// native XDP).
const (
	txonlyReady  = "ready: veth-a, queues 0-1, copy mode, no XDP program; sending 64-byte frames through the runner"
	rxdropReady  = "ready: veth-b, queues 0-1, copy mode, driver attach; dropping through the runner"
	l2fwdReady   = "ready: veth-b, queues 0-1, copy mode, driver attach; forwarding with the MAC addresses swapped"
	udpechoReady = "ready: veth-b, queues 0-1, copy mode, driver attach; echoing UDP to [::]:7"
	tcpechoReady = "ready: veth-b, queues 0-1, copy mode, driver attach; echoing TCP on 198.18.0.3 port 7"
)

// recipeCheck checks what a recipe printed, with the sender's interface
// counters before and after it ran, and returns its counts for the log.
type recipeCheck func(t *testing.T, out string, before, after linkCounts) string

// examples/README.md's recipes, run as written from the repository's root
// as its text says: the setup block once (namespaces, veth pair, go build
// -o . ./examples/...), each program's recipe five times, the cleanup
// block at the end. Every frame txonly sent is accounted for by the
// receiving program's own account, and udpecho echoes the one datagram.
func TestExamplesRecipes(t *testing.T) {
	netnstest.RequirePriv(t)
	netnstest.RequireTool(t, "ip")
	root := moduleRoot(t)
	blocks := codeBlocks(readFile(t, filepath.Join(root, "examples", "README.md")), "sh")
	setup, cleanup := blockWith(t, blocks, "ip netns add"), blockWith(t, blocks, "ip netns del")
	checks := map[string]recipeCheck{"./rxdrop": checkRxdrop, "./l2fwd": checkL2fwd, "./udpecho": checkUdpecho, "./tcpecho": checkTcpecho}
	type recipe struct {
		name, script string
		check        recipeCheck
	}
	var recipes []recipe
	for _, b := range blocks {
		if b == setup || b == cleanup {
			continue
		}
		r := recipe{script: b}
		for prog, c := range checks {
			if strings.Contains(b, "ip netns exec xb "+prog+" ") {
				r.name, r.check = prog[2:], c
			}
		}
		if r.check == nil {
			t.Fatalf("examples/README.md has a recipe this test does not check; add its check:\n%s", b)
		}
		recipes = append(recipes, r)
	}
	if len(recipes) != len(checks) {
		t.Fatalf("examples/README.md has %d recipes, want one for each of %d programs", len(recipes), len(checks))
	}

	names := netnsOf(setup)
	claimNetns(t, names)
	// The recipes leave the programs and their output at the root, as
	// they do for a reader: remove what was not there before.
	leftovers := []string{"rxdrop", "txonly", "l2fwd", "udpecho", "tcpecho"}
	for _, m := range regexp.MustCompile(`> (\S+\.out)`).FindAllStringSubmatch(strings.Join(blocks, ""), -1) {
		leftovers = append(leftovers, m[1])
	}
	for _, f := range leftovers {
		p := filepath.Join(root, f)
		if _, err := os.Stat(p); err == nil {
			continue // the reader's own
		}
		t.Cleanup(func() { os.Remove(p) })
	}

	runRecipe(t, root, setup, 5*time.Minute)
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			for i := range runs {
				before := linkStats(t, senderNS, senderLink)
				out, stderr := runRecipe(t, root, r.script, 2*time.Minute)
				after := linkStats(t, senderNS, senderLink)
				if stderr != "" {
					t.Logf("run %d, stderr:\n%s", i+1, stderr)
				}
				counts := r.check(t, out, before, after)
				t.Logf("run %d: %s", i+1, counts)
				if t.Failed() {
					t.Fatalf("run %d printed:\n%s", i+1, out)
				}
			}
		})
	}
	runRecipe(t, root, cleanup, time.Minute)
	requireNoNetns(t, names, "the cleanup block must delete them")
}

// lines returns the lines of out that start with prefix.
func lines(out, prefix string) []string {
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			found = append(found, l)
		}
	}
	return found
}

// numbers returns the submatches of re's only match in out as numbers,
// failing t if there is not exactly one.
func numbers(t *testing.T, out string, re *regexp.Regexp) []uint64 {
	t.Helper()
	ms := re.FindAllStringSubmatch(out, -1)
	if len(ms) != 1 {
		t.Errorf("%d lines match %s, want 1", len(ms), re)
		return make([]uint64, re.NumSubexp())
	}
	var n []uint64
	for _, s := range ms[0][1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Errorf("%q in %q: %v", s, ms[0][0], err)
		}
		n = append(n, v)
	}
	return n
}

// checkReady checks that out has exactly the ready lines want, in any
// order.
func checkReady(t *testing.T, out string, want ...string) {
	t.Helper()
	got := lines(out, "ready: ")
	if len(got) != len(want) {
		t.Errorf("ready lines %q, want %q", got, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(out, "\n"+w+"\n") && !strings.HasPrefix(out, w+"\n") {
			t.Errorf("ready lines %q, want %q among them", got, w)
		}
	}
}

// checkSeconds checks the per-second lines of what ("received", "sent",
// "forwarded"): one for each second, in order (rxdrop once printed two
// "14.0s" lines).
func checkSeconds(t *testing.T, out, what string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^ *(\d+)\.\ds .* pkts/s ` + what + `$`)
	prev := 0
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		s, _ := strconv.Atoi(m[1])
		if s <= prev {
			t.Errorf("a line of second %d after one of second %d (%s)", s, prev, what)
		}
		prev = s
	}
}

var (
	txonlySubmittedRE = regexp.MustCompile(`(?m)^submitted (\d+) frames: (\d+) sent \(completed by the kernel\), (\d+) not completed$`)
	rxdropAccountRE   = regexp.MustCompile(`(?m)^account: (\d+) frames reached the sockets = (\d+) received \+ (\d+) rx_dropped \+ (\d+) rx_ring_full$`)
	l2fwdAccountRE    = regexp.MustCompile(`(?m)^account: (\d+) frames reached the sockets = (\d+) forwarded \+ (\d+) not completed \+ (\d+) not sent \+ (\d+) rx_dropped \+ (\d+) rx_ring_full$`)
)

// txonlySent checks txonly's part of out and returns how many frames it
// sent (the kernel completed them).
func txonlySent(t *testing.T, out string) uint64 {
	t.Helper()
	checkSeconds(t, out, "sent")
	n := numbers(t, out, txonlySubmittedRE)
	if n[1] == 0 || n[0] != n[1]+n[2] {
		t.Errorf("txonly: submitted %d = %d sent + %d not completed?", n[0], n[1], n[2])
	}
	return n[1]
}

// rxdrop receives or sees the kernel drop every frame txonly sent that
// veth handed over: it stops after txonly and takes what is left on its
// rings.
func checkRxdrop(t *testing.T, out string, before, after linkCounts) string {
	checkReady(t, out, rxdropReady, txonlyReady)
	sent := txonlySent(t, out)
	checkSeconds(t, out, "received")
	n := numbers(t, out, rxdropAccountRE)
	reached, received, dropped, full := n[0], n[1], n[2], n[3]
	if received+dropped+full != reached {
		t.Errorf("rxdrop's account: %d received + %d rx_dropped + %d rx_ring_full is not %d", received, dropped, full, reached)
	}
	lost := after.TXDropped - before.TXDropped
	if reached+lost != sent {
		t.Errorf("txonly sent %d frames, but %d reached rxdrop's sockets and veth dropped %d: %d", sent, reached, lost, reached+lost)
	}
	if received == 0 {
		t.Error("rxdrop received nothing")
	}
	return "txonly sent " + itoa(sent) + "; rxdrop: " + rxdropAccountRE.FindString(out) + "; veth dropped " + itoa(lost)
}

// l2fwd accounts for every frame txonly sent that veth handed over, and
// what it forwarded comes back to veth-a.
func checkL2fwd(t *testing.T, out string, before, after linkCounts) string {
	checkReady(t, out, l2fwdReady, txonlyReady)
	sent := txonlySent(t, out)
	checkSeconds(t, out, "forwarded")
	n := numbers(t, out, l2fwdAccountRE)
	reached, forwarded := n[0], n[1]
	if n[1]+n[2]+n[3]+n[4]+n[5] != reached {
		t.Errorf("l2fwd's account: %d + %d + %d + %d + %d is not %d", n[1], n[2], n[3], n[4], n[5], reached)
	}
	lost := after.TXDropped - before.TXDropped
	if reached+lost != sent {
		t.Errorf("txonly sent %d frames, but %d reached l2fwd's sockets and veth dropped %d: %d", sent, reached, lost, reached+lost)
	}
	// xa's kernel may also get a few frames of xb's own (IPv6 neighbour
	// discovery).
	if back := after.RXPackets - before.RXPackets; forwarded == 0 || back < forwarded || back > forwarded+20 {
		t.Errorf("l2fwd forwarded %d frames, %s received %d", forwarded, senderLink, back)
	}
	return "txonly sent " + itoa(sent) + "; l2fwd: " + l2fwdAccountRE.FindString(out) + "; veth dropped " + itoa(lost) +
		"; " + senderLink + " received " + itoa(after.RXPackets-before.RXPackets)
}

// udpecho echoes the one datagram, and says so.
func checkUdpecho(t *testing.T, out string, _, _ linkCounts) string {
	checkReady(t, out, udpechoReady)
	if !strings.HasPrefix(out, "hello\n") {
		t.Errorf("the client printed no echo (want hello first)")
	}
	const want = "received 1 datagrams, echoed 1 (6 bytes); dropped 0: "
	got := lines(out, "received ")
	if len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.HasSuffix(got[0], "; the kernel dropped 0 before the sockets") {
		t.Errorf("udpecho printed %q, want %q… and no drop", got, want)
	}
	return strings.Join(got, "")
}

// tcpecho echoes the one line on one connection, and the segments and
// frames it counts add up: every segment received came in a frame (the
// others are ARP), none was dropped, the unfinished checksums were
// accepted.
func checkTcpecho(t *testing.T, out string, _, _ linkCounts) string {
	checkReady(t, out, tcpechoReady)
	if !strings.HasPrefix(out, "hello\n") {
		t.Errorf("the client printed no echo (want hello first)")
	}
	n := numbers(t, out, regexp.MustCompile(`(?m)^echoed (\d+) bytes on (\d+) connections; TCP: (\d+) segments in, (\d+) out, (\d+) retransmitted, (\d+) resets sent$`))
	if n[0] != 6 || n[1] != 1 || n[2] == 0 || n[3] == 0 {
		t.Errorf("tcpecho counted %v, want 6 bytes on 1 connection, segments both ways", n)
	}
	f := numbers(t, out, regexp.MustCompile(`(?m)^frames: (\d+) received \((\d+) packets after GRO\), (\d+) sent \((\d+) segments cut by TSO\); dropped 0 bad checksums, none unfinished \((\d+) accepted\), 0 malformed, 0 not for us, 0 not sent; the kernel dropped 0 before the sockets$`))
	// The kernel leaves a connection's segments to the offload; the replies
	// it makes without one (the last ACK from TIME-WAIT) it sums itself.
	// A packet GRO merged is one segment to the stack.
	if f[1] > f[0] || f[1] < n[2] || f[2] < n[3] || f[4] == 0 || f[4] > n[2] {
		t.Errorf("frames %v for segments %v: want a frame for every segment, unfinished checksums accepted", f, n)
	}
	return strings.Join(append(lines(out, "echoed "), lines(out, "frames: ")...), "; ")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
