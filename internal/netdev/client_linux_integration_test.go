//go:build linux

package netdev

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/sys/unix"
)

// napiPair builds a veth pair with queues queues and GRO on at end A,
// which gives A's RX queues NAPI instances, and a Client inside A.
func napiPair(t *testing.T, queues int) (*netnstest.Pair, *Client) {
	t.Helper()
	p := netnstest.New(t, netnstest.Config{Queues: queues})
	netnstest.RequireTool(t, "ethtool")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := p.A.Command(ctx, "ethtool", "-K", p.A.Link, "gro", "on").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K gro on: %v: %s", err, out)
	}
	var c *Client
	if err := p.A.Do(func() (err error) { c, err = Dial(); return err }); err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c
}

// ynl runs the kernel's ynl tool inside h's namespace and decodes its JSON.
func ynl(t *testing.T, y netnstest.YNL, h *netnstest.Host, op ...string) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.Command(ctx, "python3", y.Args("netdev", op...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("ynl %v: %v: %s", op, err, ee.Stderr)
		}
		t.Fatalf("ynl %v: %v", op, err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("ynl %v: %v: %s", op, err, out)
	}
	return v
}

// ynlAttr returns attribute name of a ynl object as an integer: under its
// name when the tool's spec knows it, else from the raw native-endian
// bytes it prints as UnknownAttr(id).
func ynlAttr(t *testing.T, obj map[string]any, name string, id int) (uint64, bool) {
	t.Helper()
	if v, ok := obj[name]; ok {
		switch v := v.(type) {
		case float64:
			return uint64(v), true
		case string:
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("ynl %s = %q", name, v)
			}
			return n, true
		}
		t.Fatalf("ynl %s = %#v", name, v)
	}
	raw, ok := obj[fmt.Sprintf("UnknownAttr(%d)", id)]
	if !ok {
		return 0, false
	}
	b, err := hex.DecodeString(fmt.Sprint(raw))
	if err != nil {
		t.Fatalf("ynl UnknownAttr(%d) = %v", id, raw)
	}
	switch len(b) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(b)), true
	case 8:
		return binary.NativeEndian.Uint64(b), true
	}
	t.Fatalf("ynl UnknownAttr(%d) has %d bytes", id, len(b))
	return 0, false
}

// sameSet compares our flag names with ynl's list (printed in set order).
func sameSet(ours []string, ynl any) bool {
	l, _ := ynl.([]any)
	if len(l) != len(ours) {
		return false
	}
	m := map[string]bool{}
	for _, s := range ours {
		m[s] = true
	}
	for _, e := range l {
		if !m[fmt.Sprint(e)] {
			return false
		}
	}
	return true
}

func ynlList(t *testing.T, v any) []map[string]any {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("ynl dump: not a list: %#v", v)
	}
	out := make([]map[string]any, len(l))
	for i, e := range l {
		out[i] = e.(map[string]any)
	}
	return out
}

func TestProbeFamily(t *testing.T) {
	c, err := Dial()
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	for _, cmd := range []uint8{CmdDevGet, CmdQueueGet, CmdNAPIGet, CmdQStatsGet, CmdNAPISet} {
		if !c.Supports(cmd) {
			t.Errorf("Supports(%s) = false on a 6.13+ kernel", OpName(cmd))
		}
	}
	for _, a := range []uint16{AttrNAPIID, AttrNAPIDeferHardIRQs, AttrNAPIGROFlushTimeout, AttrNAPIIRQSuspendTimeout} {
		if !c.SupportsAttr(CmdNAPISet, a) {
			t.Errorf("SupportsAttr(napi-set, %s) = false", NAPIAttrName(a))
		}
	}
	if c.SupportsAttr(CmdNAPISet, 200) {
		t.Errorf("SupportsAttr(napi-set, 200) = true: the policy dump was not used")
	}
	if c.SupportsAttr(99, AttrNAPIID) {
		t.Errorf("SupportsAttr of a missing op = true")
	}
	// A missing op and attribute are ErrNotSupported before sending.
	c.Ops[CmdNAPISet] = false
	err = c.SetNAPI(1, NAPIConfig{DeferHardIRQs: new(uint32)})
	c.Ops[CmdNAPISet] = true
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("SetNAPI with napi-set hidden: %v, want ErrNotSupported", err)
	}
	c.policy[CmdNAPISet] = map[uint16]bool{AttrNAPIID: true}
	err = c.SetNAPI(1, NAPIConfig{DeferHardIRQs: new(uint32)})
	if !errors.Is(err, ErrNotSupported) {
		t.Errorf("SetNAPI with defer-hard-irqs hidden: %v, want ErrNotSupported", err)
	} else {
		t.Logf("as expected: %v", err)
	}
}

func TestNAPIAgainstYNL(t *testing.T) {
	y := netnstest.RequireYNL(t)
	p, c := napiPair(t, 2)
	napis, err := c.NAPIs(p.A.Ifindex)
	if err != nil {
		t.Fatalf("NAPIs: %v", err)
	}
	if len(napis) != 2 {
		t.Fatalf("NAPIs: %d instances, want 2 (veth with GRO on): %+v", len(napis), napis)
	}
	check := func(when string) {
		t.Helper()
		napis, err := c.NAPIs(p.A.Ifindex)
		if err != nil {
			t.Fatalf("NAPIs: %v", err)
		}
		oracle := ynlList(t, ynl(t, y, p.A, "--dump", "napi-get", "--json", fmt.Sprintf(`{"ifindex": %d}`, p.A.Ifindex)))
		if len(oracle) != len(napis) {
			t.Fatalf("%s: ynl lists %d NAPIs, we %d", when, len(oracle), len(napis))
		}
		byID := map[uint64]map[string]any{}
		for _, o := range oracle {
			id, _ := ynlAttr(t, o, "id", AttrNAPIID)
			byID[id] = o
		}
		for _, n := range napis {
			o, ok := byID[uint64(n.ID)]
			if !ok {
				t.Fatalf("%s: ynl has no NAPI %d", when, n.ID)
			}
			if v, _ := ynlAttr(t, o, "ifindex", AttrNAPIIfindex); int(v) != n.Ifindex {
				t.Errorf("%s: napi %d ifindex %d, ynl %d", when, n.ID, n.Ifindex, v)
			}
			if v, ok := ynlAttr(t, o, "defer-hard-irqs", AttrNAPIDeferHardIRQs); !ok || n.DeferHardIRQs == nil || uint64(*n.DeferHardIRQs) != v {
				t.Errorf("%s: napi %d defer-hard-irqs %v, ynl %d (%v)", when, n.ID, n.DeferHardIRQs, v, ok)
			}
			if v, ok := ynlAttr(t, o, "gro-flush-timeout", AttrNAPIGROFlushTimeout); !ok || n.GROFlushTimeout == nil || uint64(*n.GROFlushTimeout) != v {
				t.Errorf("%s: napi %d gro-flush-timeout %v, ynl %d (%v)", when, n.ID, n.GROFlushTimeout, v, ok)
			}
			if v, ok := ynlAttr(t, o, "irq-suspend-timeout", AttrNAPIIRQSuspendTimeout); !ok || n.IRQSuspendTimeout == nil || uint64(*n.IRQSuspendTimeout) != v {
				t.Errorf("%s: napi %d irq-suspend-timeout %v, ynl %d (%v)", when, n.ID, n.IRQSuspendTimeout, v, ok)
			}
			if v, ok := ynlAttr(t, o, "irq", AttrNAPIIRQ); ok != (n.IRQ >= 0) || (ok && int(v) != n.IRQ) {
				t.Errorf("%s: napi %d irq %d, ynl %d (%v)", when, n.ID, n.IRQ, v, ok)
			}
		}
	}
	check("defaults")

	n0 := napis[0]
	defer func() {
		if err := c.SetNAPI(n0.ID, n0.NAPIConfig); err != nil {
			t.Errorf("restore napi %d: %v", n0.ID, err)
		}
	}()
	d, g, s := uint32(7), 150*time.Microsecond, 2*time.Millisecond
	if err := c.SetNAPI(n0.ID, NAPIConfig{DeferHardIRQs: &d, GROFlushTimeout: &g, IRQSuspendTimeout: &s}); err != nil {
		t.Fatalf("SetNAPI: %v", err)
	}
	got, err := c.NAPI(n0.ID)
	if err != nil {
		t.Fatalf("NAPI(%d): %v", n0.ID, err)
	}
	if *got.DeferHardIRQs != d || *got.GROFlushTimeout != g || *got.IRQSuspendTimeout != s {
		t.Errorf("after set: %d %v %v, want %d %v %v", *got.DeferHardIRQs, *got.GROFlushTimeout, *got.IRQSuspendTimeout, d, g, s)
	}
	check("after set")
	// Only napi 0 changed.
	other, err := c.NAPI(napis[1].ID)
	if err != nil {
		t.Fatalf("NAPI: %v", err)
	}
	if *other.DeferHardIRQs != *napis[1].DeferHardIRQs {
		t.Errorf("napi %d changed too: %d", other.ID, *other.DeferHardIRQs)
	}
}

func TestQueuesAgainstYNL(t *testing.T) {
	y := netnstest.RequireYNL(t)
	p, c := napiPair(t, 2)
	qs, err := c.Queues(p.A.Ifindex)
	if err != nil {
		t.Fatalf("Queues: %v", err)
	}
	oracle := ynlList(t, ynl(t, y, p.A, "--dump", "queue-get", "--json", fmt.Sprintf(`{"ifindex": %d}`, p.A.Ifindex)))
	if len(qs) != 4 || len(oracle) != 4 {
		t.Fatalf("Queues: %d, ynl %d, want 4 (2 RX, 2 TX)", len(qs), len(oracle))
	}
	for i, q := range qs {
		o := oracle[i]
		id, _ := ynlAttr(t, o, "id", AttrQueueID)
		napi, hasNAPI := ynlAttr(t, o, "napi-id", AttrQueueNAPIID)
		_, xsk := o["xsk"]
		if _, ok := o["UnknownAttr(7)"]; ok {
			xsk = true
		}
		if uint64(q.ID) != id || q.Type.String() != fmt.Sprint(o["type"]) || uint64(q.NAPIID) != napi || q.XSK != xsk {
			t.Errorf("queue %d: %+v, ynl %v", i, q, o)
		}
		// veth has NAPIs with GRO on but does not link its queues to
		// them (netif_queue_set_napi): both sides must agree on that.
		if hasNAPI != (q.NAPIID != 0) {
			t.Errorf("queue %d: napi-id presence differs from ynl", q.ID)
		}
	}
	q, err := c.Queue(p.A.Ifindex, QueueRX, 1)
	if err != nil || q != qs[1] && q.ID != 1 {
		t.Errorf("Queue(rx 1) = %+v, %v", q, err)
	}
	_, err = c.Queue(p.A.Ifindex, QueueRX, 9)
	if err == nil {
		t.Fatalf("Queue(rx 9) of a 2-queue veth: no error")
	}
	t.Logf("as expected: %v", err)
}

func TestDevAgainstYNL(t *testing.T) {
	y := netnstest.RequireYNL(t)
	p, c := napiPair(t, 2)
	d, err := c.Dev(p.A.Ifindex)
	if err != nil {
		t.Fatalf("Dev: %v", err)
	}
	o := ynl(t, y, p.A, "--do", "dev-get", "--json", fmt.Sprintf(`{"ifindex": %d}`, p.A.Ifindex)).(map[string]any)
	if got, want := FlagNames(d.XDPFeatures, XDPActNames), o["xdp-features"]; !sameSet(got, want) {
		t.Errorf("xdp-features %v, ynl %v", got, want)
	}
	if got, want := FlagNames(d.XDPRxMetadataFeatures, XDPRxMetadataNames), o["xdp-rx-metadata-features"]; !sameSet(got, want) {
		t.Errorf("xdp-rx-metadata-features %v, ynl %v", got, want)
	}
	if v, _ := ynlAttr(t, o, "xdp-zc-max-segs", AttrDevXDPZCMaxSegs); uint64(d.XDPZCMaxSegs) != v {
		t.Errorf("xdp-zc-max-segs %d, ynl %d", d.XDPZCMaxSegs, v)
	}
	if d.XDPFeatures&XDPActBasic == 0 {
		t.Errorf("veth without basic XDP: %+v", d)
	}
	devs, err := c.Devs()
	if err != nil || len(devs) != 2 { // lo and veth-a
		t.Errorf("Devs: %d devices, %v; want lo and %s", len(devs), err, p.A.Link)
	}
}

// TestQStatsVeth: veth keeps no per-queue statistics for netdev netlink
// (no netdev_stat_ops): the kernel's EOPNOTSUPP is ErrNotSupported.
func TestQStatsVeth(t *testing.T) {
	p, c := napiPair(t, 1)
	_, err := c.QStats(p.A.Ifindex)
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("QStats(veth): %v, want ErrNotSupported", err)
	}
	t.Logf("as expected: %v", err)
}

// TestQStatsAgainstYNL compares per-queue counters with ynl's on the host's
// devices that keep them (virtio-net eth0 here): read-only. veth has no
// qstats, and no device this test could create here has them (netdevsim is
// not built), so without such a device the test skips.
func TestQStatsAgainstYNL(t *testing.T) {
	netnstest.RequirePriv(t)
	y := netnstest.RequireYNL(t)
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	devs, err := c.Devs()
	if err != nil {
		t.Fatal(err)
	}
	tested := 0
	for _, d := range devs {
		stats, err := c.QStats(d.Ifindex)
		if errors.Is(err, ErrNotSupported) {
			continue
		}
		if err != nil {
			t.Fatalf("QStats(%d): %v", d.Ifindex, err)
		}
		tested++
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, "python3", y.Args("netdev", "--dump", "qstats-get", "--json",
			fmt.Sprintf(`{"ifindex": %d, "scope": "queue"}`, d.Ifindex))...).Output()
		cancel()
		if err != nil {
			t.Fatalf("ynl: %v", err)
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		oracle := ynlList(t, v)
		if len(stats) != len(oracle) {
			t.Fatalf("ifindex %d: %d rows, ynl %d", d.Ifindex, len(stats), len(oracle))
		}
		for i, s := range stats {
			o := oracle[i]
			if fmt.Sprint(o["queue-type"]) != s.Type.String() || uint64(s.ID) != uint64(o["queue-id"].(float64)) {
				t.Fatalf("row %d: %s %d, ynl %v", i, s.Type, s.ID, o)
			}
			n := 0
			for _, ctr := range s.Reported() {
				v, ok := ynlAttr(t, o, ctr.String(), int(ctr))
				got, _ := s.Get(ctr)
				// Live counters move between the two reads: the
				// oracle's read came second.
				if !ok || v < got {
					t.Errorf("ifindex %d row %d %s %d: %s = %d, ynl %d (%v)", d.Ifindex, i, s.Type, s.ID, ctr, got, v, ok)
				}
				n++
			}
			if len(o)-3 != n {
				t.Errorf("row %d: ynl reports %d counters, we %v", i, len(o)-3, s.Reported())
			}
		}
	}
	if tested == 0 {
		netnstest.SkipIfMachineLacks(t, "every device", "keeps no per-queue statistics (netdev qstats; veth does not)")
	}
}

func TestBadInput(t *testing.T) {
	p, c := napiPair(t, 1)
	napis, err := c.NAPIs(p.A.Ifindex)
	if err != nil || len(napis) != 1 {
		t.Fatalf("NAPIs: %v %v", napis, err)
	}
	_, err = c.NAPI(0x7ffffff0)
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("NAPI(unknown): %v, want ENOENT", err)
	}
	t.Logf("unknown NAPI: %v", err)
	big := uint32(1 << 31)
	err = c.SetNAPI(napis[0].ID, NAPIConfig{DeferHardIRQs: &big})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, unix.ERANGE) && !errors.Is(err, unix.EINVAL) || e.Attr != "defer-hard-irqs" || e.Message == "" {
		t.Errorf("SetNAPI(defer 2^31): %v, want the kernel's range error naming defer-hard-irqs", err)
	}
	t.Logf("out of range: %v", err)
	err = c.SetNAPI(0x7ffffff0, NAPIConfig{DeferHardIRQs: new(uint32)})
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("SetNAPI(unknown): %v, want ENOENT", err)
	}
	if _, err := c.NAPIs(0); err == nil {
		t.Errorf("NAPIs(0): no error")
	}
	if _, err := c.Queues(9999); err == nil {
		t.Errorf("Queues(9999): no error")
	} else {
		t.Logf("unknown device: %v", err)
	}
	// B has GRO off: no NAPI.
	var cb *Client
	if err := p.B.Do(func() (err error) { cb, err = Dial(); return err }); err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	nb, err := cb.NAPIs(p.B.Ifindex)
	if err != nil || len(nb) != 0 {
		t.Errorf("NAPIs of veth with GRO off: %v, %v; want none", nb, err)
	}
}

func TestConcurrentUse(t *testing.T) {
	p, c := napiPair(t, 2)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				var err error
				switch i % 4 {
				case 0:
					_, err = c.NAPIs(p.A.Ifindex)
				case 1:
					_, err = c.Queues(p.A.Ifindex)
				case 2:
					_, err = c.QStats(p.A.Ifindex)
					if errors.Is(err, ErrNotSupported) {
						err = nil // veth
					}
				case 3:
					_, err = c.Dev(p.A.Ifindex)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestMonitor: toggling GRO on one veth end changes what its peer offers
// (ndo-xmit: the peer can now transmit XDP frames into it): a
// dev-change-ntf in the peer's namespace with the new features, which
// agree with dev-get; deleting the veth: dev-del-ntf.
func TestMonitor(t *testing.T) {
	p, _ := napiPair(t, 1)
	var c *Client
	var m *Monitor
	if err := p.B.Do(func() (err error) {
		if c, err = Dial(); err != nil {
			return err
		}
		m, err = c.Monitor()
		return err
	}); err != nil {
		t.Fatalf("Monitor: %v", err)
	}
	defer c.Close()
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := p.A.Command(ctx, "ethtool", "-K", p.A.Link, "gro", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v: %s", err, out)
	}
	want, err := c.Dev(p.B.Ifindex)
	if err != nil {
		t.Fatal(err)
	}
	if want.XDPFeatures&XDPActNDOXmit != 0 {
		t.Fatalf("peer of a veth with GRO off offers ndo-xmit: %v", FlagNames(want.XDPFeatures, XDPActNames))
	}
	wait := func(kind string) Notification {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			ns, err := m.Receive(deadline)
			if err != nil {
				t.Fatalf("waiting for dev-%s-ntf: %v", kind, err)
			}
			for _, n := range ns {
				if n.Dev.Ifindex == p.B.Ifindex && n.Kind() == kind {
					return n
				}
			}
		}
	}
	n := wait("change")
	if n.Dev.XDPFeatures != want.XDPFeatures {
		t.Errorf("change notification features %v, dev-get %v", FlagNames(n.Dev.XDPFeatures, XDPActNames), FlagNames(want.XDPFeatures, XDPActNames))
	}
	if out, err := p.B.Command(ctx, "ip", "link", "del", p.B.Link).CombinedOutput(); err != nil {
		t.Fatalf("ip link del: %v: %s", err, out)
	}
	wait("del")
}
