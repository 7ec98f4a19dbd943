package offload

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkVerifyRX measures the RX verdict per frame: VerifyRX (sums the
// transport segment itself) against VerifyRXComplete (derives it from a
// CHECKSUM_COMPLETE sum, reading only the headers), and FillChecksum, for
// TCP over IPv4 and IPv6 frames of several sizes.
func BenchmarkVerifyRX(b *testing.B) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, v6 := range []bool{false, true} {
		for _, size := range []int{64, 1514, 9014} {
			o := frameOpts{v6: v6, proto: ProtoTCP, tcpOpts: 12}
			hdr := EthernetLen + IPv4MinLen + TCPMinLen + 12
			if v6 {
				hdr = EthernetLen + IPv6Len + TCPMinLen + 12
			}
			o.payload = max(size-hdr, 0)
			f := buildFrame(rng, o)
			if _, err := FillChecksum(f); err != nil {
				b.Fatal(err)
			}
			sum := Checksum(f[EthernetLen:], 0)
			ipv := "ipv4"
			if v6 {
				ipv = "ipv6"
			}
			run := func(name string, fn func() bool) {
				b.Run(fmt.Sprintf("%s/size=%d/%s", ipv, len(f), name), func(b *testing.B) {
					b.SetBytes(int64(len(f)))
					b.ReportAllocs()
					for b.Loop() {
						if !fn() {
							b.Fatal("frame does not verify")
						}
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
				})
			}
			run("VerifyRX", func() bool { return VerifyRX(f).L4 == VerdictOK })
			run("VerifyRXComplete", func() bool { return VerifyRXComplete(f, sum).L4 == VerdictOK })
			run("FillChecksum", func() bool { _, err := FillChecksum(f); return err == nil })
		}
	}
}
