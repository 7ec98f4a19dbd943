package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// A real iperf3 TCP test (iperf3 -c without -u, its default) against
// `xdpio bench server` on the xsk backend runs on netstack, and iperf3's
// -J shows the server received what it sent; then, with no sleep between
// them, ten iperf3 UDP clients in a row are each served at once by the
// same server (none is told the server is busy).
func TestBenchServerIperf3TCPAndBackToBack(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	srvCtx, stop := context.WithCancel(ctx)
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runWith(srvCtx, &globals{stdout: &out, stderr: &errOut},
			[]string{"bench", "server", "--netns", pair.B.NS, "--backend", "xsk", "-i", pair.B.Link, "--port", "15241"})
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	waitListening(ctx, t, pair.B, 15241)
	server := pair.B.IPv4.String()

	res, err := pair.A.Command(ctx, "iperf3", "-c", server, "-p", "15241", "-t", "1", "-J").Output()
	var tj iperf3Report
	if jerr := json.Unmarshal(res, &tj); err != nil || jerr != nil || tj.Error != "" {
		t.Fatalf("iperf3 TCP test: %v %v %q\n%s\nserver:\n%s%s", err, jerr, tj.Error, res, out.String(), errOut.String())
	}
	if s, r := tj.End.SumSent.Bytes, tj.End.SumReceived.Bytes; s == 0 || s != r {
		t.Errorf("iperf3 sent %d bytes, the server received %d", s, r)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), "receiver") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if o := out.String(); !strings.Contains(o, "TCP stack: netstack on "+pair.B.Link) || !strings.Contains(o, "  receiver") || errOut.String() != "" {
		t.Errorf("server after the TCP test:\n%s\nstderr %q: want its netstack and summary, no error", o, errOut.String())
	}

	// -k: a test of a few datagrams, so that ten take well under a
	// second of sending.
	for i := range 10 {
		res, err := pair.A.Command(ctx, "iperf3", "-u", "-c", server, "-p", "15241", "-k", "20", "-l", "200", "-b", "10M", "-J").Output()
		var j iperf3JSON
		if jerr := json.Unmarshal(res, &j); err != nil || jerr != nil || j.Error != "" {
			t.Fatalf("client %d in a row: %v %v %q\n%s\nserver:\n%s%s", i+1, err, jerr, j.Error, res, out.String(), errOut.String())
		}
		if j.End.SumSent.Packets != 20 {
			t.Errorf("client %d: sent %d datagrams, want 20", i+1, j.End.SumSent.Packets)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("server stopped: %v, want no error (a cancelled server stops)", err)
	}
	done <- nil // for the cleanup
	if n := strings.Count(out.String(), "  receiver"); n != 11 {
		t.Errorf("server printed %d summaries, want 11:\n%s", n, out.String())
	}
	if e := errOut.String(); !strings.HasSuffix(e, "xdpio: bench server: stopped\n") {
		t.Errorf("server's stderr %q: want it to end with the stop", e)
	}
}

// With no -l, the client picks the UDP length as iperf3 does on the same
// link (the control connection's TCP MSS): both send the same blksize.
func TestBenchDefaultLengthMatchesIperf3(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var blk [2]int
	for i, client := range [][]string{
		{"iperf3", "-u", "-c", pair.B.IPv4.String(), "-p", "15243", "-k", "5", "-J"},
		nil,
	} {
		srv := pair.B.Command(ctx, "iperf3", "-s", "-1", "-J", "-B", pair.B.IPv4.String(), "-p", "15243")
		var srvOut syncBuffer
		srv.Stdout = &srvOut
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		waitListening(ctx, t, pair.B, 15243)
		if client != nil {
			if out, err := pair.A.Command(ctx, client[0], client[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("iperf3 client: %v\n%s", err, out)
			}
		} else {
			var out syncBuffer
			if err := runWith(ctx, &globals{stdout: &out, stderr: &out}, []string{"bench", "client", "-u", "--netns", pair.A.NS, "-c", pair.B.IPv4.String(), "--port", "15243", "-t", "1", "-b", "100k"}); err != nil {
				t.Fatalf("bench client: %v\n%s", err, out.String())
			}
		}
		srv.Wait()
		var j struct {
			Start struct {
				TestStart struct {
					Blksize int `json:"blksize"`
				} `json:"test_start"`
			} `json:"start"`
		}
		if err := json.Unmarshal([]byte(srvOut.String()), &j); err != nil {
			t.Fatalf("iperf3 -s -J: %v\n%s", err, srvOut.String())
		}
		blk[i] = j.Start.TestStart.Blksize
	}
	if blk[0] == 0 || blk[0] != blk[1] {
		t.Errorf("iperf3 -s saw blksize %d from iperf3 -c and %d from xdpio bench client, want the same", blk[0], blk[1])
	}
	t.Logf("blksize %d", blk[0])
}
