package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/bench"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// endRows returns the end-of-test block's rows of a text report as
// "ID INTERVAL TAG" (the lines after the "- - -" separator that end in
// sender or receiver), and each row's bit rate.
func endRows(out string) (rows, rates []string) {
	_, block, _ := strings.Cut(out, "- - - - -")
	for _, l := range strings.Split(block, "\n") {
		f := strings.Fields(strings.NewReplacer("[", "", "]", "").Replace(l))
		if len(f) < 8 || (f[len(f)-1] != "sender" && f[len(f)-1] != "receiver") {
			continue
		}
		rows = append(rows, f[0]+" "+f[1]+" "+f[len(f)-1])
		rates = append(rates, f[5]+" "+f[6])
	}
	return rows, rates
}

// bitsPerSec reads a rate as iperf3 prints it ("9.99 Mbits/sec"), 0 for
// anything else.
func bitsPerSec(s string) float64 {
	num, unit, _ := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0
	}
	switch unit {
	case "Kbits/sec":
		v *= 1e3
	case "Mbits/sec":
		v *= 1e6
	case "Gbits/sec":
		v *= 1e9
	}
	return v
}

// oneServer runs `bench server -1` in B on port with args; the returned
// function waits for it and returns what it printed and its error.
func oneServer(ctx context.Context, t *testing.T, pair *netnstest.Pair, port int, args ...string) func() (string, error) {
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, &globals{stdout: &out, stderr: &out},
			append([]string{"bench", "server", "--netns", pair.B.NS, "--port", strconv.Itoa(port), "-1"}, args...))
	}()
	waitListening(ctx, t, pair.B, port)
	return func() (string, error) { err := <-done; return out.String(), err }
}

// TestBenchEndBlockLikeIperf3: with -P 2 our client's end-of-test block
// has iperf3's rows (each stream's sender and receiver, then [SUM]'s),
// numbered as a real iperf3 client numbers them against the same server,
// and its receiver rows span the sender's window, as iperf3's do: a test
// without losses shows the same rate on both. Its --json numbers the
// streams as iperf3's text does.
func TestBenchEndBlockLikeIperf3(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	testArgs := []string{"-u", "-P", "2", "-t", "1", "-b", "10M", "-l", "1000"}

	wait := oneServer(ctx, t, pair, 15301, "--backend", "socket")
	ref, err := pair.A.Command(ctx, "iperf3", append([]string{"-c", pair.B.IPv4.String(), "-p", "15301"}, testArgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("iperf3 -c: %v\n%s", err, ref)
	}
	if out, err := wait(); err != nil {
		t.Fatalf("server: %v\n%s", err, out)
	}
	wantRows, _ := endRows(string(ref))
	if len(wantRows) != 6 {
		t.Fatalf("iperf3's end block: %q\n%s", wantRows, ref)
	}

	wait = oneServer(ctx, t, pair, 15302, "--backend", "socket")
	var out bytes.Buffer
	err = runWith(ctx, &globals{stdout: &out, stderr: &out}, append([]string{"bench", "client", "--netns", pair.A.NS, "-c", pair.B.IPv4.String(), "--port", "15302"}, testArgs...))
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out.String())
	}
	srvOut, err := wait()
	if err != nil {
		t.Fatalf("server: %v\n%s", err, srvOut)
	}
	rows, _ := endRows(out.String())
	if !reflect.DeepEqual(rows, wantRows) {
		t.Errorf("our client's end block %q, iperf3's %q\n%s\niperf3:\n%s", rows, wantRows, out.String(), ref)
	}
	// Each receiver row right after its sender row: same rate when
	// nothing was lost (the server's own block too).
	for name, text := range map[string]string{"client": out.String(), "server": srvOut} {
		if strings.Contains(text, "0/") {
			_, rates := endRows(text)
			for i := 0; i+1 < len(rates); i += 2 {
				// The same to rounding: 10.0 and 9.99 Mbits/sec are.
				if a, b := bitsPerSec(rates[i]), bitsPerSec(rates[i+1]); a == 0 || b < a*0.99 || b > a*1.01 {
					t.Errorf("%s: sender at %s, receiver at %s, in a test without losses:\n%s", name, rates[i], rates[i+1], text)
				}
			}
		}
	}

	wait = oneServer(ctx, t, pair, 15303, "--backend", "socket")
	out.Reset()
	err = runWith(ctx, &globals{stdout: &out, stderr: &bytes.Buffer{}}, append([]string{"bench", "client", "--json", "--netns", pair.A.NS, "-c", pair.B.IPv4.String(), "--port", "15303"}, testArgs...))
	if err != nil {
		t.Fatalf("client --json: %v\n%s", err, out.String())
	}
	if s, err := wait(); err != nil {
		t.Fatalf("server: %v\n%s", err, s)
	}
	var r bench.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	var want []int // iperf3's text ids, in order
	for _, row := range wantRows {
		if n, err := strconv.Atoi(strings.Fields(row)[0]); err == nil && strings.HasSuffix(row, "sender") {
			want = append(want, n)
		}
	}
	var conn, end, iv []int
	for _, c := range r.Start.Connected {
		conn = append(conn, c.Socket)
	}
	for _, s := range r.End.Streams {
		end = append(end, s.UDP.Socket)
	}
	for _, s := range r.Intervals[0].Streams {
		iv = append(iv, s.Socket)
	}
	if !reflect.DeepEqual(conn, want) || !reflect.DeepEqual(end, want) || !reflect.DeepEqual(iv, want) {
		t.Errorf("JSON sockets: connected %v, end %v, intervals %v; iperf3 shows %v", conn, end, iv, want)
	}
}

// TestBenchSenderServerQueues: a server that sends (-R) lists no RX
// queues, which carried nothing of the test; a receiving one does.
func TestBenchSenderServerQueues(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	for i, rev := range []bool{true, false} {
		args := []string{"-u", "--backend", "socket", "-b", "2M", "-l", "200"}
		if rev {
			args = append(args, "-R")
		}
		srv, _ := serveOnceText(t, pair, 15305+i, []string{"--backend", "xsk", "-i", pair.B.Link}, args)
		if got := strings.Contains(srv, "RX queues of"); got == rev {
			t.Errorf("-R %v: server lists its RX queues: %v, want %v\n%s", rev, got, !rev, srv)
		}
	}
}

// TestBenchFailedJSON: -J on a test that could not connect prints what
// iperf3 -J prints then (the same keys, empty connected, intervals and
// end, and the error), and the error once, in one line, saying each
// thing once.
func TestBenchFailedJSON(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	port := freePort(t)
	ref, _ := exec.CommandContext(ctx, "iperf3", "-c", "127.0.0.1", "-p", port, "-u", "-J").Output()
	var want, got map[string]any
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatalf("iperf3 -J: %v\n%s", err, ref)
	}
	var out, errOut bytes.Buffer
	err := runWith(ctx, &globals{stdout: &out, stderr: &errOut}, []string{"bench", "client", "-u", "--json", "-c", "127.0.0.1", "--port", port, "-t", "1"})
	if err == nil {
		t.Fatal("no error")
	}
	if msg := "bench client: connect to 127.0.0.1:" + port + ": connection refused"; err.Error() != msg {
		t.Errorf("error %q, want %q", err, msg)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr %q: the caller prints the error, once", errOut.String())
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	for _, k := range []string{"start", "intervals", "end", "error"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q: %s", k, out.String())
		}
		if k != "start" && k != "error" && !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s %v, iperf3 prints %v", k, got[k], want[k])
		}
	}
	if s, _ := got["start"].(map[string]any); s == nil || !reflect.DeepEqual(s["connected"], []any{}) {
		t.Errorf("start %v: want connected [] as iperf3", got["start"])
	}
	if e, _ := got["error"].(string); !strings.Contains(e, "connection refused") {
		t.Errorf("error %q", got["error"])
	}
}

// TestBenchClientInterrupted: Ctrl-C during a test prints the summary
// and ends with "interrupted" (exit 1, as iperf3); the server says once
// that the client terminated.
func TestBenchClientInterrupted(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := oneServer(ctx, t, pair, 15307, "--backend", "socket")
	cctx, stop := context.WithCancel(ctx)
	time.AfterFunc(1500*time.Millisecond, stop)
	var out bytes.Buffer
	err := runWith(cctx, &globals{stdout: &out, stderr: &out}, []string{"bench", "client", "-u", "--netns", pair.A.NS, "-c", pair.B.IPv4.String(), "--port", "15307", "-t", "10", "-b", "1M"})
	if err == nil || err.Error() != "bench client: interrupted" || exitStatus(err) != 1 {
		t.Errorf("error %v (exit %d), want bench client: interrupted, exit 1\n%s", err, exitStatus(err), out.String())
	}
	if !strings.Contains(out.String(), "receiver") {
		t.Errorf("no summary:\n%s", out.String())
	}
	_, serr := wait()
	if serr == nil || serr.Error() != "bench server: "+errors.Unwrap(serr).Error() || strings.Count(serr.Error(), "server") != 1 || !strings.Contains(serr.Error(), "terminated") {
		t.Errorf("server error %v: want the client's termination, said once", serr)
	}
}
