package metrics_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/xdpio/xdpio/internal/metrics"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// The data model's rules for names (prometheus.io, "Data model"), and the
// conventions the families follow.
var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

func TestFamiliesFollowConventions(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range metrics.Families() {
		switch {
		case !metricName.MatchString(f.Name) || strings.Contains(f.Name, ":"):
			t.Errorf("%s: not a metric name (colons are for recording rules)", f.Name)
		case !strings.HasPrefix(f.Name, "xdpio_"):
			t.Errorf("%s: no xdpio_ prefix", f.Name)
		case f.Type == metrics.Counter && !strings.HasSuffix(f.Name, "_total"):
			t.Errorf("%s: a counter without _total", f.Name)
		case f.Type != metrics.Counter && strings.HasSuffix(f.Name, "_total"):
			t.Errorf("%s: a gauge with _total", f.Name)
		case f.Help == "" || strings.Contains(f.Help, "\n"):
			t.Errorf("%s: help %q", f.Name, f.Help)
		case len(f.Labels) == 0 || len(f.Labels) > metrics.MaxLabels:
			t.Errorf("%s: %d labels", f.Name, len(f.Labels))
		case seen[f.Name]:
			t.Errorf("%s: two families", f.Name)
		}
		seen[f.Name] = true
		for _, l := range f.Labels {
			if !labelName.MatchString(l) || strings.HasPrefix(l, "__") {
				t.Errorf("%s: label %q", f.Name, l)
			}
		}
		for _, unit := range []string{"millis", "micro", "nano", "_ms", "_us", "_ns", "kilo", "mega"} {
			if strings.Contains(f.Name, unit) {
				t.Errorf("%s: not in base units", f.Name)
			}
		}
	}
}

// fill sets every uint64, int and bool field of the struct v points to to
// a value of its own (base+1000, base+2000, …; true) and returns the
// uint64s and ints by field name.
func fill(v any, base int) map[string]float64 {
	rv := reflect.ValueOf(v).Elem()
	out := map[string]float64{}
	n := base / 1000
	for i := range rv.NumField() {
		fv, name := rv.Field(i), rv.Type().Field(i).Name
		switch fv.Kind() {
		case reflect.Uint64:
			n++
			fv.SetUint(uint64(n * 1000))
			out[name] = float64(n * 1000)
		case reflect.Int:
			n++
			fv.SetInt(int64(n * 1000))
			out[name] = float64(n * 1000)
		case reflect.Bool:
			fv.SetBool(true)
		}
	}
	return out
}

func values(s *metrics.Set) map[float64][]string {
	m := map[float64][]string{}
	for i := range s.Len() {
		f, v, l := s.At(i)
		m[v] = append(m[v], f.Name+"{"+strings.Join(l, ",")+"}")
	}
	return m
}

// Every counter of xsk.Stats is exported, once, and only FramesOwned (the
// sum of the places) and the flags are not.
func TestAddSocketExportsEveryCounter(t *testing.T) {
	var st xsk.Stats
	want := fill(&st, 0)
	var s metrics.Set
	metrics.AddSocket(&s, "vb", "3", st)
	got := values(&s)
	for field, v := range want {
		if field == "FramesOwned" {
			if len(got[v]) != 0 {
				t.Errorf("FramesOwned exported as %v", got[v])
			}
			continue
		}
		if len(got[v]) != 1 {
			t.Errorf("xsk.Stats.%s: exported as %v, want once", field, got[v])
		}
	}
	for i := range s.Len() {
		f, _, l := s.At(i)
		if l[0] != "vb" || l[1] != "3" {
			t.Errorf("%s: labels %v", f.Name, l)
		}
	}
	if _, v, _ := s.At(s.Len() - 1); v != 1 {
		t.Errorf("zero copy exported as %v, want 1", v)
	}
}

// Every counter of xdpnet.QueueStats and every cause of xdpnet.Drops is
// exported, the causes under their JSON names.
func TestAddConnExportsEveryCounter(t *testing.T) {
	var q xdpnet.QueueStats
	want := fill(&q, 0)
	fill(&q.Drops, 100_000) // apart from the queue's own
	q.Queue = 2
	var s metrics.Set
	metrics.AddConn(&s, "dns", "vb", xdpnet.Stats{Queues: []xdpnet.QueueStats{q, {Queue: xdpnet.KernelQueue}}, Detached: true})
	got := values(&s)
	for field, v := range want {
		if field == "Queue" {
			continue
		}
		if len(got[v]) != 1 {
			t.Errorf("xdpnet.QueueStats.%s: exported as %v, want once", field, got[v])
		}
	}
	dt := reflect.TypeOf(xdpnet.Drops{})
	if dt.NumField() != len(metrics.ConnDropCauses) {
		t.Fatalf("xdpnet.Drops has %d causes, ConnDropCauses %d", dt.NumField(), len(metrics.ConnDropCauses))
	}
	for i := range dt.NumField() {
		fd := dt.Field(i)
		tag, _, _ := strings.Cut(fd.Tag.Get("json"), ",")
		if metrics.ConnDropCauses[i] != tag {
			t.Errorf("cause %d: %q, xdpnet.Drops.%s is %q in JSON", i, metrics.ConnDropCauses[i], fd.Name, tag)
		}
		v := float64(reflect.ValueOf(q.Drops).Field(i).Uint())
		if w := "xdpio_conn_drops_total{dns,vb,2," + tag + "}"; !cmp.Equal(got[v], []string{w}) {
			t.Errorf("xdpnet.Drops.%s: exported as %v, want %s", fd.Name, got[v], w)
		}
	}
	var kernelRows, detached int
	for i := range s.Len() {
		f, v, l := s.At(i)
		if f == metrics.ConnDetached {
			detached++
			if v != 1 || !cmp.Equal(l, []string{"dns", "vb"}) {
				t.Errorf("detached: %v %v", v, l)
			}
			continue
		}
		if !strings.HasPrefix(f.Name, "xdpio_conn_") {
			continue
		}
		if l[2] == "kernel" {
			kernelRows++
		}
	}
	if kernelRows != 5+len(metrics.ConnDropCauses) || detached != 1 {
		t.Errorf("%d samples of the kernel socket, %d of detached", kernelRows, detached)
	}
	// The AF_XDP queue's socket is exported (queue 2), the kernel's has none.
	var sockets int
	for i := range s.Len() {
		if f, _, l := s.At(i); strings.HasPrefix(f.Name, "xdpio_xsk_") {
			sockets++
			if l[1] != "2" {
				t.Errorf("%s of queue %q", f.Name, l[1])
			}
		}
	}
	var one metrics.Set
	metrics.AddSocket(&one, "vb", "2", q.Socket)
	if sockets != one.Len() {
		t.Errorf("%d socket samples, want %d", sockets, one.Len())
	}
}

func TestQueueLabel(t *testing.T) {
	for q, want := range map[int]string{0: "0", 7: "7", 255: "255", 256: "256", 4095: "4095", xdpnet.KernelQueue: "kernel", -2: ""} {
		if got := metrics.Queue(q); got != want {
			t.Errorf("Queue(%d) = %q, want %q", q, got, want)
		}
	}
}

func TestNICCounterName(t *testing.T) {
	for in, want := range map[string]string{
		"rx-packets":           "xdpio_nic_rx_packets_total",
		"rx_xdp_packets":       "xdpio_nic_rx_xdp_packets_total",
		"rx-hw-gro-wire-bytes": "xdpio_nic_rx_hw_gro_wire_bytes_total",
		"attr-42":              "xdpio_nic_attr_42_total",
		"rx_drop":              "xdpio_nic_rx_drop_total",
		"RX.Errors":            "xdpio_nic_rx_errors_total",
		"rx_total":             "xdpio_nic_rx_total",
		"rx bytes (ok)":        "xdpio_nic_rx_bytes__ok__total",
		"":                     "xdpio_nic__total",
	} {
		if got := metrics.NICCounterName(in); got != want {
			t.Errorf("NICCounterName(%q) = %q, want %q", in, got, want)
		}
	}
	a, b := metrics.NICCounter("rx-packets"), metrics.NICCounter("rx-packets")
	if a != b || a.Type != metrics.Counter || !strings.Contains(a.Help, "rx-packets") || !cmp.Equal(a.Labels, []string{"device", "queue"}) {
		t.Errorf("NICCounter: %+v, %p %p", a, a, b)
	}
}

// FuzzNICCounterName: whatever a driver calls a counter, the family name is
// a valid metric name, a counter's, and the same for the same input.
func FuzzNICCounterName(f *testing.F) {
	for _, s := range []string{"rx-packets", "rx_queue_0_xdp_packets", "tx-3.bytes", "\x00\xff", "ö_total", "_total"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got := metrics.NICCounterName(name)
		if !metricName.MatchString(got) || !strings.HasPrefix(got, "xdpio_nic_") || !strings.HasSuffix(got, "_total") {
			t.Fatalf("NICCounterName(%q) = %q", name, got)
		}
		if metrics.NICCounter(name).Name != got {
			t.Fatalf("NICCounter(%q).Name differs", name)
		}
	})
}

func TestAppendValue(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 1: "1", 1234567: "1234567", 1 << 53: "9007199254740992", -3: "-3",
		0.25: "0.25", 1e-7: "1e-07", 0.003111602: "0.003111602", 1e300: "1e+300",
		math.Inf(1): "+Inf", math.Inf(-1): "-Inf",
	} {
		if got := string(metrics.AppendValue(nil, v)); got != want {
			t.Errorf("AppendValue(%v) = %q, want %q", v, got, want)
		}
	}
	if got := string(metrics.AppendValue(nil, math.NaN())); got != "NaN" {
		t.Errorf("NaN: %q", got)
	}
}

// WriteText groups each family's samples under one HELP and TYPE, sorts the
// families by name, and escapes help texts and label values.
func TestWriteText(t *testing.T) {
	var s metrics.Set
	metrics.AddNAPIs(&s, "e\"th\\0\n", []nic.NAPI{{ID: 8193, NAPISettings: nic.NAPISettings{
		DeferHardIRQs: ptr(uint32(2)), GROFlushTimeout: ptr(200 * time.Microsecond)}}})
	odd := &metrics.Family{Name: "xdpio_test_total", Type: metrics.Counter, Help: `a \ help` + "\n" + `"line"`, Labels: []string{"device", "queue"}}
	s.Add(odd, 5, "a", "1")
	metrics.AddNAPIs(&s, "lo", []nic.NAPI{{ID: 1, NAPISettings: nic.NAPISettings{DeferHardIRQs: ptr(uint32(0))}}})
	s.Add(odd, 6, "a", "2")
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP xdpio_nic_napi_defer_hard_irqs How many consecutive empty polls keep the NAPI instance's hardware IRQs masked (napi_defer_hard_irqs).
# TYPE xdpio_nic_napi_defer_hard_irqs gauge
xdpio_nic_napi_defer_hard_irqs{device="e\"th\\0\n",napi_id="8193"} 2
xdpio_nic_napi_defer_hard_irqs{device="lo",napi_id="1"} 0
# HELP xdpio_nic_napi_gro_flush_timeout_seconds The NAPI instance's gro_flush_timeout: the timer that polls instead of an IRQ while IRQs are deferred.
# TYPE xdpio_nic_napi_gro_flush_timeout_seconds gauge
xdpio_nic_napi_gro_flush_timeout_seconds{device="e\"th\\0\n",napi_id="8193"} 0.0002
# HELP xdpio_test_total a \\ help\n"line"
# TYPE xdpio_test_total counter
xdpio_test_total{device="a",queue="1"} 5
xdpio_test_total{device="a",queue="2"} 6
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("WriteText (-want +got):\n%s", d)
	}
	// promtool, Prometheus's own checker, reads it (when installed).
	promtoolCheck(t, b.Bytes())

	// Two families of one name that disagree are refused.
	s.Add(&metrics.Family{Name: odd.Name, Type: metrics.Gauge, Help: "x", Labels: odd.Labels}, 1, "a", "3")
	if err := s.WriteText(&bytes.Buffer{}); err == nil {
		t.Error("WriteText took two different families of one name")
	}
	// Reset keeps nothing.
	s.Reset()
	b.Reset()
	if err := s.WriteText(&b); err != nil || b.Len() != 0 || s.Len() != 0 {
		t.Errorf("after Reset: %d samples, %q, %v", s.Len(), b.String(), err)
	}
}

func TestAddPanicsOnWrongLabelCount(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Add with one label value for two labels did not panic")
		}
	}()
	var s metrics.Set
	s.Add(metrics.XSKRxFrames, 1, "vb")
}

func ptr[T any](v T) *T { return &v }

// promtoolCheck runs `promtool check metrics` (Prometheus's own parser
// and linter) on text and fails t on any problem it reports.
func promtoolCheck(t *testing.T, text []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		netnstest.Missing(t, "promtool (Debian package prometheus)")
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\n--- input:\n%s", err, out, text)
	}
}

// The JSON names of the drop causes are what xdpnet's --json output and
// the metrics share: a rename there shows here.
func TestConnDropCausesMatchJSON(t *testing.T) {
	b, err := json.Marshal(xdpnet.Drops{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range metrics.ConnDropCauses {
		if !bytes.Contains(b, []byte(`"`+c+`"`)) {
			t.Errorf("cause %q is not a JSON name of xdpnet.Drops: %s", c, b)
		}
	}
}

// Every family the Add functions use is listed by Families (so the
// convention test above sees it), but the per-queue counters of a device,
// which NICCounter names.
func TestFamiliesListsWhatIsAdded(t *testing.T) {
	listed := map[*metrics.Family]bool{}
	for _, f := range metrics.Families() {
		listed[f] = true
	}
	var s metrics.Set
	metrics.AddSocket(&s, "vb", "0", xsk.Stats{})
	metrics.AddConn(&s, "c", "vb", xdpnet.Stats{Queues: []xdpnet.QueueStats{{Queue: 1}, {Queue: xdpnet.KernelQueue}}})
	d, g := uint32(1), time.Second
	metrics.AddNAPIs(&s, "vb", []nic.NAPI{{ID: 1, NAPISettings: nic.NAPISettings{DeferHardIRQs: &d, GROFlushTimeout: &g, IRQSuspendTimeout: &g}}})
	metrics.AddQueues(&s, "vb", []nic.Queue{{Type: nic.RX, ID: 0, NAPIID: 9}, {Type: nic.TX, ID: 0}})
	metrics.AddNICStats(&s, "vb", nic.Snapshot{Source: nic.StatsQstats, Queues: []nic.QueueStats{{Type: nic.RX, Queue: 0, Counters: map[string]uint64{"rx-packets": 1}}}})
	seen := map[*metrics.Family]bool{}
	for i := range s.Len() {
		f, _, _ := s.At(i)
		seen[f] = true
		if !listed[f] && f != metrics.NICCounter("rx-packets") {
			t.Errorf("%s is added but not listed by Families", f.Name)
		}
	}
	for f := range listed {
		if !seen[f] && f != metrics.NICScrapeSuccess && f != metrics.NICScrapeDuration {
			t.Errorf("%s is listed but no Add function adds it", f.Name)
		}
	}
}
