package xdpprom_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xdpio/xdpio/internal/metrics"
)

// FuzzText: whatever the device is called (any bytes), whatever a driver
// calls its counters and whatever they hold, the text `xdpio exporter` writes
// (metrics.Set.WriteText, written in the core module without
// client_golang) parses with Prometheus's own text parser (expfmt, the
// oracle) into the same families, label values and values.
func FuzzText(f *testing.F) {
	f.Add("veth0", "rx_queue_0_xdp_packets", "3", 12345.0)
	f.Add(`e"t\h`+"\n0", "rx-hw-gro-wire-bytes", "kernel", 1e300)
	f.Add("ö", "tx.3-packets", "", 0.25)
	f.Add("", "", "0", math.Inf(1))
	f.Add("e\xffth", "rx\xfe", "\x80", 1.0)
	f.Fuzz(func(t *testing.T, device, counter, queue string, v float64) {
		var s metrics.Set
		fam := metrics.NICCounter(counter)
		s.Add(fam, v, device, queue)
		s.Add(metrics.XSKRxDrops, 7, device, queue, metrics.CauseRxRingFull)
		s.Add(fam, 1, device+"x", queue)
		var b bytes.Buffer
		if err := s.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		mfs, err := p.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("expfmt: %v\n%s", err, b.String())
		}
		mf := mfs[fam.Name]
		if mf == nil || mf.GetType() != dto.MetricType_COUNTER || mf.GetHelp() != strings.ToValidUTF8(fam.Help, "\uFFFD") || len(mf.Metric) != 2 {
			t.Fatalf("family %s: %v\n%s", fam.Name, mf, b.String())
		}
		m := mf.Metric[0]
		got := m.GetCounter().GetValue()
		if got != v && !(math.IsNaN(v) && math.IsNaN(got)) {
			t.Errorf("value %v parsed as %v (%s)", v, got, b.String())
		}
		labels := map[string]string{}
		for _, lp := range m.Label {
			labels[lp.GetName()] = lp.GetValue()
		}
		// Bytes that are not UTF-8 come out as U+FFFD.
		device, queue = strings.ToValidUTF8(device, "\uFFFD"), strings.ToValidUTF8(queue, "\uFFFD")
		if labels["device"] != device || labels["queue"] != queue && queue != "" {
			t.Errorf("labels %q, want device %q queue %q\n%s", labels, device, queue, b.String())
		}
		if d := mfs["xdpio_xsk_rx_drops_total"]; d == nil || len(d.Metric) != 1 || d.Metric[0].GetCounter().GetValue() != 7 {
			t.Errorf("xdpio_xsk_rx_drops_total: %v", d)
		}
	})
}
