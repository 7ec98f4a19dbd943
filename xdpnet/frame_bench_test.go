package xdpnet

import (
	"fmt"
	"testing"

	"github.com/xdpio/xdpio/offload"
)

// BenchmarkParseRX is the per-frame cost of the receive path's parse and
// checksum verification (cache-warm: the same frame again and again).
func BenchmarkParseRX(b *testing.B) {
	for _, size := range []int{22, 64, 1472} {
		for _, mode := range []RXChecksum{RXChecksumVerify, RXChecksumNone} {
			b.Run(fmt.Sprintf("%dB/%v", size, mode), func(b *testing.B) {
				f := gopacketFrame(b, ap4, bp4, make([]byte, size), 64, 0)
				p := newRXParser(bp4.Addr(), bp4.Port(), 1, mode)
				var d rxDatagram
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if c := p.parse(f, &d); c != causeOK {
						b.Fatal(c)
					}
				}
			})
		}
	}
}

// BenchmarkWriteDatagram is the per-datagram cost of building a frame:
// headers, the payload copied and summed in one pass.
func BenchmarkWriteDatagram(b *testing.B) {
	for _, size := range []int{22, 64, 1472} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			h := offload.Headers{SrcMAC: macA, DstMAC: macB, Src: ap4, Dst: bp4, TTL: 64}
			frame := make([]byte, 2048)
			payload := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.BuildUDP(frame, 1, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
