//go:build linux

package netstack

import (
	"bytes"
	"testing"
	"unsafe"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// split hands TSO a GSO packet's headers and payload: the payload in
// place when the stack holds it in one piece, copied after the headers
// when it holds it in several; the bytes are the packet's either way.
func TestSplit(t *testing.T) {
	for _, pieces := range [][]int{{30000}, {1000, 29000}, {7, 1, 29992}} {
		var payload []byte
		var buf buffer.Buffer
		for i, n := range pieces {
			p := bytes.Repeat([]byte{byte(i + 1)}, n)
			payload = append(payload, p...)
			buf.Append(buffer.NewViewWithData(p))
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: 128, Payload: buf})
		var hdr []byte
		for i, h := range []stack.PacketHeader{pkt.TransportHeader(), pkt.NetworkHeader(), pkt.LinkHeader()} {
			b := h.Push([]int{32, 20, 14}[i])
			for j := range b {
				b[j] = byte(0xa0 + i)
			}
			hdr = append(append([]byte(nil), b...), hdr...)
		}
		q := &queue{scratch: make([]byte, 14+gsoMaxSize)}
		h, p := q.split(pkt, pkt.Size())
		if !bytes.Equal(h, hdr) || !bytes.Equal(p, payload) {
			t.Errorf("pieces %v: the headers or the payload differ from the packet's", pieces)
		}
		s0, s1 := uintptr(unsafe.Pointer(&q.scratch[0])), uintptr(unsafe.Pointer(&q.scratch[len(q.scratch)-1]))
		inScratch := uintptr(unsafe.Pointer(&p[0])) >= s0 && uintptr(unsafe.Pointer(&p[0])) <= s1
		if inScratch != (len(pieces) > 1) {
			t.Errorf("pieces %v: payload copied %v, want a copy only for a payload in pieces", pieces, inScratch)
		}
		pkt.DecRef()
	}
}
