package tcpplane

import (
	"fmt"
	"testing"
	"time"
)

// buildWrite is a benchmark's 64 KB write and the frame-sized buffers
// (as UMEM frames) it is built into.
type buildWrite struct {
	mss     int
	payload []byte
	bufs    [][]byte
	i       int
}

func newBuildWrite(b *testing.B, v6 bool) *buildWrite {
	w := &buildWrite{mss: 1460}
	if v6 {
		w.mss = 1440
	}
	w.payload = make([]byte, MaxWrite(v6, w.mss))
	w.bufs = make([][]byte, testFlow(b, v6, 1, w.mss).segments(len(w.payload)))
	for i := range w.bufs {
		w.bufs[i] = make([]byte, 4096-256)
	}
	return w
}

// next hands out the next buffer, cut to size; reset starts over.
func (w *buildWrite) next(size int) []byte {
	buf := w.bufs[w.i]
	w.i++
	return buf[:size]
}

func (w *buildWrite) reset() { w.i = 0 }

// BenchmarkTCPBuild is the sender's user-space work per write without the
// network: a 64 KB write built into frame-sized buffers (as UMEM frames)
// one segment at a time with offload.FillChecksum (tso=off) or cut by
// offload.SegmentPayload (tso=on). Compare the two in one run:
//
//	go test ./bench/tcpplane -run '^$' -bench TCPBuild -count 5 | benchstat -col /tso -
func BenchmarkTCPBuild(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		for _, tso := range []bool{false, true} {
			b.Run(fmt.Sprintf("v6=%v/tso=%v", v6, tso), func(b *testing.B) {
				w := newBuildWrite(b, v6)
				f := testFlow(b, v6, 1, w.mss)
				b.SetBytes(int64(len(w.payload)))
				b.ReportAllocs()
				segs := 0
				for b.Loop() {
					w.reset()
					var n int
					var err error
					if tso {
						n, err = f.writeTSO(w.payload, w.next)
					} else {
						n, err = f.writeSegments(w.payload, w.next)
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
			w := newBuildWrite(b, v6)
			fOff, fOn := testFlow(b, v6, 1, w.mss), testFlow(b, v6, 1, w.mss)
			b.SetBytes(2 * int64(len(w.payload)))
			b.ReportAllocs()
			var off, on time.Duration
			for b.Loop() {
				t0 := time.Now()
				w.reset()
				if _, err := fOff.writeSegments(w.payload, w.next); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				w.reset()
				if _, err := fOn.writeTSO(w.payload, w.next); err != nil {
					b.Fatal(err)
				}
				on += time.Since(t1)
				off += t1.Sub(t0)
			}
			n := float64(b.N) * float64(len(w.payload))
			b.ReportMetric(float64(off.Nanoseconds())/n, "ns/byte-tso-off")
			b.ReportMetric(float64(on.Nanoseconds())/n, "ns/byte-tso-on")
			b.ReportMetric(float64(on)/float64(off), "on/off")
		})
	}
}
