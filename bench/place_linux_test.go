package bench

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/place"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/bench/xskplane"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/rss"
)

// TestPlacerSpreadsStreams: with a plane.Placer for a 4-queue table, the kernel
// socket and AF_XDP clients' streams leave from the ports it chose (as
// the server's kernel sees them on the wire), and those flows hash to
// each queue of the table twice.
func TestPlacerSpreadsStreams(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	table, err := rss.Equal(4, 128)
	if err != nil {
		t.Fatal(err)
	}
	pred, err := rss.NewPredictor(rss.PredictorOptions{Indirection: table})
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"socket", "xsk"} {
		t.Run(backend, func(t *testing.T) {
			server := netip.AddrPortFrom(pair.B.IPv4, 5401)
			var rx *net.UDPConn
			if err := pair.B.Do(func() (err error) {
				rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(server))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer rx.Close()
			pl := &place.Placer{Predictor: pred}
			var dp plane.DataPlane = &kernelplane.DataPlane{Do: pair.A.Do, Placer: pl}
			if backend == "xsk" {
				dp = &xskplane.DataPlane{Iface: pair.A.Link, Do: pair.A.Do, Placer: pl}
			}
			const streams = 8
			var conns []plane.PacketConn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for i := 0; i < streams; i++ {
				c, err := dp.Dial(server)
				if err != nil {
					t.Fatalf("dial stream %d: %v", i, err)
				}
				conns = append(conns, c)
				msg := []plane.Message{{Buf: []byte("placed"), N: 6, Addr: server}}
				if n, err := c.WriteBatch(msg); n != 1 {
					t.Fatalf("stream %d: sent %d: %v", i, n, err)
				}
			}
			placed := pl.Placements()
			if len(placed) != streams {
				t.Fatalf("%d placements for %d streams", len(placed), streams)
			}
			seen := map[uint16]bool{}
			buf := make([]byte, 64)
			rx.SetReadDeadline(time.Now().Add(3 * time.Second))
			for len(seen) < streams {
				_, from, err := rx.ReadFromUDPAddrPort(buf)
				if err != nil {
					t.Fatalf("server got %d of %d streams' datagrams: %v", len(seen), streams, err)
				}
				seen[from.Port()] = true
			}
			perQueue := map[uint32]int{}
			for i, p := range placed {
				if got := conns[i].LocalAddr().Port(); got != p.Port {
					t.Errorf("stream %d: local port %d, placed %d", i, got, p.Port)
				}
				if !seen[p.Port] {
					t.Errorf("stream %d: no datagram from placed port %d on the wire (saw %v)", i, p.Port, seen)
				}
				q, err := pred.Queue(rss.FlowKey{Src: pair.A.IPv4, Dst: pair.B.IPv4, SrcPort: p.Port, DstPort: server.Port(), Proto: 17, Ports: true})
				if err != nil || q != p.Queue {
					t.Errorf("stream %d: port %d hashes to queue %d (%v), placed on %d", i, p.Port, q, err, p.Queue)
				}
				perQueue[q]++
			}
			for q := uint32(0); q < 4; q++ {
				if perQueue[q] != 2 {
					t.Errorf("queue %d has %d streams, want 2 (%v)", q, perQueue[q], perQueue)
				}
			}
		})
	}
}

// TestPlacerAddressesOnly: a NIC that hashes UDP by addresses alone
// cannot be steered by ports, and the plane.Placer says so instead of
// pretending.
func TestPlacerAddressesOnly(t *testing.T) {
	table, _ := rss.Equal(4, 128)
	pred, err := rss.NewPredictor(rss.PredictorOptions{Indirection: table})
	if err != nil {
		t.Fatal(err)
	}
	pl := &place.Placer{Predictor: pred, AddressesOnly: true}
	src, dst := netip.MustParseAddr("198.18.0.1"), netip.AddrPortFrom(netip.MustParseAddr("198.18.0.2"), 5201)
	var failed bool
	for i := 0; i < 4; i++ {
		if _, _, err := pl.Port(src, dst, 0, 0); err != nil {
			if !errors.Is(err, rss.ErrUnplaceable) {
				t.Fatalf("error %v does not wrap rss.ErrUnplaceable", err)
			}
			failed = true
		}
	}
	if !failed {
		t.Error("four streams of one address pair were placed on four queues by port although ports are not hashed")
	}
}
