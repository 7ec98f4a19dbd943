package nexthop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/sys/unix"
)

// The tests use two namespaces A and B from netnstest, joined by a veth
// pair: A 198.18.0.1/24 2001:db8::1/64, B 198.18.0.2/24 2001:db8::2/64,
// with PERMANENT neighbour entries for each other. A Resolver runs in A
// on veth-a. The kernel is the oracle: `ip route get` and `ip neigh` in A.
// Everything a test creates lives in its two namespaces, which netnstest
// removes at cleanup.

func setup(t *testing.T, opts Options) (*netnstest.Pair, *Resolver) {
	t.Helper()
	p := netnstest.New(t, netnstest.Config{Queues: 1})
	// A fresh namespace is busy for a second or two: IPv6 link-local
	// addresses come, pass DAD, and each address or route event rightly
	// drops every cached hop. Let it settle, so that Lookup after Resolve
	// hits.
	linkLocal(t, p.A)
	linkLocal(t, p.B)
	return p, newResolver(t, p.A, p.A.Ifindex, opts)
}

func newResolver(t testing.TB, h *netnstest.Host, ifindex int, opts Options) *Resolver {
	t.Helper()
	var r *Resolver
	if err := h.Do(func() (err error) {
		r, err = New(ifindex, opts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// run runs a command in h's namespace and returns its output.
func run(t testing.TB, h *netnstest.Host, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), h.NS, err, out)
	}
	return string(out)
}

func ipcmd(t testing.TB, h *netnstest.Host, args ...string) string {
	t.Helper()
	return run(t, h, "ip", args...)
}

func resolve(t testing.TB, r *Resolver, dst string) Hop {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hop, err := r.Resolve(ctx, netip.MustParseAddr(dst))
	if err != nil {
		t.Fatalf("Resolve(%s): %v", dst, err)
	}
	return hop
}

func resolveErr(t testing.TB, r *Resolver, dst string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hop, err := r.Resolve(ctx, netip.MustParseAddr(dst))
	if err == nil {
		t.Fatalf("Resolve(%s) = %v, want an error", dst, hop)
	}
	return err
}

// kernelRoute is `ip -j route get dst` in h.
type kernelRoute struct {
	Dst     string `json:"dst"`
	Gateway string `json:"gateway"`
	Via     struct {
		Family string `json:"family"`
		Host   string `json:"host"`
	} `json:"via"`
	Dev     string `json:"dev"`
	Prefsrc string `json:"prefsrc"`
}

func routeGet(t testing.TB, h *netnstest.Host, dst string) kernelRoute {
	t.Helper()
	var rs []kernelRoute
	out := ipcmd(t, h, "-j", "route", "get", dst)
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 1 {
		t.Fatalf("ip -j route get %s: %q: %v", dst, out, err)
	}
	return rs[0]
}

// checkAgainstKernel compares hop with `ip route get`.
func checkAgainstKernel(t testing.TB, h *netnstest.Host, hop Hop) {
	t.Helper()
	kr := routeGet(t, h, hop.Dst.String())
	via := hop.Dst.String()
	if kr.Gateway != "" {
		via = kr.Gateway
	} else if kr.Via.Host != "" {
		via = kr.Via.Host
	}
	if hop.Via.String() != via || hop.Src.String() != kr.Prefsrc || kr.Dev != h.Link {
		t.Errorf("hop %v, but ip route get %s says via %s dev %s src %s", hop, hop.Dst, via, kr.Dev, kr.Prefsrc)
	}
}

// neighShow is `ip -j neigh show addr dev link` in h: the MAC and the
// state, "" when there is no entry.
func neighShow(t testing.TB, h *netnstest.Host, addr string) (mac, state string) {
	t.Helper()
	var ns []struct {
		LLAddr string   `json:"lladdr"`
		State  []string `json:"state"`
	}
	out := ipcmd(t, h, "-j", "neigh", "show", addr, "dev", h.Link)
	if err := json.Unmarshal([]byte(out), &ns); err != nil {
		t.Fatalf("ip -j neigh show %s: %q: %v", addr, out, err)
	}
	if len(ns) == 0 {
		return "", ""
	}
	return ns[0].LLAddr, strings.Join(ns[0].State, ",")
}

// udpCounters sums the counters a datagram to h would raise.
func udpCounters(t testing.TB, h *netnstest.Host) int64 {
	t.Helper()
	c, err := h.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, k := range []string{"UdpInDatagrams", "UdpNoPorts", "UdpInErrors", "Udp6InDatagrams", "Udp6NoPorts", "Udp6InErrors", "IcmpOutDestUnreachs", "Icmp6OutDestUnreachs"} {
		v, ok := c[k]
		if !ok {
			t.Fatalf("no counter %s", k)
		}
		n += v
	}
	return n
}

// eventually polls cond every millisecond until it holds or d passes, and
// returns how long it took.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// linkLocal waits until h's IPv6 link-local address has passed duplicate
// address detection (only then does it answer neighbour solicitations)
// and returns it.
func linkLocal(t testing.TB, h *netnstest.Host) netip.Addr {
	t.Helper()
	var ll netip.Addr
	eventually(t, 10*time.Second, h.Link+" link-local address usable", func() bool {
		var links []struct {
			AddrInfo []struct {
				Local     string `json:"local"`
				Scope     string `json:"scope"`
				Tentative bool   `json:"tentative"`
			} `json:"addr_info"`
		}
		out := ipcmd(t, h, "-j", "-6", "addr", "show", "dev", h.Link)
		if err := json.Unmarshal([]byte(out), &links); err != nil {
			t.Fatalf("ip -j -6 addr show: %q: %v", out, err)
		}
		for _, l := range links {
			for _, a := range l.AddrInfo {
				if a.Scope == "link" && !a.Tentative {
					ll = netip.MustParseAddr(a.Local)
					return true
				}
			}
		}
		return false
	})
	return ll
}

func TestOnLinkStatic(t *testing.T) {
	p, r := setup(t, Options{})
	for _, tc := range []struct {
		dst, src netip.Addr
		ask      string
	}{
		{p.B.IPv4, p.A.IPv4, p.B.IPv4.String()},
		{p.B.IPv6, p.A.IPv6, p.B.IPv6.String()},
		{p.B.IPv4, p.A.IPv4, "::ffff:" + p.B.IPv4.String()}, // IPv4-mapped: unmapped
	} {
		hop := resolve(t, r, tc.ask)
		want := Hop{Dst: tc.dst, Via: tc.dst, MAC: p.B.MAC, Src: tc.src, MTU: 1500}
		if hop.String() != want.String() {
			t.Errorf("Resolve(%s) = %v, want %v", tc.ask, hop, want)
		}
		checkAgainstKernel(t, p.A, hop)
		got, ok := r.Lookup(netip.MustParseAddr(tc.ask))
		if !ok || got.String() != want.String() {
			t.Errorf("Lookup(%s) = %v, %v after Resolve", tc.ask, got, ok)
		}
		dst := netip.MustParseAddr(tc.ask)
		if a := testing.AllocsPerRun(1000, func() { r.Lookup(dst) }); a != 0 {
			t.Errorf("Lookup(%s) allocates %v times", tc.ask, a)
		}
		// The static entries are the kernel's answer as they are: the
		// Resolver must not have touched them.
		if mac, state := neighShow(t, p.A, tc.dst.String()); mac != p.B.MAC.String() || state != "PERMANENT" {
			t.Errorf("kernel's entry for %v is now %s %s, want %v PERMANENT", tc.dst, mac, state, p.B.MAC)
		}
	}
	if n := r.stats.triggers.Load(); n != 0 {
		t.Errorf("%d NTF_USE requests for neighbours with static entries", n)
	}
	if _, ok := r.Lookup(netip.MustParseAddr("198.18.0.77")); ok {
		t.Error("Lookup hit an address never resolved")
	}
}

// Without a neighbour entry, Resolve has the kernel resolve it (ARP, ND)
// without sending any datagram.
func TestDynamicResolution(t *testing.T) {
	p, r := setup(t, Options{})
	// The kernel sends neighbour solicitations of its own (not prompted
	// by a packet) only from a link-local address that passed DAD.
	linkLocal(t, p.A)
	for _, dst := range []netip.Addr{p.B.IPv4, p.B.IPv6} {
		t.Run(dst.String(), func(t *testing.T) {
			resolve(t, r, dst.String())
			before := udpCounters(t, p.B)
			ipcmd(t, p.A, "neigh", "del", dst.String(), "dev", p.A.Link)
			// The deletion reaches the cache.
			eventually(t, time.Second, "Lookup misses after the entry was deleted", func() bool {
				_, ok := r.Lookup(dst)
				return !ok
			})
			start := time.Now()
			hop := resolve(t, r, dst.String())
			took := time.Since(start)
			if took > time.Second {
				t.Errorf("resolution took %v", took)
			}
			if !bytes.Equal(hop.MAC, p.B.MAC) || hop.Via != dst {
				t.Errorf("Resolve(%v) = %v, want MAC %v", dst, hop, p.B.MAC)
			}
			mac, state := neighShow(t, p.A, dst.String())
			if mac != p.B.MAC.String() || state != "REACHABLE" {
				t.Errorf("kernel's entry for %v is %q %q, want %v REACHABLE", dst, mac, state, p.B.MAC)
			}
			if after := udpCounters(t, p.B); after != before {
				t.Errorf("B's UDP counters moved by %d: a datagram was sent", after-before)
			}
			if _, ok := r.Lookup(dst); !ok {
				t.Error("Lookup misses after Resolve")
			}
			t.Logf("resolved %v in %v", hop, took)
		})
	}
}

// Concurrent Resolves of one address share one resolution.
func TestConcurrentResolveShared(t *testing.T) {
	p, r := setup(t, Options{})
	ipcmd(t, p.A, "neigh", "del", p.B.IPv4.String(), "dev", p.A.Link)
	eventually(t, time.Second, "deletion seen", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.neigh[p.B.IPv4] == nil
	})
	// Hold the lock so that all callers arrive before the resolution can
	// finish.
	r.mu.Lock()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hop, err := r.Resolve(context.Background(), p.B.IPv4)
			if err == nil && !bytes.Equal(hop.MAC, p.B.MAC) {
				err = fmt.Errorf("got %v", hop)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	r.mu.Unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := r.stats.resolutions.Load(); n != 1 {
		t.Errorf("%d resolutions for 64 concurrent Resolves, want 1", n)
	}
}

func TestGateway(t *testing.T) {
	p, r := setup(t, Options{})
	ll := linkLocal(t, p.B)
	linkLocal(t, p.A)
	ipcmd(t, p.A, "route", "add", "198.19.5.0/24", "via", p.B.IPv4.String())
	ipcmd(t, p.A, "-6", "route", "add", "2001:db8:5::/64", "via", p.B.IPv6.String())
	ipcmd(t, p.A, "-6", "route", "add", "2001:db8:6::/64", "via", ll.String(), "dev", p.A.Link)
	ipcmd(t, p.A, "route", "add", "198.19.6.0/24", "via", "inet6", ll.String(), "dev", p.A.Link)
	ipcmd(t, p.A, "route", "add", "198.19.7.0/24", "via", p.B.IPv4.String(), "mtu", "1400")
	ipcmd(t, p.A, "-6", "route", "add", "2001:db8:7::/64", "via", p.B.IPv6.String(), "mtu", "1300")
	for _, tc := range []struct {
		dst string
		via netip.Addr
		src netip.Addr
		mtu int
	}{
		{"198.19.5.7", p.B.IPv4, p.A.IPv4, 1500},
		{"2001:db8:5::7", p.B.IPv6, p.A.IPv6, 1500},
		{"2001:db8:6::7", ll, p.A.IPv6, 1500},      // link-local gateway, resolved by ND
		{"198.19.6.7", ll, p.A.IPv4, 1500},         // IPv4 via an IPv6 link-local gateway
		{ll.String(), ll, linkLocal(t, p.A), 1500}, // on-link link-local destination
		{"198.19.7.7", p.B.IPv4, p.A.IPv4, 1400},   // route MTU
		{"2001:db8:7::7", p.B.IPv6, p.A.IPv6, 1300},
	} {
		hop := resolve(t, r, tc.dst)
		if hop.Via != tc.via || !bytes.Equal(hop.MAC, p.B.MAC) || hop.Src != tc.src || hop.MTU != tc.mtu || hop.Dst.String() != tc.dst {
			t.Errorf("Resolve(%s) = %v, want via %v (%v) src %v mtu %d", tc.dst, hop, tc.via, p.B.MAC, tc.src, tc.mtu)
		}
		checkAgainstKernel(t, p.A, hop)
	}
	if mac, state := neighShow(t, p.A, ll.String()); mac != p.B.MAC.String() {
		t.Errorf("kernel's entry for the link-local gateway: %q %q", mac, state)
	}
}

// Broadcast and multicast destinations need no neighbour.
func TestBroadcastMulticast(t *testing.T) {
	p, r := setup(t, Options{})
	for _, tc := range []struct{ dst, mac, src string }{
		{"198.18.0.255", "ff:ff:ff:ff:ff:ff", p.A.IPv4.String()},
		{"255.255.255.255", "ff:ff:ff:ff:ff:ff", p.A.IPv4.String()},
		{"224.0.0.251", "01:00:5e:00:00:fb", p.A.IPv4.String()},
		{"ff02::1:ff00:2", "33:33:ff:00:00:02", ""},
	} {
		hop := resolve(t, r, tc.dst)
		if hop.MAC.String() != tc.mac || hop.Via.String() != tc.dst || tc.src != "" && hop.Src.String() != tc.src || !hop.Src.IsValid() {
			t.Errorf("Resolve(%s) = %v, want MAC %s src %s", tc.dst, hop, tc.mac, tc.src)
		}
		if _, ok := r.Lookup(netip.MustParseAddr(tc.dst)); !ok {
			t.Errorf("Lookup(%s) misses", tc.dst)
		}
	}
}

func TestNoRoute(t *testing.T) {
	p, r := setup(t, Options{})
	for _, dst := range []string{"198.19.200.1", "2001:db8:ffff::1"} {
		err := resolveErr(t, r, dst)
		if !errors.Is(err, unix.ENETUNREACH) || !strings.Contains(err.Error(), dst) {
			t.Errorf("Resolve(%s): %v, want an error naming it and wrapping ENETUNREACH", dst, err)
		}
	}
	ipcmd(t, p.A, "route", "add", "unreachable", "198.19.201.0/24")
	if err := resolveErr(t, r, "198.19.201.1"); !strings.Contains(err.Error(), "198.19.201.1") {
		t.Errorf("Resolve through an unreachable route: %v", err)
	}

	// Another interface in A's namespace (a veth pair whose both ends
	// stay there: the dummy driver may not be built).
	ipcmd(t, p.A, "link", "add", "other0", "type", "veth", "peer", "name", "other1")
	ipcmd(t, p.A, "link", "set", "other0", "up")
	ipcmd(t, p.A, "link", "set", "other1", "up")
	ipcmd(t, p.A, "route", "add", "198.19.9.0/24", "dev", "other0")
	ipcmd(t, p.A, "-6", "route", "add", "2001:db8:9::/64", "dev", "other0")
	for _, dst := range []string{"198.19.9.1", "2001:db8:9::1"} {
		err := resolveErr(t, r, dst)
		if !errors.Is(err, ErrOtherInterface) || !strings.Contains(err.Error(), "other0") || !strings.Contains(err.Error(), dst) {
			t.Errorf("Resolve(%s) through other0: %v", dst, err)
		}
	}
	for _, dst := range []netip.Addr{p.A.IPv4, p.A.IPv6} {
		err := resolveErr(t, r, dst.String())
		if !errors.Is(err, ErrOtherInterface) || !strings.Contains(err.Error(), "address of this host") {
			t.Errorf("Resolve(%v), a local address: %v", dst, err)
		}
	}
}

func TestNotEthernet(t *testing.T) {
	p := netnstest.New(t, netnstest.Config{})
	ipcmd(t, p.A, "link", "add", "noarp0", "type", "veth", "peer", "name", "noarp1")
	ipcmd(t, p.A, "link", "set", "noarp0", "arp", "off")
	for _, name := range []string{"lo", "noarp0"} {
		var idx int
		p.A.Do(func() error {
			l, err := net.InterfaceByName(name)
			if err != nil {
				t.Fatal(err)
			}
			idx = l.Index
			return nil
		})
		var err error
		p.A.Do(func() error {
			var r *Resolver
			if r, err = New(idx, Options{}); err == nil {
				r.Close()
			}
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New(%s): %v, want an error naming it", name, err)
		}
		t.Log(err)
	}
	var err error
	p.A.Do(func() error {
		_, err = New(9999, Options{})
		return nil
	})
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("New(9999): %v, want ENODEV", err)
	}
}

func TestNobodyAnswers(t *testing.T) {
	p, r := setup(t, Options{ResolveTimeout: 500 * time.Millisecond, FailedHold: time.Second})
	ipcmd(t, p.A, "route", "add", "198.19.8.0/24", "via", "198.18.0.251")
	for _, tc := range []struct {
		dst   string
		names []string
		again string // another destination through the same neighbour
	}{
		{"198.18.0.250", []string{"198.18.0.250", "ARP"}, ""},
		{"2001:db8::250", []string{"2001:db8::250", "neighbour discovery"}, ""},
		{"198.19.8.1", []string{"198.19.8.1", "gateway 198.18.0.251"}, "198.19.8.2"},
	} {
		t.Run(tc.dst, func(t *testing.T) {
			start := time.Now()
			err := resolveErr(t, r, tc.dst)
			took := time.Since(start)
			if !errors.Is(err, unix.EHOSTUNREACH) {
				t.Errorf("Resolve(%s): %v, want EHOSTUNREACH", tc.dst, err)
			}
			for _, s := range tc.names {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
			if took < 450*time.Millisecond || took > 1500*time.Millisecond {
				t.Errorf("failed after %v, want about 500ms", took)
			}
			// Remembered: the next Resolve fails at once.
			for _, dst := range []string{tc.dst, tc.again} {
				if dst == "" {
					continue
				}
				start = time.Now()
				err = resolveErr(t, r, dst)
				if took := time.Since(start); took > 50*time.Millisecond || !errors.Is(err, unix.EHOSTUNREACH) {
					t.Errorf("Resolve(%s) within FailedHold: %v after %v, want EHOSTUNREACH at once", dst, err, took)
				}
				if !strings.Contains(err.Error(), dst) {
					t.Errorf("error %q does not name %s", err, dst)
				}
			}
			if _, ok := r.Lookup(netip.MustParseAddr(tc.dst)); ok {
				t.Error("Lookup hits a failed destination")
			}
			t.Log(err)
		})
	}
	// An entry a control plane keeps (externally learned) is not the
	// Resolver's to touch: it waits, without NTF_USE and without spinning.
	ipcmd(t, p.A, "neigh", "add", "198.18.0.240", "dev", p.A.Link, "nud", "failed", "extern_learn")
	trig, gets := r.stats.triggers.Load(), r.stats.gets.Load()
	if err := resolveErr(t, r, "198.18.0.240"); !errors.Is(err, unix.EHOSTUNREACH) {
		t.Errorf("Resolve through an externally learned failed entry: %v", err)
	}
	if n := r.stats.triggers.Load() - trig; n != 0 {
		t.Errorf("%d NTF_USE requests for an externally learned entry", n)
	}
	if n := r.stats.gets.Load() - gets; n > 3 {
		t.Errorf("%d RTM_GETNEIGH in 500ms waiting for an entry managed elsewhere", n)
	}
	if out := ipcmd(t, p.A, "neigh", "show", "198.18.0.240", "dev", p.A.Link); !strings.Contains(out, "extern_learn") {
		t.Errorf("the externally learned entry changed: %s", out)
	}

	// After FailedHold, Resolve tries again.
	time.Sleep(time.Second)
	start := time.Now()
	resolveErr(t, r, "198.18.0.250")
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Errorf("Resolve after FailedHold failed after %v: it did not try again", took)
	}
	// A caller's context ends the wait for that caller only.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err := r.Resolve(ctx, netip.MustParseAddr("198.18.0.249"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 300*time.Millisecond {
		t.Errorf("Resolve with a 100ms context: %v after %v", err, time.Since(start))
	}
}

func TestFollowsChanges(t *testing.T) {
	p, r := setup(t, Options{})
	linkLocal(t, p.A) // for neighbour discovery, below
	ipcmd(t, p.A, "route", "add", "198.19.5.0/24", "via", p.B.IPv4.String())
	for _, dst := range []string{p.B.IPv4.String(), p.B.IPv6.String(), "198.19.5.7"} {
		resolve(t, r, dst)
	}
	dst4, dst6, gw := p.B.IPv4, p.B.IPv6, netip.MustParseAddr("198.19.5.7")

	// A new MAC reaches every hop through the neighbour.
	newMAC, _ := net.ParseMAC("02:00:00:00:be:ef")
	ipcmd(t, p.A, "neigh", "replace", dst4.String(), "dev", p.A.Link, "lladdr", newMAC.String(), "nud", "permanent")
	took := eventually(t, time.Second, "new MAC in Lookup", func() bool {
		h, ok := r.Lookup(dst4)
		return ok && bytes.Equal(h.MAC, newMAC)
	})
	if took > 100*time.Millisecond {
		t.Errorf("the new MAC took %v to reach Lookup", took)
	}
	t.Logf("the new MAC reached Lookup %v after ip neigh replace returned", took)
	if h, ok := r.Lookup(gw); !ok || !bytes.Equal(h.MAC, newMAC) {
		t.Errorf("Lookup(%v) through the changed gateway = %v, %v", gw, h, ok)
	}
	if h, ok := r.Lookup(dst6); !ok || !bytes.Equal(h.MAC, p.B.MAC) {
		t.Errorf("Lookup(%v), another neighbour = %v, %v", dst6, h, ok)
	}

	// A deleted neighbour is dropped.
	ipcmd(t, p.A, "-6", "neigh", "del", dst6.String(), "dev", p.A.Link)
	eventually(t, time.Second, "Lookup misses a deleted neighbour", func() bool {
		_, ok := r.Lookup(dst6)
		return !ok
	})
	// A failed one too.
	ipcmd(t, p.A, "neigh", "replace", dst4.String(), "dev", p.A.Link, "nud", "failed")
	eventually(t, time.Second, "Lookup misses a failed neighbour", func() bool {
		_, ok := r.Lookup(dst4)
		return !ok
	})
	if _, ok := r.Lookup(gw); ok {
		t.Error("Lookup hits through a failed gateway")
	}
	ipcmd(t, p.A, "neigh", "replace", dst4.String(), "dev", p.A.Link, "lladdr", p.B.MAC.String(), "nud", "permanent")
	eventually(t, time.Second, "Lookup hits the restored neighbour", func() bool {
		h, ok := r.Lookup(gw)
		return ok && bytes.Equal(h.MAC, p.B.MAC)
	})

	// A route change invalidates cached answers.
	ipcmd(t, p.A, "route", "replace", "198.19.5.0/24", "via", p.B.IPv4.String(), "mtu", "1300")
	eventually(t, time.Second, "Lookup misses after a route change", func() bool {
		_, ok := r.Lookup(gw)
		return !ok
	})
	if h := resolve(t, r, gw.String()); h.MTU != 1300 {
		t.Errorf("after the route change: %v, want mtu 1300", h)
	}

	// So does an MTU change of the interface.
	ipcmd(t, p.A, "link", "set", p.A.Link, "mtu", "1400")
	eventually(t, time.Second, "Lookup misses after an MTU change", func() bool {
		_, ok := r.Lookup(dst4)
		return !ok
	})
	if h := resolve(t, r, dst4.String()); h.MTU != 1400 {
		t.Errorf("after the MTU change: %v, want mtu 1400", h)
	}
	if h := resolve(t, r, "2001:db8::2"); h.MTU != 1400 {
		t.Errorf("after the MTU change: %v, want mtu 1400", h)
	}

	// And an address change (the source address may change).
	ipcmd(t, p.A, "route", "replace", "198.19.5.0/24", "via", p.B.IPv4.String(), "src", "198.18.0.1")
	ipcmd(t, p.A, "addr", "add", "198.18.0.3/24", "dev", p.A.Link)
	ipcmd(t, p.A, "route", "replace", "198.19.5.0/24", "via", p.B.IPv4.String(), "src", "198.18.0.3")
	if h := resolve(t, r, gw.String()); h.Src.String() != "198.18.0.3" {
		t.Errorf("after the source change: %v, want src 198.18.0.3", h)
	}
}

// A Resolver whose subscription ends reports it, instead of stale answers.
func TestSubscriptionError(t *testing.T) {
	p, r := setup(t, Options{})
	resolve(t, r, p.B.IPv4.String())
	r.sub.Close() // what a failing socket looks like to the reader
	eventually(t, time.Second, "Lookup misses once the subscription ended", func() bool {
		_, ok := r.Lookup(p.B.IPv4)
		return !ok
	})
	err := resolveErr(t, r, p.B.IPv4.String())
	if !strings.Contains(err.Error(), "subscription") {
		t.Errorf("Resolve after the subscription ended: %v", err)
	}
	t.Log(err)
}

// An overrun subscription (ENOBUFS: notifications lost) recovers from a
// fresh dump.
func TestOverrun(t *testing.T) {
	p, r := setup(t, Options{})
	resolve(t, r, p.B.IPv4.String())
	if err := unix.SetsockoptInt(r.sub.GetFd(), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 1); err != nil {
		t.Fatal(err)
	}
	newMAC := "02:00:00:00:be:ef"
	var batch strings.Builder
	for i := 10; i < 250; i++ {
		fmt.Fprintf(&batch, "neigh add 198.18.0.%d dev %s lladdr 02:00:00:00:00:%02x nud permanent\n", i, p.A.Link, i)
	}
	fmt.Fprintf(&batch, "neigh replace %v dev %s lladdr %s nud permanent\n", p.B.IPv4, p.A.Link, newMAC)
	// Hold the reader back while the burst fills the socket.
	r.mu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := p.A.Command(ctx, "ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	out, err := cmd.CombinedOutput()
	r.mu.Unlock()
	if err != nil {
		t.Fatalf("ip -batch: %v\n%s", err, out)
	}
	unix.SetsockoptInt(r.sub.GetFd(), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, subscriptionBuffer)
	eventually(t, 2*time.Second, "overrun noticed", func() bool { return r.stats.overruns.Load() > 0 })
	eventually(t, 2*time.Second, "new MAC after the overrun", func() bool {
		h, err := r.Resolve(context.Background(), p.B.IPv4)
		return err == nil && h.MAC.String() == newMAC
	})
	// The dump brought the rest of the table back.
	eventually(t, 2*time.Second, "table restored", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		rec := r.neigh[netip.MustParseAddr("198.18.0.249")]
		return rec != nil && rec.cur.Load() != nil
	})
	if trig := r.stats.triggers.Load(); trig != 0 {
		t.Errorf("%d NTF_USE requests for static entries", trig)
	}
}

func TestIdleHopsDropped(t *testing.T) {
	p, r := setup(t, Options{IdleTimeout: 200 * time.Millisecond})
	resolve(t, r, p.B.IPv4.String())
	resolve(t, r, p.B.IPv6.String())
	// Keep one in use.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if _, ok := r.Lookup(p.B.IPv4); !ok {
			t.Fatal("a hop in use was dropped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.cache.get(keyOf(p.B.IPv6)) != nil {
		t.Error("an idle hop was kept")
	}
}

// Hops used through a STALE neighbour make the kernel reconfirm it, as
// its own traffic would.
func TestStaleNeighbourReconfirmed(t *testing.T) {
	p, r := setup(t, Options{IdleTimeout: 200 * time.Millisecond}) // sweeps every 100ms
	dst := p.B.IPv4
	ipcmd(t, p.A, "neigh", "del", dst.String(), "dev", p.A.Link)
	eventually(t, time.Second, "deletion seen", func() bool {
		_, ok := r.Lookup(dst)
		return !ok
	})
	resolve(t, r, dst.String())
	ipcmd(t, p.A, "neigh", "change", dst.String(), "dev", p.A.Link, "lladdr", p.B.MAC.String(), "nud", "stale")
	eventually(t, time.Second, "STALE seen", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.neigh[dst].state == unix.NUD_STALE
	})
	eventually(t, 3*time.Second, "the kernel reconfirms the neighbour", func() bool {
		if _, ok := r.Lookup(dst); !ok { // in use
			resolve(t, r, dst.String())
		}
		_, state := neighShow(t, p.A, dst.String())
		return state != "STALE"
	})
	if r.stats.refreshes.Load() == 0 {
		t.Error("no refresh counted")
	}
	// A STALE neighbour nobody uses is left alone.
	ipcmd(t, p.A, "neigh", "change", p.B.IPv6.String(), "dev", p.A.Link, "lladdr", p.B.MAC.String(), "nud", "stale")
	time.Sleep(300 * time.Millisecond)
	if _, state := neighShow(t, p.A, p.B.IPv6.String()); state != "STALE" {
		t.Errorf("unused neighbour %v went %s", p.B.IPv6, state)
	}
}

func TestClose(t *testing.T) {
	p := netnstest.New(t, netnstest.Config{})
	// Settle goroutines of earlier tests.
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	var r *Resolver
	if err := p.A.Do(func() (err error) {
		r, err = New(p.A.Ifindex, Options{ResolveTimeout: time.Minute})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	resolve(t, r, p.B.IPv4.String())
	// A resolution in flight when Close comes.
	done := make(chan error, 1)
	go func() {
		_, err := r.Resolve(context.Background(), netip.MustParseAddr("198.18.0.250"))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v", took)
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("pending Resolve: %v, want net.ErrClosed", err)
	}
	if _, err := r.Resolve(context.Background(), p.B.IPv4); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Resolve after Close: %v, want net.ErrClosed", err)
	}
	if _, ok := r.Lookup(p.B.IPv4); ok {
		t.Error("Lookup hits after Close")
	}
	var after int
	for range 200 {
		if after = runtime.NumGoroutine(); after <= before {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before New, %d after Close:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// BenchmarkLookup measures the hot path. Each op is one Lookup that hits.
func BenchmarkLookup(b *testing.B) {
	p := netnstest.New(b, netnstest.Config{})
	// Let IPv6 settle first: the end of DAD changes addresses, which
	// drops every cached hop.
	linkLocal(b, p.A)
	linkLocal(b, p.B)
	r := newResolver(b, p.A, p.A.Ifindex, Options{})
	lookup := func(b *testing.B, dst netip.Addr) {
		if _, ok := r.Lookup(dst); !ok {
			if _, err := r.Resolve(context.Background(), dst); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, dst := range []netip.Addr{p.B.IPv4, p.B.IPv6} {
		b.Run(dst.String(), func(b *testing.B) {
			lookup(b, dst)
			b.ReportAllocs()
			for b.Loop() {
				lookup(b, dst)
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		lookup(b, p.B.IPv4)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lookup(b, p.B.IPv4)
			}
		})
	})
}

// Start does not wait: it starts the resolution, which Lookup then finds;
// a remembered failure comes back at once.
func TestStartDoesNotWait(t *testing.T) {
	p, r := setup(t, Options{ResolveTimeout: 300 * time.Millisecond})
	ipcmd(t, p.A, "neigh", "del", p.B.IPv4.String(), "dev", p.A.Link)
	start := time.Now()
	if err := r.Start(p.B.IPv4); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("Start took %v", d)
	}
	// Generous: under the race detector on a loaded machine the kernel's
	// resolution and the cache's netlink update can take seconds.
	eventually(t, 5*time.Second, "the started resolution to be cached", func() bool {
		_, ok := r.Lookup(p.B.IPv4)
		return ok
	})
	nobody := netip.AddrFrom4([4]byte(append(p.B.IPv4.AsSlice()[:3:3], 251)))
	if err := r.Start(nobody); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the resolution fails after 300 ms
	start = time.Now()
	err := r.Start(nobody)
	if !errors.Is(err, unix.EHOSTUNREACH) {
		t.Errorf("Start after a failed resolution: %v, want EHOSTUNREACH", err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("the remembered failure took %v", d)
	}
}
