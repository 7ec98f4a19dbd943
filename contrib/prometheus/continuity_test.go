package xdpprom

import (
	"testing"

	"github.com/xdpio/xdpio/internal/metrics"
)

// continuity, step by step: an endpoint's counters come through as they
// are; after a handover (Replace) the next endpoint's are added to what
// the old one had counted; a counter that restarts without a handover is
// caught too; gauges are never adjusted; each series keeps its own.
func TestContinuity(t *testing.T) {
	var c continuity
	step := func(name string, rx0, rx1, frames float64, want0, want1, wantFrames float64) {
		t.Helper()
		var s metrics.Set
		s.Add(metrics.XSKRxFrames, rx0, "vb", "0")
		s.Add(metrics.XSKRxFrames, rx1, "vb", "1")
		s.Add(metrics.XSKFrames, frames, "vb", "0", "fill")
		c.adjustAll(&s)
		for i, want := range []float64{want0, want1, wantFrames} {
			if _, v, _ := s.At(i); v != want {
				f, _, l := s.At(i)
				t.Errorf("%s: %s%v = %v, want %v", name, f.Name, l, v, want)
			}
		}
	}
	step("first endpoint", 10, 5, 100, 10, 5, 100)
	step("it counts on", 25, 5, 90, 25, 5, 90)
	c.handover()
	step("second endpoint, from 0", 0, 0, 80, 25, 5, 80)
	step("it counts on", 7, 1, 80, 32, 6, 80)
	step("a restart without handover", 2, 1, 70, 34, 6, 70)
	step("and on", 3, 4, 70, 35, 9, 70)
	c.handover()
	c.handover() // twice: nothing counted in between
	step("third endpoint", 1, 0, 60, 36, 9, 60)
}
