//go:build linux

package xdpprom_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	xdpprom "github.com/xdpio/xdpio/contrib/prometheus"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xdpnet"
	"golang.org/x/sys/unix"
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// buildXDPIO builds the xdpio command from the core module into a
// temporary directory.
func buildXDPIO(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "xdpio")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/xdpio")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/xdpio: %v\n%s", err, out)
	}
	return bin
}

// promServer is a Prometheus server (Debian's prometheus package) with a
// configuration and storage of its own in a temporary directory, listening
// on 127.0.0.1, killed when the test ends.
type promServer struct {
	addr string
	cmd  *exec.Cmd
	log  *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startPrometheus starts Prometheus scraping each job's target every
// second and waits (at most 30 s) until it is ready.
func startPrometheus(t *testing.T, jobs map[string]string) *promServer {
	t.Helper()
	bin := netnstest.RequireTool(t, "prometheus")
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nscrape_configs:\n")
	for job, target := range jobs {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: ['%s']\n", job, target)
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &promServer{addr: freePort(t), log: &lockedBuffer{}}
	s.cmd = exec.Command(bin, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+s.addr, "--log.level=warn")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus's log:\n%s", s.log.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, _, err := httpGet("http://" + s.addr + "/-/ready"); err == nil && code == 200 {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30 s:\n%s", s.log.String())
		}
	}
}

func httpGet(u string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// series is one element of an instant vector from Prometheus's HTTP API.
type series struct {
	Metric map[string]string
	Value  float64
}

// query runs an instant query through Prometheus's HTTP API.
func (s *promServer) query(t *testing.T, q string) []series {
	t.Helper()
	code, body, err := httpGet("http://" + s.addr + "/api/v1/query?query=" + url.QueryEscape(q))
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err != nil || json.Unmarshal([]byte(body), &r) != nil || r.Status != "success" || r.Data.ResultType != "vector" {
		t.Fatalf("query %q: %d %v: %s", q, code, err, body)
	}
	out := make([]series, len(r.Data.Result))
	for i, e := range r.Data.Result {
		str, _ := e.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("query %q: value %v", q, e.Value)
		}
		out[i] = series{e.Metric, v}
	}
	return out
}

// value runs a query that yields one series and returns its value, or -1
// when it yields none.
func (s *promServer) value(t *testing.T, q string) float64 {
	t.Helper()
	r := s.query(t, q)
	switch len(r) {
	case 0:
		return -1
	case 1:
		return r[0].Value
	}
	t.Fatalf("query %q: %d series", q, len(r))
	return 0
}

// waitValue waits (at most 15 s) until query q yields want, and fails t
// with the last value otherwise.
func (s *promServer) waitValue(t *testing.T, q string, want func() float64) float64 {
	t.Helper()
	var got, w float64
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got, w = s.value(t, q), want()
		if got == w {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Prometheus has %v after 15 s, want %v", q, got, w)
		}
	}
}

// kernelXDPStats reads the kernel's statistics of every AF_XDP socket
// this process holds, the test's own way: the descriptors in /proc/self/fd
// whose SO_DOMAIN is AF_XDP, each asked getsockopt(SOL_XDP,
// XDP_STATISTICS) directly (this kernel has no XDP sock_diag, which ss
// --xdp would read). It returns the sums and how many sockets it found.
func kernelXDPStats(t *testing.T) (unix.XDPStatistics, int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var sum unix.XDPStatistics
	n := 0
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || dom != unix.AF_XDP {
			continue
		}
		var st unix.XDPStatistics
		size := uint32(unsafe.Sizeof(st))
		if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_STATISTICS,
			uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0); errno != 0 {
			t.Fatalf("getsockopt XDP_STATISTICS on fd %d: %v", fd, errno)
		}
		n++
		sum.Rx_dropped += st.Rx_dropped
		sum.Rx_invalid_descs += st.Rx_invalid_descs
		sum.Tx_invalid_descs += st.Tx_invalid_descs
		sum.Rx_ring_full += st.Rx_ring_full
		sum.Rx_fill_ring_empty_descs += st.Rx_fill_ring_empty_descs
		sum.Tx_ring_empty_descs += st.Tx_ring_empty_descs
	}
	return sum, n
}

// The real thing: Debian's Prometheus scrapes, every second, an xdpnet app
// (a conn with a ConnCollector and a NICCollector, served by promhttp) and
// `xdpio --netns NS exporter DEV lo` (the command, built from the core
// module), while a known number of datagrams is sent. What Prometheus
// stored, read back through its HTTP API, matches the library's own
// counters (conn.Stats), the kernel's XDP statistics (read by the test
// itself with getsockopt) and veth's ethtool -S, drops included: a burst
// sent while the app does not read overflows the sockets' rings, and every
// datagram is accounted for as delivered or dropped, by the conn, by the
// kernel's AF_XDP counters and by veth's; promtool accepts both targets' output;
// every dashboard query runs and finds series; a device deleted while
// Prometheus scrapes shows as scrape_success 0 with both targets still up;
// SIGTERM stops the exporter with status 0.
func TestPrometheusScrapes(t *testing.T) {
	p := connPair(t, 2)
	netnstest.RequireTool(t, "promtool")
	bin := buildXDPIO(t)
	dev := p.B.Link
	const sent, burst = 1000, 3000

	// The app: a conn, its collector and the device's, on 127.0.0.1.
	dst := netip.AddrPortFrom(p.B.IPv4, 9600)
	conn, rd := listenReader(t, p.B, dst)
	reg := prometheus.NewRegistry()
	reg.MustRegister(xdpprom.NewConnCollector("app", conn))
	if err := p.B.Do(func() error {
		c, err := xdpprom.OpenNICCollector(dev)
		if err != nil {
			return err
		}
		t.Cleanup(func() { c.Close() })
		return reg.Register(c)
	}); err != nil {
		t.Fatal(err)
	}
	appLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	appSrv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go appSrv.Serve(appLn)
	t.Cleanup(func() { appSrv.Close() })

	// The exporter: the xdpio command, its listener in this namespace.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exp := exec.CommandContext(ctx, bin, "--netns", p.B.NS, "exporter", dev, "lo", "--listen", "127.0.0.1:0")
	expErr := &lockedBuffer{}
	exp.Stderr = expErr
	stdout, err := exp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exp.Process.Kill(); exp.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`serving http://(\S+)/metrics for `).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("exporter's first line %q: %v; stderr: %s", line, err, expErr.String())
	}
	expAddr := m[1]

	prom := startPrometheus(t, map[string]string{"app": appLn.Addr().String(), "exporter": expAddr})
	prom.waitValue(t, `count(up == 1)`, func() float64 { return 2 })

	// The datagrams, spread over the queues by their source ports.
	for f := range 4 {
		sendUDP(t, p.A, dst, sent/4, 100+f, func() uint64 { return conn.Stats().Total().Datagrams })
	}
	// A burst from one port while the app does not read: one queue's
	// rings fill, and the kernel drops the rest. Paced by what veth's
	// XDP saw, so that none is lost before it.
	xdpSeen := func() uint64 {
		n, _ := netnstest.SumStats(ethtoolS(t, p.B), "rx_queue_", "_xdp_packets")
		return n
	}
	ethBefore := ethtoolS(t, p.B)
	rd.Pause()
	sendUDP(t, p.A, dst, burst, 64, xdpSeen)
	rd.Resume()
	var lib xdpnet.Stats
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		lib = conn.Stats()
		tot := lib.Total()
		if tot.Datagrams+tot.Socket.RXDropped+tot.Socket.RXRingFull >= sent+burst {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the conn delivered %d datagrams, and the kernel dropped %d+%d, of %d sent", tot.Datagrams, tot.Socket.RXDropped, tot.Socket.RXRingFull, sent+burst)
		}
	}
	ethAfter := ethtoolS(t, p.B)
	kx, kxSockets := kernelXDPStats(t)
	var libRx, libDropped, libFull, libFillEmpty uint64
	for _, q := range lib.Queues {
		libRx += q.Socket.RXFrames
		libDropped += q.Socket.RXDropped
		libFull += q.Socket.RXRingFull
		libFillEmpty += q.Socket.RXFillRingEmpty
	}
	vethDelta := func(suffix string) uint64 {
		a, _ := netnstest.SumStats(ethAfter, "rx_queue_", suffix)
		b, _ := netnstest.SumStats(ethBefore, "rx_queue_", suffix)
		return a - b
	}
	redirected, _ := netnstest.SumStats(ethAfter, "rx_queue_", "_xdp_redirect")
	vethDrops, _ := netnstest.SumStats(ethAfter, "rx_queue_", "_drops")
	delivered := lib.Total().Datagrams

	// Every datagram accounted for, three ways.
	if libDropped+libFull == 0 || delivered+libDropped+libFull != sent+burst {
		t.Errorf("the conn delivered %d, the kernel dropped %d (rx_dropped) + %d (rx_ring_full): want some dropped, and %d in all", delivered, libDropped, libFull, sent+burst)
	}
	if kxSockets != 2 || kx.Rx_dropped != libDropped || kx.Rx_ring_full != libFull || kx.Rx_fill_ring_empty_descs != libFillEmpty {
		t.Errorf("getsockopt on the %d AF_XDP sockets: %+v; the library read rx_dropped %d, rx_ring_full %d, fill_ring_empty %d", kxSockets, kx, libDropped, libFull, libFillEmpty)
	}
	if redirected != delivered || vethDrops != libDropped+libFull || vethDelta("_xdp_redirect")+vethDelta("_drops") != burst {
		t.Errorf("veth's XDP redirected %d frames and dropped %d (%d and %d of the burst of %d); the conn delivered %d, the kernel's AF_XDP counters dropped %d", redirected, vethDrops, vethDelta("_xdp_redirect"), vethDelta("_drops"), burst, delivered, libDropped+libFull)
	}

	// What Prometheus stored, against each.
	got := map[string]float64{}
	got["conn datagrams"] = prom.waitValue(t, `sum(xdpio_conn_datagrams_total{conn="app"})`, func() float64 { return float64(delivered) })
	for _, q := range lib.Queues {
		if q.Queue == xdpnet.KernelQueue {
			continue
		}
		qs := strconv.Itoa(q.Queue)
		prom.waitValue(t, `xdpio_xsk_rx_frames_total{device="`+dev+`",queue="`+qs+`"}`, func() float64 { return float64(q.Socket.RXFrames) })
		// veth's per-queue XDP redirects: what its XDP program handed
		// the queue's socket.
		prom.waitValue(t, `xdpio_nic_rx_xdp_redirect_total{job="exporter",device="`+dev+`",queue="`+qs+`"}`, func() float64 {
			return float64(ethAfter["rx_queue_"+qs+"_xdp_redirect"])
		})
	}
	got["xsk rx frames"] = prom.waitValue(t, `sum(xdpio_xsk_rx_frames_total{device="`+dev+`"})`, func() float64 { return float64(libRx) })
	got["veth xdp_redirect (exporter)"] = prom.waitValue(t, `sum(xdpio_nic_rx_xdp_redirect_total{job="exporter",device="`+dev+`"})`, func() float64 { return float64(redirected) })
	got["veth xdp_redirect (app)"] = prom.waitValue(t, `sum(xdpio_nic_rx_xdp_redirect_total{job="app",device="`+dev+`"})`, func() float64 { return float64(redirected) })
	got["veth drops (exporter)"] = prom.waitValue(t, `sum(xdpio_nic_rx_drops_total{job="exporter",device="`+dev+`"})`, func() float64 { return float64(vethDrops) })
	got["veth xdp_packets (exporter)"] = prom.waitValue(t, `sum(xdpio_nic_rx_xdp_packets_total{job="exporter",device="`+dev+`"})`, func() float64 {
		n, _ := netnstest.SumStats(ethtoolS(t, p.B), "rx_queue_", "_xdp_packets")
		return float64(n)
	})
	got["xsk rx_dropped"] = prom.waitValue(t, `sum(xdpio_xsk_rx_drops_total{device="`+dev+`",cause="rx_dropped"})`, func() float64 { return float64(kx.Rx_dropped) })
	got["xsk rx_ring_full"] = prom.waitValue(t, `sum(xdpio_xsk_rx_drops_total{device="`+dev+`",cause="rx_ring_full"})`, func() float64 { return float64(kx.Rx_ring_full) })
	got["xsk fill_ring_empty"] = prom.waitValue(t, `sum(xdpio_xsk_fill_ring_empty_total{device="`+dev+`"})`, func() float64 { return float64(kx.Rx_fill_ring_empty_descs) })
	t.Logf("sent %d datagrams (%d spread over 4 flows, then a burst of %d on one flow while the app did not read)", sent+burst, sent, burst)
	t.Logf("library: conn delivered %d, sockets' RXFrames %d, rx_dropped %d, rx_ring_full %d, fill_ring_empty %d", delivered, libRx, libDropped, libFull, libFillEmpty)
	t.Logf("kernel: getsockopt(XDP_STATISTICS) on %d sockets %+v; veth ethtool -S xdp_redirect %d, drops %d, xdp_packets %d (ARP and IPv6 count there too)",
		kxSockets, kx, redirected, vethDrops, func() uint64 { n, _ := netnstest.SumStats(ethAfter, "rx_queue_", "_xdp_packets"); return n }())
	t.Logf("Prometheus: %v", got)

	// promtool on what each target serves.
	for job, addr := range map[string]string{"app": appLn.Addr().String(), "exporter": expAddr} {
		code, body, err := httpGet("http://" + addr + "/metrics")
		if err != nil || code != 200 {
			t.Fatalf("%s /metrics: %d %v", job, code, err)
		}
		cmd := exec.Command("promtool", "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics (%s): %v\n%s", job, err, out)
		}
	}

	// Every dashboard query runs in this Prometheus and finds series.
	d := readDashboard(t)
	for where, e := range d.exprs("5s") {
		if r := prom.query(t, e); len(r) == 0 {
			t.Errorf("dashboard %s: %q finds no series", where, e)
		}
	}
	for _, n := range d.variableMetrics() {
		if r := prom.query(t, n); len(r) == 0 {
			t.Errorf("dashboard variable: %s finds no series", n)
		}
	}

	// The device goes away while Prometheus scrapes: both targets stay up,
	// the exporter says it could not read the device, the app's conn
	// counters keep their values.
	run(t, p.B, "ip", "link", "del", dev)
	prom.waitValue(t, `max(xdpio_nic_scrape_success{job="exporter",device="`+dev+`",part="stats"})`, func() float64 { return 0 })
	prom.waitValue(t, `max(xdpio_nic_scrape_success{job="app",device="`+dev+`",part="stats"})`, func() float64 { return 0 })
	if v := prom.value(t, `count(up == 1)`); v != 2 {
		t.Errorf("after the deletion: %v targets up, want 2", v)
	}
	if v := prom.value(t, `sum(xdpio_conn_datagrams_total{conn="app"})`); v != float64(delivered) {
		t.Errorf("after the deletion: Prometheus has %v datagrams, want %d", v, delivered)
	}
	if v := prom.value(t, `count(xdpio_nic_rx_xdp_redirect_total{device="`+dev+`"})`); v != -1 {
		// Prometheus marks a series that a scrape no longer has as stale.
		t.Errorf("after the deletion: %v stale NIC series still current", v)
	}

	// SIGTERM: the exporter stops, status 0.
	exp.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- exp.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exporter after SIGTERM: %v\n%s", err, expErr.String())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("exporter still running 10 s after SIGTERM")
	}
	t.Logf("exporter's stderr:\n%s", expErr.String())
}
