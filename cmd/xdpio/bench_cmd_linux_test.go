package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// iperf3JSON is the part of iperf3 -J output the tests read.
type iperf3JSON struct {
	Error string `json:"error"`
	End   struct {
		Sum struct {
			Packets     int64 `json:"packets"`
			LostPackets int64 `json:"lost_packets"`
		} `json:"sum"`
		SumSent struct {
			Packets int64 `json:"packets"`
		} `json:"sum_sent"`
		SumReceived struct {
			Packets     int64 `json:"packets"`
			LostPackets int64 `json:"lost_packets"`
		} `json:"sum_received"`
	} `json:"end"`
}

// A real iperf3 client runs a UDP test against `xdpio bench server`.
func TestBenchServerWithIperf3Client(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, &globals{stdout: &out, stderr: &out}, []string{"bench", "server", "--backend", "socket", "--netns", pair.B.NS, "--port", "15201", "-1"})
	}()
	waitListening(ctx, t, pair.B, 15201)
	res, _ := pair.A.Command(ctx, "iperf3", "-c", pair.B.IPv4.String(), "-p", "15201", "-u", "-b", "10M", "-t", "1", "-J").Output()
	var j iperf3JSON
	if err := json.Unmarshal(res, &j); err != nil || j.Error != "" {
		t.Fatalf("iperf3 client: %v %v: %s", err, j.Error, res)
	}
	if j.End.SumSent.Packets == 0 || j.End.SumReceived.Packets != j.End.SumSent.Packets || j.End.SumReceived.LostPackets != 0 {
		t.Fatalf("iperf3 says sent %d, server received %d, lost %d", j.End.SumSent.Packets, j.End.SumReceived.Packets, j.End.SumReceived.LostPackets)
	}
	if err := <-done; err != nil {
		t.Fatalf("bench server: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "receiver") {
		t.Fatalf("server printed no summary:\n%s", out.String())
	}
}

// `xdpio bench client` runs a UDP test against a real iperf3 server, and
// both report the same count.
func TestBenchClientWithIperf3Server(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ours, theirs, overflow := clientAgainstIperf3(t, pair, 15202, "-t", "1", "-b", "10M")
	sent := ours.End.SumSent.Packets
	r := theirs.End.SumReceived
	if sent == 0 || r.Packets-r.LostPackets+overflow != sent || r.LostPackets > overflow {
		t.Fatalf("we sent %d; iperf3 -s received %d, lost %d of %d; %d overflowed its socket buffer", sent, r.Packets-r.LostPackets, r.LostPackets, r.Packets, overflow)
	}
	t.Logf("sent %d datagrams, iperf3 -s received all but the %d that overflowed its socket buffer", sent, overflow)
}

// clientAgainstIperf3 runs `xdpio bench client` with args (plus the server
// address, port and --json) in namespace A against a real one-off
// `iperf3 -s -J` in B, and returns both JSON reports and the datagrams
// B's kernel refused meanwhile for a full socket buffer (Udp
// RcvbufErrors): iperf3 -s reads one datagram per call from a 208 KiB
// buffer, which overflows when a loaded machine stalls it.
func clientAgainstIperf3(t *testing.T, pair *netnstest.Pair, port int, args ...string) (ours, theirs iperf3JSON, overflow int64) {
	t.Helper()
	overflow0 := netnstest.Counter(t, pair.B, "UdpRcvbufErrors")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", strconv.Itoa(port))
	var srvOut bytes.Buffer
	srv.Stdout = &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	var out bytes.Buffer
	waitListening(ctx, t, pair.B, port)
	all := append([]string{"bench", "client", "-u", "--netns", pair.A.NS, "-c", pair.B.IPv4.String(), "--port", strconv.Itoa(port), "--json"}, args...)
	err := runWith(ctx, &globals{stdout: &out, stderr: &out}, all)
	if err != nil {
		t.Fatalf("bench client: %v\n%s", err, out.String())
	}
	if err := json.Unmarshal(out.Bytes(), &ours); err != nil {
		t.Fatalf("our --json output: %v\n%s", err, out.String())
	}
	srv.Wait()
	if err := json.Unmarshal(srvOut.Bytes(), &theirs); err != nil || theirs.Error != "" {
		t.Fatalf("iperf3 -s output: %v %s", err, srvOut.String())
	}
	return ours, theirs, netnstest.Counter(t, pair.B, "UdpRcvbufErrors") - overflow0
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]uint64{"100M": 100e6, "1.5G": 1.5e9, "64k": 64e3, "1000": 1000} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "-1M", "2000G"} {
		if _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) accepted", bad)
		}
	}
	if got, _ := parseRate("0"); got == 0 {
		t.Error("0 must mean unlimited, not a zero rate")
	}
}

// A real iperf3 client against `xdpio bench server --backend xsk`: the
// control connection runs over the kernel's TCP, the UDP datagrams arrive
// through AF_XDP sockets on both queues (the XDP filter passes the rest to
// the kernel), and in reverse mode the server sends through AF_XDP. No
// kernel UDP socket listens on the test port: a datagram that reached the
// kernel instead of the sockets would be lost and fail the test.
func TestBenchServerXSKWithIperf3Client(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	for _, tc := range []struct {
		name    string
		args    []string
		streams int64
	}{
		{"forward", []string{"-b", "20M", "-P", "4"}, 4},
		{"reverse", []string{"-R", "-b", "10M"}, 1},
		{"ipv6", []string{"-6", "-b", "10M"}, 1},
		{"len64", []string{"-l", "64", "-b", "5M"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out syncBuffer
			done := make(chan error, 1)
			go func() {
				done <- runWith(ctx, &globals{stdout: &out, stderr: &out}, []string{"bench", "server", "--backend", "xsk", "-i", pair.B.Link, "--netns", pair.B.NS, "--port", "15203", "-1"})
			}()
			dst := pair.B.IPv4.String()
			if tc.name == "ipv6" {
				dst = pair.B.IPv6.String()
			}
			var j iperf3JSON
			waitListening(ctx, t, pair.B, 15203)
			args := append([]string{"-c", dst, "-p", "15203", "-u", "-t", "1", "-J"}, tc.args...)
			res, _ := pair.A.Command(ctx, "iperf3", args...).Output()
			if err := json.Unmarshal(res, &j); err != nil || j.Error != "" {
				t.Fatalf("iperf3 client: %v %v: %s\nserver: %s", err, j.Error, res, out.String())
			}
			sent, got, lost := j.End.SumSent.Packets, j.End.SumReceived.Packets, j.End.SumReceived.LostPackets
			if sent == 0 || lost != 0 || got < sent*95/100 || got > sent {
				t.Fatalf("iperf3 says sent %d, received %d, lost %d\nserver: %s", sent, got, lost, out.String())
			}
			if tc.name != "reverse" && got != sent {
				t.Fatalf("server received %d of %d datagrams", got, sent)
			}
			if err := <-done; err != nil {
				t.Fatalf("bench server: %v\n%s", err, out.String())
			}
			// The per-queue line accounts for every datagram (and the
			// 4-byte stream setup ones) on the sockets.
			var perQueue int64
			for _, line := range strings.Split(out.String(), "\n") {
				if rest, ok := strings.CutPrefix(line, "RX queues of "+pair.B.Link+" (AF_XDP):"); ok {
					for _, f := range strings.Split(rest, " pkts") {
						var q, n int64
						if _, err := fmt.Sscanf(strings.TrimSpace(f), "q%d %d", &q, &n); err == nil {
							perQueue += n
						}
					}
				}
			}
			// Each stream's 4-byte setup datagram arrives on the sockets
			// too. In reverse mode only those do: a sending server's RX
			// queues carry nothing of the test, and it lists none.
			want := got + tc.streams
			if tc.name == "reverse" {
				want = 0
				if strings.Contains(out.String(), "RX queues") {
					t.Errorf("a sending server lists its RX queues:\n%s", out.String())
				}
			}
			if perQueue != want {
				t.Fatalf("per-queue counts sum to %d, want %d (received %d + %d stream setups)\n%s", perQueue, want, got, tc.streams, out.String())
			}
			t.Logf("sent %d, received %d, lost %d; sockets counted %d", sent, got, lost, perQueue)
		})
	}
}

// `xdpio bench client --backend xsk` against a real iperf3 server: the
// datagrams leave (and in reverse mode arrive) through AF_XDP sockets on
// the client's interface, and iperf3's own report shows every one.
func TestBenchClientXSKWithIperf3Server(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"forward", []string{"-P", "2", "-b", "10M"}},
		{"reverse", []string{"-R", "-b", "10M"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			args := append([]string{"--backend", "xsk", "-i", pair.A.Link, "-t", "1"}, tc.args...)
			ours, theirs, overflow := clientAgainstIperf3(t, pair, 15204, args...)
			sent, got, lost := ours.End.SumSent.Packets, ours.End.SumReceived.Packets, ours.End.SumReceived.LostPackets
			if tc.name == "forward" {
				// What overflowed iperf3's socket buffer counts as
				// received here: it reached iperf3's host.
				r := theirs.End.SumReceived
				got, lost = r.Packets-r.LostPackets+overflow, r.LostPackets-overflow
			}
			if sent == 0 || lost > 0 || got < sent*95/100 || got > sent {
				t.Fatalf("sent %d, received %d, lost %d\nours: %+v\niperf3: %+v", sent, got, lost, ours.End, theirs.End)
			}
			if tc.name == "forward" && got != sent {
				t.Fatalf("iperf3 -s received %d of the %d we sent", got, sent)
			}
			t.Logf("sent %d, received %d, lost %d", sent, got, lost)
		})
	}
}

// The demo builds its own network, measures both receivers with the same
// sender, and removes everything.
func TestBenchDemo(t *testing.T) {
	netnstest.RequirePriv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, progress bytes.Buffer
	plot := filepath.Join(t.TempDir(), "demo.svg")
	if err := runWith(ctx, &globals{stdout: &out, stderr: &progress}, []string{"bench", "demo", "--duration", "1", "--json", "--plot", plot}); err != nil {
		t.Fatalf("demo: %v\n%s%s", err, out.String(), progress.String())
	}
	// The plot is well-formed SVG with a line per receiver and a bar per
	// queue.
	svg, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("--plot wrote malformed SVG: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	}
	if counts["svg"] != 1 || counts["polyline"] != 6 || counts["rect"] < 3+2*2 {
		t.Errorf("SVG elements %v: want one svg, six polylines (sent and received of each data plane), two frames and a bar per queue of each AF_XDP backend", counts)
	}
	// The chart says why the socket backend has no bars, and its legend
	// is not over the data.
	if !strings.Contains(string(svg), "socket: no bars") || !strings.Contains(string(svg), "(dashed)") {
		t.Errorf("SVG lacks the legend for sent and received, or the note on the socket backend's bars")
	}
	// Progress: one line per phase on stderr.
	if p := progress.String(); strings.Count(p, "demo: [") != 3 || !strings.Contains(p, "demo: done") {
		t.Errorf("progress on stderr:\n%s", p)
	}
	var res struct {
		Results  []demoRow `json:"results"`
		Headline []string  `json:"headline"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("demo --json: %v\n%s", err, out.String())
	}
	if len(res.Results) != 3 || res.Results[0].Backend != "xsk" || res.Results[1].Backend != "asavie" || res.Results[2].Backend != "socket" {
		t.Fatalf("demo results %+v, want xsk, asavie and socket", res.Results)
	}
	for _, r := range res.Results {
		// iperf3's rule: datagrams still in flight when the test ends are
		// neither received nor lost, and so are the tails a full socket
		// buffer dropped after each stream's last received datagram: at
		// most a few rings' or buffers' worth.
		if got := r.RecvPackets + r.LostPackets; r.SentPackets == 0 || r.RecvPackets <= 0 || got > r.SentPackets || got < r.SentPackets-max(16384, r.SentPackets/10) {
			t.Errorf("%s: sent %d, received %d, lost %d: does not add up", r.Backend, r.SentPackets, r.RecvPackets, r.LostPackets)
		}
	}
	if len(res.Headline) == 0 || !strings.Contains(res.Headline[0], "× the kernel socket") {
		t.Errorf("headline %q", res.Headline)
	}
	for _, r := range res.Results {
		if r.SentPPS <= 0 || r.SentPPS < r.PPS*0.9 || len(r.SentIntervals) == 0 || r.Sender != r.Backend || r.Receiver != r.Backend {
			t.Errorf("%s: sent %.0f/s, received %.0f/s, %d sender intervals, sender %q receiver %q", r.Backend, r.SentPPS, r.PPS, len(r.SentIntervals), r.Sender, r.Receiver)
		}
	}
	for _, r := range res.Results {
		// The CPU figures are there and consistent: the threads' time is
		// part of the cores' busy time (sampled in ticks, so loosely).
		if r.CPUPerPacket <= 0 || r.RecvThreadPerPacket <= 0 || r.SendThreadPerPacket <= 0 || len(r.Cores) < 2 ||
			r.CPUPerPacket < 0.5*(r.RecvThreadPerPacket+r.SendThreadPerPacket) {
			t.Errorf("%s: CPU per packet %.0f ns (rx thread %.0f, tx thread %.0f), %d core lines", r.Backend, r.CPUPerPacket, r.RecvThreadPerPacket, r.SendThreadPerPacket, len(r.Cores))
		}
	}
	// The AF_XDP client sends stream i through TX queue i mod N, which on
	// veth is the peer's RX queue: every queue gets its share.
	var perQueue uint64
	for _, q := range res.Results[0].Queues {
		perQueue += q.Packets
		if q.Packets < uint64(res.Results[0].RecvPackets)/8 {
			t.Errorf("xsk queue %d got %d of %d packets: flows not spread", q.Queue, q.Packets, res.Results[0].RecvPackets)
		}
	}
	if perQueue < uint64(res.Results[0].RecvPackets) {
		t.Errorf("xsk per-queue counts %d < received %d", perQueue, res.Results[0].RecvPackets)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), netnstest.Prefix+strconv.Itoa(os.Getpid())) {
		t.Errorf("the demo left namespaces behind:\n%s", out)
	}
}

// TestBenchErrors: what a user gets wrong or cannot have gives one line
// naming it and an operation error (exit 1), with nothing left attached:
// an unknown interface, a control port in use, a server nobody answers
// for, and (in TestHelperBenchUnprivileged) a missing privilege.
func TestBenchErrors(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var busy net.Listener
	if err := pair.B.Do(func() (err error) {
		busy, err = net.Listen("tcp", ":15231")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	setpriv := netnstest.RequireTool(t, "setpriv")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"server unknown interface", []string{"bench", "server", "--netns", pair.B.NS, "--backend", "xsk", "-i", "nosuch0", "-1"}, "nosuch0"},
		{"client unknown interface", []string{"bench", "client", "--netns", pair.A.NS, "--backend", "xsk", "-i", "nosuch0", "-c", pair.B.IPv4.String(), "--port", "15231", "-t", "1"}, "nosuch0"},
		{"port in use", []string{"bench", "server", "--netns", pair.B.NS, "--backend", "xsk", "-i", pair.B.Link, "--port", "15231", "-1"}, "address already in use"},
		{"server unreachable", []string{"bench", "client", "--netns", pair.A.NS, "-c", "198.18.0.99", "--port", "15231", "-t", "1"}, "198.18.0.99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runWith(ctx, &globals{stdout: &out, stderr: &out}, tc.args)
			var ue *usageError
			if err == nil || errors.As(err, &ue) {
				t.Fatalf("error %v (usage %v), want an operation error\n%s", err, errors.As(err, &ue), out.String())
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q: want one line that names %q", msg, tc.want)
			}
		})
	}
	// Without privilege, in B as nobody with no capabilities.
	cmd := pair.B.Command(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", os.Args[0], "-test.run=^TestHelperBenchUnprivileged$")
	cmd.Env = append(os.Environ(), "XDPIO_HELPER_BENCH_IFACE="+pair.B.Link)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "result: operation error: ") || !strings.Contains(string(out), "run as root") {
		t.Errorf("unprivileged bench server: %v\n%s", err, out)
	}
	for _, h := range []*netnstest.Host{pair.A, pair.B} {
		if err := h.Do(func() error {
			l, err := netlink.LinkByName(h.Link)
			if err != nil {
				return err
			}
			if x := l.Attrs().Xdp; x != nil && x.Attached {
				t.Errorf("%s: an XDP program (id %d) was left attached", h.Link, x.ProgId)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelperBenchUnprivileged runs in TestBenchErrors's child process,
// without privileges: the xsk server must refuse to start and say why.
func TestHelperBenchUnprivileged(t *testing.T) {
	iface := os.Getenv("XDPIO_HELPER_BENCH_IFACE")
	if iface == "" {
		t.Skip("helper of TestBenchErrors")
	}
	var out bytes.Buffer
	err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, []string{"bench", "server", "--backend", "xsk", "-i", iface, "--port", "15232", "-1"})
	var ue *usageError
	if err != nil && !errors.As(err, &ue) && !strings.Contains(err.Error(), "\n") {
		fmt.Printf("result: operation error: %v\n", err)
	} else {
		fmt.Printf("result: unexpected: %v\n", err)
	}
}

// waitListening waits until something listens on TCP port in h's
// namespace (as ss sees it), so a client connects once, to a server that
// is up, and any failure it meets is a real one.
func waitListening(ctx context.Context, t *testing.T, h *netnstest.Host, port int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		out, err := h.Command(ctx, "ss", "-Hltn", "sport = :"+strconv.Itoa(port)).Output()
		if err == nil && len(bytes.TrimSpace(out)) > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on TCP port %d in %s after 15 s", port, h.NS)
}

// TestBenchClientResolvesNames: -c takes a name, resolved in the family
// -4 or -6 asks for (localhost: 127.0.0.1 or ::1, from /etc/hosts); a
// name without an address of that family is one clear error.
func TestBenchClientResolvesNames(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{})
	cases := []struct{ flag, addr string }{{"-4", "127.0.0.1"}}
	if a, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip6", "localhost"); err == nil && len(a) > 0 && a[0] == netip.IPv6Loopback() {
		cases = append(cases, struct{ flag, addr string }{"-6", "::1"})
	} else {
		// This machine's /etc/hosts names no IPv6 localhost.
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, []string{"bench", "client", "-c", "localhost", "-6", "-t", "1"})
		var ue *usageError
		if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "localhost") || strings.Contains(err.Error(), "\n") {
			t.Errorf("-6 localhost without an IPv6 entry: %v, want one operation error naming it", err)
		}
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		srv := pair.A.Command(ctx, "iperf3", "-s", "-1", "-B", tc.addr, "-p", "15261")
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		waitListening(ctx, t, pair.A, 15261)
		var out bytes.Buffer
		err := runWith(ctx, &globals{stdout: &out, stderr: &out}, []string{"bench", "client", "-u", "--netns", pair.A.NS, "-c", "localhost", tc.flag,
			"--port", "15261", "-t", "1", "-b", "1M", "--json"})
		srv.Process.Kill()
		srv.Wait()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.flag, err, out.String())
		}
		var rep bench.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Start.ConnectingTo == nil || rep.Start.ConnectingTo.Host != tc.addr {
			t.Errorf("%s: connected to %+v (%v), want %s", tc.flag, rep.Start.ConnectingTo, err, tc.addr)
		}
	}
}

// serveOnce runs `xdpio bench server ... -1 --json` in namespace B on port
// and one `xdpio bench client ... --json` from A against it, and returns
// both reports.
func serveOnce(t *testing.T, pair *netnstest.Pair, port int, serverArgs, clientArgs []string) (srv, cli bench.Report) {
	t.Helper()
	srvOut, out := serveOnceText(t, pair, port, append([]string{"--json"}, serverArgs...), append([]string{"--json"}, clientArgs...))
	if err := json.Unmarshal([]byte(srvOut), &srv); err != nil {
		t.Fatalf("server --json: %v\n%s", err, srvOut)
	}
	if err := json.Unmarshal([]byte(out), &cli); err != nil {
		t.Fatalf("client --json: %v\n%s", err, out)
	}
	return srv, cli
}

// serveOnceText runs a one-off server in B and a client in A with their
// args, and returns what each printed.
func serveOnceText(t *testing.T, pair *netnstest.Pair, port int, serverArgs, clientArgs []string) (srv, cli string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps := strconv.Itoa(port)
	var srvOut syncBuffer
	done := make(chan error, 1)
	go func() {
		args := append([]string{"bench", "server", "--netns", pair.B.NS, "--port", ps, "-1"}, serverArgs...)
		done <- runWith(ctx, &globals{stdout: &srvOut, stderr: &srvOut}, args)
	}()
	waitListening(ctx, t, pair.B, port)
	var out bytes.Buffer
	args := append([]string{"bench", "client", "--netns", pair.A.NS, "-c", pair.B.IPv4.String(), "--port", ps, "-t", "1"}, clientArgs...)
	if err := runWith(ctx, &globals{stdout: &out, stderr: &out}, args); err != nil {
		t.Fatalf("client: %v\n%s", err, out.String())
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v\n%s", err, srvOut.String())
	}
	return srvOut.String(), out.String()
}

// allReceived fails the test unless the server received every datagram
// the client sent.
func allReceived(t *testing.T, srv bench.Report) {
	t.Helper()
	sent, got := srv.End.SumSent.Packets, srv.End.SumReceived.Packets
	if sent == 0 || got != sent || srv.End.SumReceived.LostPackets != 0 {
		t.Fatalf("sent %d, received %d, lost %d", sent, got, srv.End.SumReceived.LostPackets)
	}
}

// TestBenchClientPlacement: `bench client --rss-queues 2 -P 4` gives two
// streams to each queue; on veth (no RSS, the peer receives on the
// queue a frame was sent from) the AF_XDP server's per-queue counts, in
// its --json report, show that spread.
func TestBenchClientPlacement(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	srv, cli := serveOnce(t, pair, 15209, []string{"--backend", "xsk", "-i", pair.B.Link},
		[]string{"-u", "--backend", "xsk", "-i", pair.A.Link, "-P", "4", "-b", "2M", "-l", "200", "--rss-queues", "2"})
	perQueue := map[uint32]int{}
	for _, p := range cli.Start.Placement {
		perQueue[p.Queue]++
	}
	if len(cli.Start.Placement) != 4 || perQueue[0] != 2 || perQueue[1] != 2 {
		t.Fatalf("placement %+v: want two streams on each of queues 0 and 1", cli.Start.Placement)
	}
	if len(srv.End.RXQueues) != 2 {
		t.Fatalf("server report rx_queues %+v: want 2 queues", srv.End.RXQueues)
	}
	var total uint64
	for _, q := range srv.End.RXQueues {
		total += q.Packets
	}
	if got := srv.End.SumReceived.Packets; total < uint64(got) || got == 0 {
		t.Fatalf("server queues %+v hold less than the %d datagrams received", srv.End.RXQueues, got)
	}
	for _, q := range srv.End.RXQueues {
		if q.Packets < total*4/10 {
			t.Errorf("queue %d got %d of %d datagrams: the placed streams did not spread (%+v)", q.Queue, q.Packets, total, srv.End.RXQueues)
		}
	}
}

// TestBenchServerCoalescing: `bench server --rx-usecs 200` batches each
// queue: every datagram still arrives, batches hold more than one frame,
// and the server's --json report carries each queue's coalescing
// counters with the delay frames waited.
func TestBenchServerCoalescing(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	// 2 streams of 10k datagrams/s (100 bytes at 8 Mbit/s).
	srv, _ := serveOnce(t, pair, 15241, []string{"--backend", "xsk", "-i", pair.B.Link, "--rx-usecs", "200"},
		[]string{"-u", "--backend", "socket", "-P", "2", "-b", "8M", "-l", "100"})
	allReceived(t, srv)
	var batches, frames uint64
	for _, q := range srv.End.RXQueues {
		c := q.Coalesce
		if c == nil {
			t.Fatalf("queue %d: no coalescing counters in %+v", q.Queue, q)
		}
		batches += c.Batches
		frames += c.Frames
		if c.Frames > 0 && (c.Delay.Count == 0 || c.Delay.Max == 0) {
			t.Errorf("queue %d: %d frames but no delay recorded: %+v", q.Queue, c.Frames, c.Delay)
		}
	}
	// The frames the receivers handed over include the 3 setup datagrams.
	if got := srv.End.SumReceived.Packets; frames < uint64(got) || batches == 0 || batches*3/2 > frames {
		t.Errorf("%d frames in %d batches for %d datagrams: want every datagram, more than 1.5 frames per batch", frames, batches, got)
	}
}

// TestBenchServerOneReader: `bench server --one-reader` reads both queues
// in one goroutine: streams placed on both queues all arrive, each queue's
// count is reported, and with --rx-usecs one coalescing policy batches
// the frames of both (its counters come with the first queue).
func TestBenchServerOneReader(t *testing.T) {
	for i, extra := range [][]string{nil, {"--rx-usecs", "200"}} {
		t.Run(strings.Join(append([]string{"one-reader"}, extra...), " "), func(t *testing.T) {
			pair := netnstest.New(t, netnstest.Config{Queues: 2})
			srv, _ := serveOnce(t, pair, 15281+10*i, append([]string{"--backend", "xsk", "-i", pair.B.Link, "--one-reader"}, extra...),
				[]string{"-u", "--backend", "xsk", "-i", pair.A.Link, "-P", "2", "-b", "8M", "-l", "100", "--rss-queues", "2"})
			allReceived(t, srv)
			qs := srv.End.RXQueues
			if len(qs) != 2 || qs[0].Packets == 0 || qs[1].Packets == 0 {
				t.Fatalf("rx_queues %+v: want both queues to have received", qs)
			}
			if extra == nil {
				return
			}
			c := qs[0].Coalesce
			if c == nil || qs[1].Coalesce != nil {
				t.Fatalf("rx_queues %+v: want the group's coalescing counters with the first queue only", qs)
			}
			got := srv.End.SumReceived.Packets
			if c.Frames < uint64(got) || c.Batches == 0 || c.Batches*3/2 > c.Frames {
				t.Errorf("%d frames in %d batches for %d datagrams: want every datagram, more than 1.5 frames per batch", c.Frames, c.Batches, got)
			}
		})
	}
}

// TestBenchServerQueues: `bench server --queues 1` binds queue 1 only;
// streams the client places on queue 1 (--rss-table 1) all arrive there,
// and the report lists that one queue.
func TestBenchServerQueues(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	srv, _ := serveOnce(t, pair, 15251, []string{"--backend", "xsk", "-i", pair.B.Link, "--queues", "1"},
		[]string{"-u", "--backend", "xsk", "-i", pair.A.Link, "-P", "2", "-b", "2M", "-l", "200", "--rss-table", "1"})
	allReceived(t, srv)
	got := srv.End.SumReceived.Packets
	// A client's first datagrams may leave through its kernel socket while
	// it resolves the server's hop (xdpnet never waits for ARP); veth then
	// delivers them on whichever queue the kernel sent them from, and the
	// server's kernel socket takes what is not on queue 1. A handful, no
	// more.
	if q := srv.End.RXQueues; len(q) != 1 || q[0].Queue != 1 || q[0].Packets+8 < uint64(got) {
		t.Fatalf("rx_queues %+v for %d datagrams received: want queue 1 alone with all of them but the first few", q, got)
	}
}

// TestBenchAsavieBackend: --backend asavie at both ends (asavie/xdp
// v0.3.3, the Go peer) runs a test with every datagram received, placed
// streams spread over both queues, and per-queue counts in the server's
// report.
func TestBenchAsavieBackend(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	srv, _ := serveOnce(t, pair, 15271, []string{"--backend", "asavie", "-i", pair.B.Link},
		[]string{"-u", "--backend", "asavie", "-i", pair.A.Link, "-P", "2", "-b", "2M", "-l", "200", "--rss-queues", "2"})
	allReceived(t, srv)
	if q := srv.End.RXQueues; len(q) != 2 || q[0].Packets == 0 || q[1].Packets == 0 {
		t.Errorf("rx_queues %+v: want both queues to have received", q)
	}
}

// TestBenchClientReverseQueues: with -R the AF_XDP client receives, and
// its --json report says what each of its RX queues took, which accounts
// for every datagram it received.
func TestBenchClientReverseQueues(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	_, cli := serveOnce(t, pair, 15291, []string{"--backend", "xsk", "-i", pair.B.Link},
		[]string{"-u", "--backend", "xsk", "-i", pair.A.Link, "-R", "-P", "2", "-b", "2M", "-l", "200"})
	got := cli.End.SumReceived.Packets
	var total uint64
	for _, q := range cli.End.RXQueues {
		total += q.Packets
	}
	if len(cli.End.RXQueues) != 2 || got == 0 || total < uint64(got) {
		t.Errorf("client rx_queues %+v for %d datagrams received: want both queues listed, accounting for all", cli.End.RXQueues, got)
	}
}
