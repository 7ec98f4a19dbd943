package tcpplane

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkTCPBuild is the sender's user-space work per write without the
// network: a 64 KB write built into frame-sized buffers (as UMEM frames)
// one segment at a time with offload.FillChecksum (tso=off) or cut by
// offload.SegmentPayload (tso=on). Compare the two in one run:
//
//	go test ./bench -run '^$' -bench TCPBuild -count 5 | benchstat -col /tso -
func BenchmarkTCPBuild(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		for _, tso := range []bool{false, true} {
			b.Run(fmt.Sprintf("v6=%v/tso=%v", v6, tso), func(b *testing.B) {
				mss := 1460
				if v6 {
					mss = 1440
				}
				f := testFlow(b, v6, 1, mss)
				payload := make([]byte, MaxWrite(v6, mss))
				bufs := make([][]byte, f.segments(len(payload)))
				for i := range bufs {
					bufs[i] = make([]byte, 4096-256)
				}
				i := 0
				next := func(size int) []byte {
					buf := bufs[i]
					i++
					return buf[:size]
				}
				b.SetBytes(int64(len(payload)))
				b.ReportAllocs()
				segs := 0
				for b.Loop() {
					i = 0
					var n int
					var err error
					if tso {
						n, err = f.writeTSO(payload, next)
					} else {
						n, err = f.writeSegments(payload, next)
					}
					if err != nil {
						b.Fatal(err)
					}
					segs += n
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(segs), "ns/segment")
			})
		}
	}
}

// BenchmarkTCPBuildRatio builds the same write both ways in every
// iteration, alternating, and reports each way's ns/byte and their ratio
// (tso-on/off): on a noisy machine both see the same noise.
func BenchmarkTCPBuildRatio(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		b.Run(fmt.Sprintf("v6=%v", v6), func(b *testing.B) {
			mss := 1460
			if v6 {
				mss = 1440
			}
			fOff, fOn := testFlow(b, v6, 1, mss), testFlow(b, v6, 1, mss)
			payload := make([]byte, MaxWrite(v6, mss))
			bufs := make([][]byte, fOff.segments(len(payload)))
			for i := range bufs {
				bufs[i] = make([]byte, 4096-256)
			}
			i := 0
			next := func(size int) []byte {
				buf := bufs[i]
				i++
				return buf[:size]
			}
			b.SetBytes(2 * int64(len(payload)))
			b.ReportAllocs()
			var off, on time.Duration
			for b.Loop() {
				t0 := time.Now()
				i = 0
				if _, err := fOff.writeSegments(payload, next); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				i = 0
				if _, err := fOn.writeTSO(payload, next); err != nil {
					b.Fatal(err)
				}
				on += time.Since(t1)
				off += t1.Sub(t0)
			}
			n := float64(b.N) * float64(len(payload))
			b.ReportMetric(float64(off.Nanoseconds())/n, "ns/byte-tso-off")
			b.ReportMetric(float64(on.Nanoseconds())/n, "ns/byte-tso-on")
			b.ReportMetric(float64(on)/float64(off), "on/off")
		})
	}
}
