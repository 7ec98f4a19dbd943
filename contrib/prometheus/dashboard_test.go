package xdpprom_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/internal/metrics"
	"github.com/xdpio/xdpio/internal/netnstest"
)

const dashboardFile = "dashboard/xdpio.json"

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s does not parse: %v", dashboardFile, err)
	}
	if dec.More() {
		t.Fatalf("%s: more than one JSON value", dashboardFile)
	}
	return d
}

// exprs returns the dashboard's PromQL: every panel target's, by panel
// title and refId, with Grafana's variables put in as Prometheus would
// get them ($device: every device; $__rate_interval: rate).
func (d dashboard) exprs(rate string) map[string]string {
	out := map[string]string{}
	r := strings.NewReplacer(`"$device"`, `".*"`, "$__rate_interval", rate)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[p.Title+"/"+tg.RefID] = r.Replace(tg.Expr)
		}
	}
	return out
}

// variableMetrics returns the metrics the template variables' queries
// name (label_values(METRIC, LABEL)).
func (d dashboard) variableMetrics() []string {
	var out []string
	for _, v := range d.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok || v.Type != "query" {
			continue
		}
		s, _ := q["query"].(string)
		if m, ok := strings.CutPrefix(s, "label_values("); ok {
			m, _, _ = strings.Cut(m, ",")
			out = append(out, strings.TrimSpace(m))
		}
	}
	return out
}

// promqlWords are PromQL's keywords and aggregation modifiers: not metric
// names.
var promqlWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true}

// grafanaVariable matches a Grafana variable ($device, ${device},
// $__rate_interval), which Prometheus would not understand; "$1" in
// label_replace is PromQL's.
var grafanaVariable = regexp.MustCompile(`\$(\{|[a-zA-Z_])`)

// metricNames returns the metric names an expression selects: the
// identifiers outside label matchers ({…}), ranges ([…]), strings and the
// label lists of by/without/on/ignoring/group_*, that are neither followed
// by "(" or by/without (a function or aggregation) nor keywords. It fails
// on what it cannot read, and on a Grafana variable left in.
func metricNames(expr string) ([]string, error) {
	if m := grafanaVariable.FindStringIndex(expr); m != nil {
		return nil, fmt.Errorf("a Grafana variable left at %d", m[0])
	}
	var names []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	// skipString returns the index after the string that starts at i.
	skipString := func(i int) (int, error) {
		for j := i + 1; j < len(expr); j++ {
			switch expr[j] {
			case '\\':
				j++
			case expr[i]:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d", i)
	}
	// skipTo returns the index after the close that ends what starts at i.
	skipTo := func(i int, close byte) (int, error) {
		for j := i + 1; j < len(expr); j++ {
			switch expr[j] {
			case '"', '\'':
				k, err := skipString(j)
				if err != nil {
					return 0, err
				}
				j = k - 1
			case close:
				return j + 1, nil
			case '{', '[', '(':
				return 0, fmt.Errorf("%q inside what starts at %d", expr[j], i)
			}
		}
		return 0, fmt.Errorf("no %q after %d", close, i)
	}
	// nextWord returns the identifier or character after the spaces at i.
	nextWord := func(i int) string {
		for i < len(expr) && expr[i] == ' ' {
			i++
		}
		j := i
		for j < len(expr) && isPart(expr[j]) {
			j++
		}
		if j == i && i < len(expr) {
			j++
		}
		return expr[i:j]
	}
	prevWord := ""
	for i := 0; i < len(expr); {
		c := expr[i]
		var err error
		switch {
		case c == '{':
			i, err = skipTo(i, '}')
		case c == '[':
			i, err = skipTo(i, ']')
		case c == '"' || c == '\'':
			i, err = skipString(i)
		case c == '(' && (prevWord == "by" || prevWord == "without" || prevWord == "on" || prevWord == "ignoring" || strings.HasPrefix(prevWord, "group_")):
			i, err = skipTo(i, ')')
			prevWord = ""
		case c >= '0' && c <= '9' || c == '.':
			// A number or duration (0.5, 1e3, 1h30m): not a name.
			for i++; i < len(expr) && (isPart(expr[i]) || expr[i] == '.'); i++ {
			}
			prevWord = ""
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			w := expr[i:j]
			switch next := nextWord(j); {
			case next == "(" || next == "by" || next == "without" || promqlWords[w]:
			default:
				names = append(names, w)
			}
			prevWord = w
			i = j
		default:
			if c != ' ' {
				prevWord = ""
			}
			i++
		}
		if err != nil {
			return nil, err
		}
	}
	return names, nil
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (device, queue) (rate(xdpio_xsk_rx_frames_total{device=~".*", queue!="x{y}"}[1m]))`: "xdpio_xsk_rx_frames_total",
		`a / on (queue) group_left (napi_id) b or c unless max without (x) (d)`:                     "a b c d",
		`rate(m_total[5m] offset 1h) > bool 0`:                                                      "m_total",
		`label_replace(up, "a", "$1", "b", "(.*)")`:                                                 "up",
	} {
		got, err := metricNames(expr)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("metricNames(%q) = %v, %v; want %s", expr, got, err, want)
		}
	}
	for _, bad := range []string{`rate(m{a="b"[1m])`, `m{a="b}`, `m{device=~"$device"}`, `rate(m[$__rate_interval])`, `m{a="${x}"}`} {
		if _, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q): no error", bad)
		}
	}
}

// dynamicNICNames are the per-queue counter families of devices the
// dashboard queries, whose names come from the device's counters (so not
// in metrics.Families): rx-packets of netdev qstats (and rx_packets of
// /proc/net/dev, the same family), and veth's rx_queue_N_xdp_packets. The
// real-Prometheus test checks that the exporter serves them.
var dynamicNICNames = []string{metrics.NICCounterName("rx-packets"), metrics.NICCounterName("rx_xdp_packets")}

// The dashboard parses, has the panels the issue asks for, and every
// query names only metrics the exporters serve; promtool (Prometheus's own
// PromQL parser, through a rules file) accepts every expression.
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q", d.Title, d.UID)
	}
	known := map[string]bool{}
	for _, f := range metrics.Families() {
		known[f.Name] = true
	}
	for _, n := range dynamicNICNames {
		known[n] = true
	}
	exprs := d.exprs("1m")
	used := map[string]bool{}
	for where, e := range exprs {
		names, err := metricNames(e)
		if err != nil || len(names) == 0 {
			t.Errorf("%s: %q: %v, %d metric names", where, e, err, len(names))
		}
		for _, n := range names {
			used[n] = true
			if !known[n] {
				t.Errorf("%s: %q names %s, which no exporter serves", where, e, n)
			}
		}
	}
	for _, n := range d.variableMetrics() {
		if !known[n] {
			t.Errorf("a variable's query names %s, which no exporter serves", n)
		}
	}
	// What the issue asks a dashboard to show.
	for _, n := range []string{"xdpio_xsk_rx_frames_total", "xdpio_nic_rx_packets_total", "xdpio_xsk_rx_drops_total", "xdpio_conn_drops_total",
		"xdpio_xsk_fill_ring_empty_total", "xdpio_nic_napi_defer_hard_irqs", "xdpio_nic_napi_gro_flush_timeout_seconds"} {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if p.ID == 0 || ids[p.ID] || p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: id, title or targets missing or repeated", p.ID, p.Title)
		}
		ids[p.ID] = true
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		netnstest.Missing(t, "promtool (Debian package prometheus)")
		return
	}
	var rules strings.Builder
	rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
	i := 0
	for _, e := range exprs {
		b, _ := json.Marshal(e) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "  - record: dashboard:expr_%d\n    expr: %s\n", i, b)
		i++
	}
	path := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s\n%s", err, out, rules.String())
	}
}
