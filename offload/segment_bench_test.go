package offload

import (
	"slices"
	"testing"
	"time"
)

// benchSuper is the benchmark input: a 64 KB super-packet (45 full
// 1448-byte segments, TCP timestamps) over IPv4 or IPv6.
func benchSuper(b *testing.B, v6 bool) []byte {
	return buildSuper(b, superSpec{v6: v6, tsopt: true, flags: tcpACK | tcpPSH, payload: 45 * 1448, id: 7, seq: 1})
}

// copyChecksum is the peer, the limit segmentation is measured against: copy
// each MSS-sized chunk of the payload into its destination frame and
// checksum it with offload.Checksum.
func copyChecksum(bufs [][]byte, payload []byte, hdr, mss int) uint16 {
	var s uint16
	for i := 0; len(payload) > 0; i++ {
		n := min(mss, len(payload))
		d := bufs[i][hdr : hdr+n]
		copy(d, payload[:n])
		s += Checksum(d, 0)
		payload = payload[n:]
	}
	return s
}

var benchSink uint16

// BenchmarkSegment runs SegmentInto (zero-copy into preallocated frames,
// as into UMEM) and Segment (appending, reused dst) on the 64 KB
// super-packet, and the copy+Checksum peer on the same payload bytes.
// Throughput is payload bytes per second.
func BenchmarkSegment(b *testing.B) {
	for _, fam := range []struct {
		name string
		v6   bool
	}{{"IPv4", false}, {"IPv6", true}} {
		in := benchSuper(b, fam.v6)
		lo, err := parseSegLayout(in, ipProtoTCP, "bench")
		if err != nil {
			b.Fatal(err)
		}
		payload := in[lo.Payload:lo.End]
		opts := SegmentOptions{MSS: 1448}
		n, _, _ := SegmentCount(in, opts)
		bufs := make([][]byte, n)
		for i := range bufs {
			bufs[i] = make([]byte, 2048)
		}
		b.Run(fam.name+"/SegmentInto", func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				for i := range bufs {
					bufs[i] = bufs[i][:cap(bufs[i])]
				}
				if _, err := SegmentInto(bufs, in, opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "segs/s")
		})
		b.Run(fam.name+"/Segment", func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			var dst [][]byte
			for b.Loop() {
				dst, err = Segment(dst[:0], in, opts)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fam.name+"/copy+Checksum", func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				benchSink += copyChecksum(bufs, payload, lo.Payload, 1448)
			}
		})
		// ratio interleaves both in one loop, so that machine noise hits
		// them alike, and reports SegmentInto's throughput as a fraction
		// of the copy+Checksum limit: the median over iterations of the
		// ratio of the two back-to-back timings (robust to the
		// preemption spikes of a shared machine), and the ratio of the
		// fastest iterations of each.
		b.Run(fam.name+"/ratio", func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			ratios := make([]float64, 0, 1<<16)
			minSeg, minPeer := time.Duration(1<<62), time.Duration(1<<62)
			for b.Loop() {
				t0 := time.Now()
				for i := range bufs {
					bufs[i] = bufs[i][:cap(bufs[i])]
				}
				SegmentInto(bufs, in, opts)
				t1 := time.Now()
				benchSink += copyChecksum(bufs, payload, lo.Payload, 1448)
				t2 := time.Now()
				dSeg, dPeer := t1.Sub(t0), t2.Sub(t1)
				minSeg, minPeer = min(minSeg, dSeg), min(minPeer, dPeer)
				if len(ratios) < cap(ratios) {
					ratios = append(ratios, float64(dPeer)/float64(dSeg))
				}
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "x_of_copy+Checksum")
			b.ReportMetric(float64(minPeer)/float64(minSeg), "x_best")
		})
	}
}

// BenchmarkCopySum compares the fused copy-and-sum loop with copy followed
// by Checksum at one MSS.
func BenchmarkCopySum(b *testing.B) {
	src := make([]byte, 1448)
	dst := make([]byte, 1448)
	for i := range src {
		src[i] = byte(i * 7)
	}
	b.Run("copySum", func(b *testing.B) {
		b.SetBytes(1448)
		for b.Loop() {
			benchSink += copySum(dst, src)
		}
	})
	b.Run("copy+Checksum", func(b *testing.B) {
		b.SetBytes(1448)
		for b.Loop() {
			copy(dst, src)
			benchSink += Checksum(dst, 0)
		}
	})
}
