//go:build linux

package netstack

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/xdpio/xdpio/offload"
)

// countingDispatcher counts what the endpoint hands the stack.
type countingDispatcher struct {
	stack.NetworkDispatcher
	packets, bytes int
}

func (c *countingDispatcher) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	c.packets++
	c.bytes += pkt.Data().Size()
}

// tcpFrames builds n in-order segments of one flow, 1000 bytes each.
func tcpFrames(t *testing.T, n int) [][]byte {
	h := offload.Headers{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddrPort("198.18.0.1:40000"), Dst: netip.MustParseAddrPort("198.18.0.2:7")}
	var fs [][]byte
	for i := range n {
		f := make([]byte, 2048)
		l, err := h.BuildTCP(f, uint16(i), offload.TCPFields{Seq: uint32(1000 * i), Ack: 1, Flags: 0x10, Window: 1000}, make([]byte, 1000))
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f[:l])
	}
	return fs
}

// Every segment GRO takes is accounted for: handed to the stack inside a
// packet, or counted as dropped; a segment GRO drops does not take the
// packet it held with it.
func TestFeedGROAccounts(t *testing.T) {
	for _, accept := range []bool{false, true} {
		e := &Endpoint{cfg: Config{AcceptPartialChecksum: accept}}
		g, err := offload.NewGRO(offload.GROOptions{PartialChecksum: true, Verify: true, AcceptPartialChecksum: accept})
		if err != nil {
			t.Fatal(err)
		}
		q := &queue{e: e, gro: g}
		d := &countingDispatcher{}
		fs := tcpFrames(t, 5)
		// Segment 2 left unfinished by a sender's TX offload, segment 3
		// corrupted.
		l4 := 14 + 20
		ph := offload.PseudoHeaderIPv4([4]byte(fs[2][26:30]), [4]byte(fs[2][30:34]), offload.ProtoTCP, uint16(len(fs[2])-l4))
		binary.BigEndian.PutUint16(fs[2][l4+16:], ph)
		fs[3][len(fs[3])-1] ^= 0xff
		for _, f := range fs {
			if !q.groTakes(f) {
				t.Fatalf("GRO does not take a TCP segment with data")
			}
			q.feedGRO(d, f)
		}
		q.groOut = q.gro.Flush(q.groOut[:0])
		for _, p := range q.groOut {
			q.push(d, p, true)
		}
		s := e.Stats()
		wantFrames, wantBytes := uint64(3), 3000
		if accept {
			wantFrames, wantBytes = 4, 4000
		}
		if s.RXFrames != wantFrames || s.RXBadChecksum != 1 || s.RXPartialChecksum != 1 || s.RXPackets != uint64(d.packets) {
			t.Errorf("accept %v: stats %+v: want %d frames, 1 bad, 1 partial", accept, s, wantFrames)
		}
		payload := d.bytes - d.packets*(20+20) // IP and TCP headers
		if payload != wantBytes {
			t.Errorf("accept %v: the stack got %d bytes of payload in %d packets, want %d", accept, payload, d.packets, wantBytes)
		}
	}
}
