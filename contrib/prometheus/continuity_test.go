package xdpprom

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

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

// setCollector sends a fixed Set through the collectors' path.
type setCollector struct {
	s    *metrics.Set
	cont continuity
}

func (c *setCollector) Describe(chan<- *prometheus.Desc) {}
func (c *setCollector) Collect(ch chan<- prometheus.Metric) {
	c.cont.emit(c.s, ch)
}

// What a registry gathers from the collectors' metrics: label pairs
// sorted, values typed, and a device or driver counter name that is not
// UTF-8 (Linux allows any byte but / in an interface name) mended rather
// than failing the scrape.
func TestGatherOddNames(t *testing.T) {
	var s metrics.Set
	s.Add(metrics.NICCounter("rx\xffodd"), 3, "e\xfeth0", "1")
	s.Add(metrics.XSKFrames, 5, "vb", "0", "fill")
	reg := prometheus.NewRegistry()
	reg.MustRegister(&setCollector{s: &s})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			for _, lp := range m.Label {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			got[mf.GetName()] = fmt.Sprintf("%s %v %v %v", mf.GetType(), ls, m.GetCounter().GetValue(), m.GetGauge().GetValue())
		}
	}
	want := map[string]string{
		"xdpio_nic_rx_odd_total": "COUNTER [device=e\uFFFDth0 queue=1] 3 0",
		"xdpio_xsk_frames":       "GAUGE [device=vb place=fill queue=0] 0 5",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("gathered (-want +got):\n%s", d)
	}
}
