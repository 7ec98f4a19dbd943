//go:build lab && linux

package xsk_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/rss"
	"github.com/xdpio/xdpio/test/lab/labctl"
	"github.com/xdpio/xdpio/xsk"
	"golang.org/x/sys/unix"
)

type labRX struct {
	flow   labctl.Flow
	queue  int
	hash   uint32
	hashOK bool
}

// labReceive runs one receiver goroutine per socket of d until stop is
// closed, and returns what each received.
func labReceive(t *testing.T, d *xsk.Device, stop <-chan struct{}) func() []labRX {
	var (
		mu  sync.Mutex
		got []labRX
		wg  sync.WaitGroup
	)
	for _, s := range d.Sockets() {
		wg.Add(1)
		go func(s *xsk.Socket) {
			defer wg.Done()
			b := s.NewBatch(64)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if s.Receive(b) == 0 {
					s.Wait(50*time.Millisecond, false)
					continue
				}
				mu.Lock()
				for i := 0; i < b.Len(); i++ {
					f, err := labctl.ParseFlow(b.Frame(i))
					if err != nil {
						t.Errorf("queue %d: %v", s.Queue(), err)
						continue
					}
					h, _, ok := b.RXHash(i)
					got = append(got, labRX{f, s.Queue(), h, ok})
				}
				mu.Unlock()
				s.Release(b)
			}
		}(s)
	}
	return func() []labRX {
		wg.Wait()
		return got
	}
}

// TestLabXSKVirtioRSS opens one AF_XDP socket per queue of the virtio-net
// NIC (XDP in driver mode, copy mode), sends UDP and TCP flows over IPv4
// and IPv6 into it from the host, and requires each flow's frames on the
// socket of the RX queue rss predicts from the device's key and table —
// the seed's picture, traffic spread over queues by the NIC's RSS hash, on
// a real driver. Where the driver hands the NIC's hash to XDP
// (bpf_xdp_metadata_rx_hash), it must equal the software Toeplitz hash.
func TestLabXSKVirtioRSS(t *testing.T) {
	name := labctl.Virtio(t)
	c := labctl.DialTB(t)
	dev := labctl.OpenNIC(t, name)
	ch, err := dev.Channels()
	if err != nil {
		t.Fatal(err)
	}
	rxHash := true
	d, err := xsk.Open(name, xsk.Config{
		UMEM: xsk.UMEMConfig{NumFrames: 1024},
		Program: xsk.ProgramConfig{Attach: xsk.AttachDriver, RXHash: true, Filter: []xsk.Rule{
			{Protocol: labctl.ProtoUDP, DstPortMin: 9000, DstPortMax: 9999},
			{Protocol: labctl.ProtoTCP, DstPortMin: 9000, DstPortMax: 9999},
		}},
		Socket: xsk.SocketConfig{Bind: xsk.BindCopy, RXRingSize: 1024, FillRingSize: 1024, TXRingSize: 64, CompletionRingSize: 64},
	})
	if err != nil {
		t.Logf("xsk.Open with RXHash: %v; retrying without the RX hash", err)
		rxHash = false
		d, err = xsk.Open(name, xsk.Config{
			UMEM: xsk.UMEMConfig{NumFrames: 1024},
			Program: xsk.ProgramConfig{Attach: xsk.AttachDriver, Filter: []xsk.Rule{
				{Protocol: labctl.ProtoUDP, DstPortMin: 9000, DstPortMax: 9999},
				{Protocol: labctl.ProtoTCP, DstPortMin: 9000, DstPortMax: 9999},
			}},
			Socket: xsk.SocketConfig{Bind: xsk.BindCopy, RXRingSize: 1024, FillRingSize: 1024, TXRingSize: 64, CompletionRingSize: 64},
		})
	}
	if err != nil {
		t.Fatalf("xsk.Open %s (driver mode, copy): %v", name, err)
	}
	defer d.Close()
	if n := len(d.Sockets()); n != int(ch.Combined) {
		t.Fatalf("%d sockets for %d queues", n, ch.Combined)
	}
	for _, s := range d.Sockets() {
		if s.ZeroCopy() {
			t.Errorf("queue %d: zero-copy granted for BindCopy", s.Queue())
		}
	}
	// Set the table after attaching: virtio-net (Linux 6.12) re-sends the
	// queue pair count when XDP is attached, and with a user-set table it
	// does so with VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, which qemu takes as
	// "RSS off" (frames then follow the tap's own queue choice). Setting
	// the table afterwards commits the RSS configuration again.
	if _, err := labctl.Ethtool("-X", name, "equal", fmt.Sprint(ch.Combined)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { labctl.Ethtool("-X", name, "default") })
	st, err := dev.RSS()
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Predictor(rss.IndexLowBits)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	wait := labReceive(t, d, stop)

	rng := rand.New(rand.NewPCG(5, 5))
	var flows []labctl.Flow
	flows = append(flows, labctl.Flows(rng, 128, labctl.ProtoUDP, false, 9000)...)
	flows = append(flows, labctl.Flows(rng, 64, labctl.ProtoTCP, false, 9100)...)
	flows = append(flows, labctl.Flows(rng, 32, labctl.ProtoUDP, true, 9200)...)
	flows = append(flows, labctl.Flows(rng, 32, labctl.ProtoTCP, true, 9300)...)
	const per = 2
	if err := c.Send(flows, per); err != nil {
		close(stop)
		wait()
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var total uint64
		for _, s := range d.Sockets() {
			st, _ := s.Stats()
			total += st.RXFrames
		}
		if total >= uint64(per*len(flows)) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	got := wait()

	ports := map[string]bool{}
	byFlow := map[labctl.Flow]*labSeen{}
	perQueue := make([]int, ch.Combined)
	hashes, hashMismatch := 0, 0
	for _, r := range got {
		s := byFlow[r.flow]
		if s == nil {
			s = &labSeen{queues: map[int]int{}}
			byFlow[r.flow] = s
		}
		s.n++
		s.queues[r.queue]++
		perQueue[r.queue]++
		if r.hashOK {
			hashes++
			k := labctl.FlowKey(t, name, r.flow, ports)
			if want := p.Hash(k); r.hash != want && hashMismatch < 8 {
				hashMismatch++
				t.Errorf("flow %v: NIC hash %#08x, software Toeplitz %#08x", r.flow, r.hash, want)
			}
		}
	}
	t.Logf("frames per queue: %v (%d flows × %d); NIC hashes seen: %d (RXHash program: %v)", perQueue, len(flows), per, hashes, rxHash)
	bad := 0
	for _, f := range flows {
		q, err := p.Queue(labctl.FlowKey(t, name, f, ports))
		if err != nil {
			t.Fatal(err)
		}
		s := byFlow[f]
		switch {
		case s == nil:
			t.Errorf("flow %v (predicted queue %d): no frame received", f, q)
			bad++
		case s.n != per || s.queues[int(q)] != per:
			t.Errorf("flow %v: %d frames on queues %v, want %d on queue %d", f, s.n, s.queues, per, q)
			bad++
		}
		if bad > 16 {
			labModels(t, p, byFlow, ports)
			t.Fatal("too many misplaced flows")
		}
	}
	if bad > 0 {
		labModels(t, p, byFlow, ports)
	}
	for q, n := range perQueue {
		if n == 0 {
			t.Errorf("queue %d received nothing from %d flows: RSS did not spread them", q, len(flows))
		}
	}
}

// TestLabXSKNetdevsimGeneric binds a socket to every queue of the netdevsim
// port with the XDP program in generic (skb) mode, the mode netdevsim's
// AF_XDP works in, links a second netdevsim port to it (netdevsim forwards
// what one port sends to its peer's RX queues), sends UDP frames from the
// peer, and requires every frame in the sockets, intact.
func TestLabXSKNetdevsimGeneric(t *testing.T) {
	name := labctl.Netdevsim(t)
	peer := labNetdevsimPeer(t, name)
	d, err := xsk.Open(name, xsk.Config{
		UMEM: xsk.UMEMConfig{NumFrames: 1024},
		Program: xsk.ProgramConfig{Attach: xsk.AttachGeneric, Filter: []xsk.Rule{
			{Protocol: labctl.ProtoUDP, DstPortMin: 9000, DstPortMax: 9999}}},
		Socket: xsk.SocketConfig{Bind: xsk.BindCopy, RXRingSize: 512, FillRingSize: 512, TXRingSize: 64, CompletionRingSize: 64},
	})
	if err != nil {
		t.Fatalf("xsk.Open %s (generic): %v", name, err)
	}
	defer d.Close()
	n, err := nic.RXQueues(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Sockets()) != n || n < 1 {
		t.Fatalf("%d sockets for %d queues", len(d.Sockets()), n)
	}
	stop := make(chan struct{})
	wait := labReceive(t, d, stop)

	rng := rand.New(rand.NewPCG(9, 9))
	flows := labctl.Flows(rng, 64, labctl.ProtoUDP, false, 9000)
	src, _ := net.InterfaceByName(peer)
	dst, _ := net.InterfaceByName(name)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrLinklayer{Ifindex: src.Index, Halen: 6}
	copy(sa.Addr[:], dst.HardwareAddr)
	for i, f := range flows {
		b, err := labctl.Frame(f, src.HardwareAddr, dst.HardwareAddr, uint32(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Sendto(fd, b, 0, sa); err != nil {
			t.Fatalf("send on %s: %v", peer, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var total uint64
		for _, s := range d.Sockets() {
			st, _ := s.Stats()
			total += st.RXFrames
		}
		if total >= uint64(len(flows)) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	got := wait()
	want := map[labctl.Flow]bool{}
	for _, f := range flows {
		want[f] = true
	}
	perQueue := make([]int, n)
	for _, r := range got {
		if !want[r.flow] {
			t.Errorf("queue %d: unexpected or repeated flow %v", r.queue, r.flow)
		}
		delete(want, r.flow)
		perQueue[r.queue]++
	}
	t.Logf("%d frames sent from %s, received per queue of %s: %v", len(flows), peer, name, perQueue)
	for f := range want {
		t.Errorf("flow %v: frame not received", f)
	}
}

// labNetdevsimPeer creates a second netdevsim device with one port, links
// it to dev (/sys/bus/netdevsim/link_device, Linux 6.10+), brings it up and
// returns its name; all undone when t ends.
func labNetdevsimPeer(t *testing.T, dev string) string {
	t.Helper()
	labctl.WriteFile(t, "/sys/bus/netdevsim/new_device", "2 1 4")
	t.Cleanup(func() { os.WriteFile("/sys/bus/netdevsim/del_device", []byte("2"), 0o600) })
	var peer string
	for i := 0; i < 50 && peer == ""; i++ {
		if es, _ := os.ReadDir("/sys/bus/netdevsim/devices/netdevsim2/net"); len(es) > 0 {
			peer = es[0].Name()
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if peer == "" {
		t.Fatal("second netdevsim device has no netdev")
	}
	if out, err := exec.Command("ip", "link", "set", peer, "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s up: %v: %s", peer, err, out)
	}
	a, _ := net.InterfaceByName(dev)
	b, _ := net.InterfaceByName(peer)
	ns, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	fd := ns.Fd()
	labctl.WriteFile(t, "/sys/bus/netdevsim/link_device", fmt.Sprintf("%d:%d %d:%d", fd, a.Index, fd, b.Index))
	t.Cleanup(func() {
		ns, err := os.Open("/proc/self/ns/net")
		if err != nil {
			return
		}
		defer ns.Close()
		os.WriteFile("/sys/bus/netdevsim/unlink_device", []byte(fmt.Sprintf("%d:%d", ns.Fd(), a.Index)), 0o600)
	})
	return peer
}

type labSeen struct {
	n      int
	queues map[int]int
}

// labModels tells, for misplaced flows, which model of the device's hash
// input would have placed the received flows right: with or without
// ports, either direction.
func labModels(t *testing.T, p *rss.Predictor, byFlow map[labctl.Flow]*labSeen, ports map[string]bool) {
	models := []struct {
		name string
		key  func(f labctl.Flow) rss.FlowKey
	}{
		{"as ethtool -n says", func(f labctl.Flow) rss.FlowKey {
			return rss.FlowKey{Src: f.Src, Dst: f.Dst, SrcPort: f.SPort, DstPort: f.DPort, Ports: ports[f.FlowType()]}
		}},
		{"addresses only", func(f labctl.Flow) rss.FlowKey { return rss.FlowKey{Src: f.Src, Dst: f.Dst} }},
		{"with ports", func(f labctl.Flow) rss.FlowKey {
			return rss.FlowKey{Src: f.Src, Dst: f.Dst, SrcPort: f.SPort, DstPort: f.DPort, Ports: true}
		}},
		{"reversed, with ports", func(f labctl.Flow) rss.FlowKey {
			return rss.FlowKey{Src: f.Dst, Dst: f.Src, SrcPort: f.DPort, DstPort: f.SPort, Ports: true}
		}},
	}
	for _, m := range models {
		agree := map[string][2]int{}
		for f, s := range byFlow {
			q, _ := p.Queue(m.key(f))
			a := agree[f.FlowType()]
			a[1]++
			if s.queues[int(q)] == s.n {
				a[0]++
			}
			agree[f.FlowType()] = a
		}
		t.Logf("model %q: flows placed right by type (right/total): %v", m.name, agree)
	}
}
