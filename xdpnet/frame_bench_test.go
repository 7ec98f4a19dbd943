package xdpnet

import (
	"fmt"
	"testing"
)

// BenchmarkParseRx is the per-frame cost of the receive path's parse and
// checksum verification (cache-warm: the same frame again and again).
func BenchmarkParseRx(b *testing.B) {
	for _, size := range []int{22, 64, 1472} {
		for _, mode := range []RxChecksum{RxChecksumVerify, RxChecksumNone} {
			b.Run(fmt.Sprintf("%dB/%v", size, mode), func(b *testing.B) {
				f := gopacketFrame(b, ap4, bp4, make([]byte, size), 64, 0)
				p := newRxParser(bp4.Addr(), bp4.Port(), 1, mode)
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
			h := txHeader{srcMAC: macA, dstMAC: macB, src: ap4, dst: bp4, ttl: 64}
			frame := make([]byte, 2048)
			payload := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				writeDatagram(frame, &h, 1, payload)
			}
		})
	}
}
