package offload

import "testing"

// BenchmarkGRO merges the 45 segments of a 64 KB super-packet back into
// one frame (Feed each, then Flush, buffers recycled through dst), with
// the payload checksum of every segment verified while it is copied.
func BenchmarkGRO(b *testing.B) {
	for _, fam := range []struct {
		name string
		v6   bool
	}{{"IPv4", false}, {"IPv6", true}} {
		in := benchSuper(b, fam.v6)
		segs, err := Segment(nil, in, SegmentOptions{MSS: 1448})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fam.name, func(b *testing.B) {
			g, err := NewGRO(GROOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var out [][]byte
			b.SetBytes(int64(len(segs) * 1448))
			b.ReportAllocs()
			for b.Loop() {
				out = out[:0]
				for _, s := range segs {
					out = g.Feed(out, s)
				}
				out = g.Flush(out)
				if len(out) != 1 {
					b.Fatalf("%d frames", len(out))
				}
			}
			b.ReportMetric(float64(len(segs))*float64(b.N)/b.Elapsed().Seconds(), "segs/s")
		})
	}
}
