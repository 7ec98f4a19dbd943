package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// --cookie-timeout must be a positive duration: anything else is a usage
// error that names the flag.
func TestBenchServerCookieTimeoutFlag(t *testing.T) {
	for _, v := range []string{"0", "0s", "-1s", "-1ns", "soon"} {
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, []string{"bench", "server", "--backend", "socket", "--cookie-timeout", v})
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--cookie-timeout") {
			t.Errorf("--cookie-timeout %s: %v (usage error %v), want a usage error naming the flag", v, err, errors.As(err, &ue))
		}
	}
}

// `bench server -1 --cookie-timeout` on loopback: a connection that never
// sends its cookie is closed after the timeout and does not use up the one
// test; the client after it is served at once.
func TestBenchServerSilentConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var srvOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, &globals{stdout: &srvOut, stderr: &srvOut},
			[]string{"bench", "server", "--backend", "socket", "--bind", "127.0.0.1", "--port", port, "-1", "--cookie-timeout", "300ms"})
	}()
	var silent net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		if silent, err = net.Dial("tcp", "127.0.0.1:"+port); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	var cliOut bytes.Buffer
	if err := runWith(ctx, &globals{stdout: &cliOut, stderr: &cliOut},
		[]string{"bench", "client", "-u", "--backend", "socket", "-c", "127.0.0.1", "--port", port, "-t", "1", "-b", "1M", "-l", "200"}); err != nil {
		t.Fatalf("client after a silent connection: %v\n%s", err, cliOut.String())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the 1 s test took %v", d)
	}
	silent.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("silent connection: read %d bytes, %v; want it closed by the server", n, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v\n%s", err, srvOut.String())
	}
}

// freePort returns a loopback TCP port nothing listens on.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// The text a user reads, on loopback: iperf3's -u, -f and interval flags
// taken, one header over each block of lines, no [SUM] line for one
// stream, jitter and loss on the receiver's line only.
func TestBenchTextOutput(t *testing.T) {
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var srvOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, &globals{stdout: &srvOut, stderr: &srvOut},
			[]string{"bench", "server", "--backend", "socket", "--bind", "127.0.0.1", "--port", port, "-1"})
	}()
	var cliOut bytes.Buffer
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cliOut.Reset()
		err = runWith(ctx, &globals{stdout: &cliOut, stderr: &cliOut},
			[]string{"bench", "client", "-u", "-c", "127.0.0.1", "--port", port, "-t", "1", "-b", "2M", "-l", "200", "-f", "k", "--interval", "0.5"})
		if err == nil || !strings.Contains(err.Error(), "refused") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("client: %v\n%s", err, cliOut.String())
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v\n%s", err, srvOut.String())
	}
	for name, out := range map[string]string{"client": cliOut.String(), "server": srvOut.String()} {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var headers, intervals, sep int
		for i, l := range lines {
			switch {
			case strings.HasPrefix(l, "[ ID]"):
				headers++
				if i+1 == len(lines) || !strings.HasPrefix(lines[i+1], "[  5]") {
					t.Errorf("%s: a header with no row under it (line %d)", name, i+1)
				}
			case strings.HasPrefix(l, "- - -"):
				sep++
			case strings.HasPrefix(l, "[  5]") && sep == 0:
				intervals++
				if name == "client" && !strings.Contains(l, "Kbits/sec") {
					t.Errorf("%s: -f k: %q", name, l)
				}
			}
		}
		// The server reports each second (its own --interval).
		if headers != 2 || sep != 1 || intervals < 2 && name == "client" || intervals < 1 || strings.Contains(out, "[SUM]") || strings.Contains(out, "error") {
			t.Errorf("%s: %d headers, %d separators, %d interval lines (want 2, 1, ≥ 2 at --interval 0.5, no [SUM], no error):\n%s", name, headers, sep, intervals, out)
		}
		var sender, receiver string
		for _, l := range lines {
			if strings.HasSuffix(l, "  sender") {
				sender = l
			}
			if strings.HasSuffix(l, "  receiver") {
				receiver = l
			}
		}
		if sender == "" || strings.Contains(sender, " ms ") || !strings.Contains(receiver, " ms ") || !strings.Contains(receiver, "(0%)") {
			t.Errorf("%s: sender line %q, receiver line %q: want jitter and loss on the receiver's only", name, sender, receiver)
		}
	}
}

// A run that fails before it measures anything prints its error once, in
// one line, and no report; under -J stdout holds one JSON document.
func TestBenchFailedRun(t *testing.T) {
	port := freePort(t)
	var out, errOut bytes.Buffer
	err := runWith(context.Background(), &globals{stdout: &out, stderr: &errOut},
		[]string{"bench", "client", "-c", "127.0.0.1", "--port", port, "-t", "1"})
	if exitStatus(err) != 1 || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %v (status %d): want one line saying the connection was refused, status 1", err, exitStatus(err))
	}
	if o := out.String(); strings.Count(o, "\n") != 1 || !strings.HasPrefix(o, "Connecting to 127.0.0.1:"+port) || errOut.Len() != 0 {
		t.Errorf("stdout %q, stderr %q: want the Connecting line only", o, errOut.String())
	}
	out.Reset()
	err = runWith(context.Background(), &globals{stdout: &out, stderr: &errOut},
		[]string{"bench", "client", "-J", "-c", "127.0.0.1", "--port", port, "-t", "1"})
	var v map[string]any
	if jerr := json.Unmarshal(out.Bytes(), &v); err == nil || jerr != nil || v["error"] == nil {
		t.Errorf("-J: %v; stdout %q (%v): want one JSON object with the error", err, out.String(), jerr)
	}
}

// iperf3's flags that mean something else here, or that are mistyped,
// are usage errors that say what to use, before anything connects.
func TestBenchIperf3Flags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "client", "-c", "198.18.0.99", "-i", "1"}, "--interval 1"},
		{[]string{"bench", "server", "-i", "0.5"}, "--interval 0.5"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-f", "x"}, "k, m, g, t"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-f", "mm"}, "k, m, g, t"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "--interval", "0.01"}, "0.1-60"},
		{[]string{"bench", "server", "--interval", "61"}, "0.1-60"},
	} {
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, tc.args)
		if exitStatus(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (status %d), want status 2 and %q", tc.args, err, exitStatus(err), tc.want)
		}
	}
}

// The usage line and help name --backend auto, the default, and say what
// it picks, which is what dataPlane picks.
func TestBenchBackendAutoHelp(t *testing.T) {
	for _, sub := range []string{"server", "client"} {
		var out bytes.Buffer
		if err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, []string{"bench", sub, "--help"}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "--backend auto|xsk|socket|asavie|gvisor-xdp") || !strings.Contains(out.String(), "auto (xsk when -i IFACE is given, socket otherwise)") {
			t.Errorf("bench %s --help:\n%s", sub, out.String())
		}
	}
	g := &globals{}
	for iface, want := range map[string]string{"": "socket", "veth0": "xsk"} {
		if _, got, err := g.dataPlane("auto", iface, nil); err != nil || got != want {
			t.Errorf("auto with -i %q: %s, %v; the help says %s", iface, got, err, want)
		}
	}
}

// Flags that do not go with the test or the backend asked for are usage
// errors (exit 2) that say why, before anything is opened: UDP's flags
// without -u (TCP being the default), the netstack's with -u or without
// the xsk backend, a backend without TCP, values out of range.
func TestBenchTCPUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "client", "-c", "198.18.0.99", "--udp-counters-32bit"}, "--udp-counters-32bit: about UDP tests: give -u"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "--rss-queues", "2"}, "--rss-queues: about UDP tests: give -u"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "--backend", "asavie", "-i", "eth9"}, "--backend asavie has no TCP stack"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-u", "-i", "eth9", "--tso", "off"}, "--tso: about a TCP test's netstack: not with -u"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-u", "-i", "eth9", "--rx-usecs", "50", "--tx-frames", "8"}, "--rx-usecs, --tx-frames: about a TCP test's netstack"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "--backend", "socket", "--rx-csum", "off"}, "--rx-csum: about xdpio's AF_XDP queues and netstack: they need the xsk backend"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "--queues", "0"}, "--queues: about xdpio's AF_XDP queues and netstack: they need the xsk backend"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-i", "eth9", "--tso", "maybe"}, `--tso "maybe": want on or off`},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-i", "eth9", "--rx-csum", "1"}, `--rx-csum "1": want on or off`},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-i", "eth9", "--tx-usecs", "-1"}, "--tx-usecs 0-1000000"},
		{[]string{"bench", "client", "-c", "198.18.0.99", "-l", "0"}, "-l 0: a TCP test reads and writes 1 byte to 1 MiB"},
		{[]string{"bench", "server", "--backend", "socket", "--tso", "off"}, "--tso: about xdpio's AF_XDP queues and netstack: they need the xsk backend"},
		{[]string{"bench", "server", "--backend", "socket", "--tx-usecs", "20"}, "--tx-usecs: about xdpio's AF_XDP queues and netstack"},
		{[]string{"bench", "server", "-i", "eth9", "--rx-csum", "maybe"}, `--rx-csum "maybe": want on or off`},
		{[]string{"bench", "server", "-i", "eth9", "--tx-frames", "-2"}, "--tx-usecs 0-1000000 and --tx-frames ≥ 0"},
	} {
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, tc.args)
		if exitStatus(err) != 2 || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (status %d), want status 2 and %q", tc.args, err, exitStatus(err), tc.want)
		}
	}
}
