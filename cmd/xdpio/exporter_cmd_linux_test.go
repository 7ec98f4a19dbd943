//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// scrape is one parsed /metrics answer: each sample's value by its name
// and labels as written (`xdpio_nic_rx_xdp_packets_total{device="vb",queue="0"}`).
type scrape map[string]float64

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) (\S+)$`)

// parseText reads the samples of the text format; promtool checks the
// syntax, this only picks the values out.
func parseText(t *testing.T, body string) scrape {
	t.Helper()
	s := scrape{}
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		m := sampleLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a sample line: %q", l)
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		s[m[1]] = v
	}
	return s
}

// get fetches url within 5 s.
func get(url string) (int, string, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b), err
}

// promtool runs `promtool check metrics` on text: Prometheus's own parser
// and linter.
func promtool(t *testing.T, text string) {
	t.Helper()
	path := netnstest.RequireTool(t, "promtool")
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

var servingLine = regexp.MustCompile(`xdpio exporter: serving http://(\S+)/metrics for `)

// The exporter, run as `xdpio --netns NS exporter DEV lo` with its listener
// in this namespace, serves veth's per-queue ethtool -S counters (the
// oracle: ethtool, before and after the scrape) and lo's totals; promtool
// accepts what it serves. A device deleted while it is scraped in a loop
// never holds a scrape up: every scrape answers, and from the deletion on
// with xdpio_nic_scrape_success 0, logged once. Cancelling the context
// (what SIGTERM does) stops it.
func TestExporterVeth(t *testing.T) {
	p := statsPair(t)
	ns, dev := p.B.NS, p.B.Link
	sendAndWait(t, p, 50)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &notifyWriter{wrote: make(chan struct{}, 1)}
	var errs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, &globals{stdout: out, stderr: &errs}, []string{"--netns", ns, "exporter", dev, "lo", "--listen", "127.0.0.1:0"})
	}()
	out.waitFor(t, "the serving line", done, servingLine.MatchString)
	addr := servingLine.FindStringSubmatch(out.String())[1]
	url := "http://" + addr + "/metrics"

	lo := ethtoolS(t, p.B)
	code, ctype, body, err := get(url)
	hi := ethtoolS(t, p.B)
	if err != nil || code != 200 || ctype != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("GET %s: %d %q %v", url, code, ctype, err)
	}
	promtool(t, body)
	s := parseText(t, body)
	counters := 0
	for name, v := range lo {
		m := perQueue.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		counters++
		k := fmt.Sprintf(`xdpio_nic_%s_%s_total{device="%s",queue="%s"}`, m[1], m[3], dev, m[2])
		got, ok := s[k]
		if !ok || got < float64(v) || got > float64(hi[name]) {
			t.Errorf("%s = %v (%v); ethtool -S %s read %d before, %d after", k, got, ok, name, v, hi[name])
		}
	}
	if counters != 2*7+2*2 {
		t.Errorf("ethtool -S has %d per-queue counters, want veth's 18", counters)
	}
	for _, k := range []string{
		`xdpio_nic_stats_source{device="` + dev + `",source="driver"}`,
		`xdpio_nic_stats_source{device="lo",source="device"}`,
		`xdpio_nic_scrape_success{device="` + dev + `",part="stats"}`,
		`xdpio_nic_scrape_success{device="` + dev + `",part="napi"}`,
		`xdpio_nic_scrape_success{device="` + dev + `",part="queues"}`,
		`xdpio_nic_scrape_success{device="lo",part="stats"}`,
		`xdpio_nic_queue_info{device="` + dev + `",type="rx",queue="1",napi_id=""}`,
	} {
		if s[k] != 1 {
			t.Errorf("%s = %v, want 1", k, s[k])
		}
	}
	if s[`xdpio_nic_rx_packets_total{device="lo",queue=""}`] == 0 && s[`xdpio_nic_tx_packets_total{device="lo",queue=""}`] != 0 {
		t.Errorf("lo: rx_packets 0 with tx_packets %v", s[`xdpio_nic_tx_packets_total{device="lo",queue=""}`])
	}
	t.Logf("%d samples, e.g. rx_xdp_packets of queue 0: %v", len(s), s[`xdpio_nic_rx_xdp_packets_total{device="`+dev+`",queue="0"}`])

	// Scrape in a loop while the device goes away.
	type result struct {
		code int
		took time.Duration
		body string
		err  error
	}
	var (
		mu      sync.Mutex
		results []result
	)
	stop := make(chan struct{})
	looped := make(chan struct{})
	go func() {
		defer close(looped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			code, _, body, err := get(url)
			mu.Lock()
			results = append(results, result{code, time.Since(t0), body, err})
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	hostOut(t, p.B, "ip", "link", "del", dev)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-looped
	if len(results) < 10 {
		t.Errorf("%d scrapes in 400 ms", len(results))
	}
	for i, r := range results {
		if r.err != nil || r.code != 200 || r.took > 2*time.Second {
			t.Errorf("scrape %d: %d in %v: %v", i, r.code, r.took, r.err)
		}
	}
	last := parseText(t, results[len(results)-1].body)
	promtool(t, results[len(results)-1].body)
	for _, part := range []string{"stats", "napi", "queues"} {
		if v, ok := last[`xdpio_nic_scrape_success{device="`+dev+`",part="`+part+`"}`]; !ok || v != 0 {
			t.Errorf("after the deletion: scrape_success of %s %v %v", part, v, ok)
		}
	}
	if last[`xdpio_nic_scrape_success{device="lo",part="stats"}`] != 1 {
		t.Error("after the deletion: lo no longer read")
	}
	for k := range last {
		if strings.Contains(k, `device="`+dev+`"`) && !strings.HasPrefix(k, "xdpio_nic_scrape_") {
			t.Errorf("after the deletion: %s still exported", k)
		}
	}
	// Logged when the error changes (the read that failed, then the
	// reopen that found no device), not once a scrape.
	if n := strings.Count(errs.String(), "xdpio exporter: "+dev+": "); n < 1 || n > 2 {
		t.Errorf("the deletion logged %d times in %d scrapes (want once or twice):\n%s", n, len(results), errs.String())
	}
	t.Logf("stderr: %s", errs.String())

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exporter after cancel: %v", err)
		}
	case <-time.After(exporterShutdown + time.Second):
		t.Fatal("the exporter did not stop")
	}
	if _, _, _, err := get(url); err == nil {
		t.Error("still serving after it stopped")
	}
}

var perQueue = regexp.MustCompile(`^(rx|tx)_queue_([0-9]+)_(.+)$`)

// The xdpio process itself (this test binary standing in, as for the
// demo's server): --json prints where it listens, /metrics answers, / links
// to it, and SIGTERM ends it with status 0. A port in use fails it with
// status 1; a device that does not exist too, in words.
func TestExporterProcessSIGTERM(t *testing.T) {
	netnstest.RequirePriv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "--json", "exporter", "lo", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), demoServerEnv+"=1")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var ready struct {
		Listen      string   `json:"listen"`
		MetricsPath string   `json:"metrics_path"`
		Devices     []string `json:"devices"`
	}
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&ready); err != nil || ready.MetricsPath != "/metrics" || len(ready.Devices) != 1 {
		t.Fatalf("ready object: %+v %v; stderr: %s", ready, err, stderr.String())
	}
	code, _, body, err := get("http://" + ready.Listen + "/metrics")
	if err != nil || code != 200 || !strings.Contains(body, `xdpio_nic_stats_source{device="lo",source="device"} 1`) {
		t.Fatalf("GET /metrics: %d %v\n%s", code, err, body)
	}
	promtool(t, body)
	if code, _, body, err := get("http://" + ready.Listen + "/"); err != nil || code != 200 || !strings.Contains(body, `href="/metrics"`) {
		t.Errorf("GET /: %d %v %s", code, err, body)
	}
	if code, _, _, _ := get("http://" + ready.Listen + "/nothing"); code != 404 {
		t.Errorf("GET /nothing: %d", code)
	}

	// The same port, taken: status 1, saying so.
	var b bytes.Buffer
	err = runWith(ctx, &globals{stdout: &b, stderr: &b}, []string{"exporter", "lo", "--listen", ready.Listen})
	if exitStatus(err) != 1 || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("second exporter on %s: %v (status %d)", ready.Listen, err, exitStatus(err))
	}
	err = runWith(ctx, &globals{stdout: &b, stderr: &b}, []string{"exporter", "xdpio-nodev0", "--listen", "127.0.0.1:0"})
	if exitStatus(err) != 1 || !strings.Contains(err.Error(), `no network interface "xdpio-nodev0"`) {
		t.Errorf("exporter of a missing device: %v (status %d)", err, exitStatus(err))
	}

	t0 := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if err != nil || time.Since(t0) > 3*time.Second {
		t.Errorf("after SIGTERM: %v in %v; stderr: %s", err, time.Since(t0), stderr.String())
	}
	if stderr.String() != "" {
		t.Errorf("stderr: %s", stderr.String())
	}
}
