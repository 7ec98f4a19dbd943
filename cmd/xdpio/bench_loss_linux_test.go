package main

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// textRow is one line of xdpio bench's text: an interval's or, after the
// "- - -" separator, the end block's.
type textRow struct {
	ID         string // "5", "7", "SUM"
	Start, End float64
	Packets    int64   // the Packets column
	PPS        float64 // the Pkts/s column, -1 for "-"
	PPSStep    float64 // the Pkts/s column's last digit's worth
	Loss       bool    // the line has Jitter and Lost/Total
	Lost       int64
	Total      int64
	Tag        string // sender, receiver, or "" on an interval line
	InEnd      bool   // in the end block
}

var rowRE = regexp.MustCompile(`^\[\s*(\w+)\]\s+([\d.]+)-([\d.]+)\s+sec\s+\S+ \S+\s+\S+ \S+\s+(\d+)\s+(\S+)(?:\s+[\d.]+ ms\s+(-?\d+)/(\d+) \([^)]*\))?(?:\s+(sender|receiver))?\s*$`)

// parseRows reads the data lines of xdpio bench's text output.
func parseRows(t *testing.T, out string) []textRow {
	t.Helper()
	var rows []textRow
	inEnd := false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "- - -") {
			inEnd = true
			continue
		}
		if !strings.HasPrefix(l, "[") || strings.HasPrefix(l, "[ ID]") {
			continue
		}
		m := rowRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("a line of bench's text that is not a row: %q", l)
		}
		r := textRow{ID: m[1], Tag: m[8], InEnd: inEnd, Loss: m[6] != ""}
		r.Start, _ = strconv.ParseFloat(m[2], 64)
		r.End, _ = strconv.ParseFloat(m[3], 64)
		r.Packets, _ = strconv.ParseInt(m[4], 10, 64)
		r.PPS, r.PPSStep = parseSI(t, m[5])
		if r.Loss {
			r.Lost, _ = strconv.ParseInt(m[6], 10, 64)
			r.Total, _ = strconv.ParseInt(m[7], 10, 64)
		}
		rows = append(rows, r)
	}
	return rows
}

// parseSI reads a Pkts/s figure ("950", "2.0k", "28.6k", "1.25M"), -1
// for "-", and what its last digit is worth (100 for "2.0k").
func parseSI(t *testing.T, s string) (v, step float64) {
	t.Helper()
	if s == "-" {
		return -1, 0
	}
	mult := 1.0
	switch s[len(s)-1] {
	case 'k':
		mult, s = 1e3, s[:len(s)-1]
	case 'M':
		mult, s = 1e6, s[:len(s)-1]
	case 'G':
		mult, s = 1e9, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("Pkts/s %q: %v", s, err)
	}
	step = mult
	if _, frac, ok := strings.Cut(s, "."); ok {
		step = mult * math.Pow(10, -float64(len(frac)))
	}
	return v * mult, step
}

// endRow returns the end block's row of id with tag, failing t if there
// is none.
func endRow(t *testing.T, rows []textRow, id, tag string) textRow {
	t.Helper()
	for _, r := range rows {
		if r.InEnd && r.ID == id && r.Tag == tag {
			return r
		}
	}
	t.Fatalf("no [%s] %s line in the end block", id, tag)
	return textRow{}
}

// nearRate reports whether row's Pkts/s is packets over secs, to the
// rounding of its print (half its last digit) and of the window's (the
// line's times have two decimals: 1%).
func (row textRow) nearRate(packets int64, secs float64) bool {
	want := float64(packets) / secs
	return secs > 0 && math.Abs(row.PPS-want) <= row.PPSStep/2+0.01*want
}

// TestBenchReceivedUnderLoss is issue #27: with more than half the
// datagrams lost, every Packets and Pkts/s figure xdpio bench prints for a
// receiver, in text and in --json, counts what was received (iperf3's
// packets − lost_packets), while the iperf3 fields keep iperf3's meaning.
//
// xdpio plays each end against a real iperf3, sending and receiving (-R),
// with the socket and the AF_XDP backend, and prints text and JSON; a
// lossy link on iperf3's side of the veth drops 60% of the datagrams.
// The oracles: where iperf3 receives, its own -J counts (our receiver
// lines show the figures iperf3 sent us: they must be the same, exactly);
// where xdpio receives, the lossy link's counts of the datagrams it let
// through, which xdpio must count exactly (it reads until the sender has
// stopped), less any the kernel counted as dropped on the way (a full
// socket buffer or AF_XDP ring).
func TestBenchReceivedUnderLoss(t *testing.T) {
	netnstest.RequireTool(t, "iperf3")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	const share = 0.6
	args := []string{"-u", "-P", "2", "-t", "1", "-b", "20M", "-l", "1000"}
	port := 15401
	for _, ours := range []string{"client", "server"} {
		for _, reverse := range []bool{false, true} {
			for _, backend := range []string{"socket", "xsk"} {
				for _, asJSON := range []bool{false, true} {
					a := args
					if reverse {
						a = append(append([]string{}, args...), "-R")
					}
					r := pairRun{Ours: ours, Backend: backend, JSON: asJSON, Args: a, Loss: share}
					name := fmt.Sprintf("%s/R=%v/%s/json=%v", ours, reverse, backend, asJSON)
					port++
					t.Run(name, func(t *testing.T) {
						ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
						defer cancel()
						checkReceivedUnderLoss(t, r, r.run(ctx, t, pair, port))
					})
				}
			}
		}
	}
}

// lossCounts is a receiver's totals: what arrived, and iperf3's lost
// and total (the datagrams the sequence numbers say were sent).
type lossCounts struct {
	Received, Lost, Total int64
	Seconds               float64 // the receiver's window
}

func checkReceivedUnderLoss(t *testing.T, r pairRun, res pairResult) {
	t.Helper()
	theirs := parseReport(t, "iperf3", res.Theirs)
	iperfReceives := !r.iperf3Sends()

	// Our figures, each consistent with the others of the report.
	var ours lossCounts
	pps := "-" // our [SUM] receiver line's Pkts/s
	var sumRow textRow
	if r.JSON {
		j := parseReport(t, "xdpio", []byte(res.Ours))
		sr := j.End.SumReceived
		if sr.ReceivedPackets == nil || sr.Sender {
			t.Fatalf("our end.sum_received %+v: want received_packets, sender false", sr)
		}
		ours = lossCounts{*sr.ReceivedPackets, sr.LostPackets, sr.Packets, sr.Seconds}
		if ours.Received != ours.Total-ours.Lost {
			t.Errorf("our end.sum_received: received_packets %d, packets %d − lost_packets %d", ours.Received, ours.Total, ours.Lost)
		}
		var perStream int64
		for i, s := range j.End.Streams {
			x := s.Receiver
			if x == nil || x.ReceivedPackets == nil || *x.ReceivedPackets != x.Packets-x.LostPackets || x.Sender {
				t.Errorf("our end.streams[%d].receiver %+v: want received_packets = packets − lost_packets, sender false", i, x)
				continue
			}
			perStream += *x.ReceivedPackets
			if iperfReceives && r.Ours == "client" && i < len(theirs.End.Streams) {
				// iperf3 -s's streams hold its receiver's counts.
				u := theirs.End.Streams[i].UDP
				if x.Packets != u.Packets || x.LostPackets != u.LostPackets {
					t.Errorf("stream %d: our receiver figures %d lost of %d, iperf3 -s's %d of %d", i, x.LostPackets, x.Packets, u.LostPackets, u.Packets)
				}
			}
		}
		if perStream != ours.Received {
			t.Errorf("our streams' receivers received %d in all, the sum %d", perStream, ours.Received)
		}
		if !iperfReceives {
			// Our receiving intervals add up to the total, each with
			// received_packets = packets − lost_packets.
			var ivReceived int64
			for _, iv := range j.Intervals {
				s := iv.Sum
				if s.Sender || s.ReceivedPackets == nil || *s.ReceivedPackets != s.Packets-s.LostPackets {
					t.Errorf("receiver's interval sum %+v: want received_packets = packets − lost_packets", s)
					continue
				}
				ivReceived += *s.ReceivedPackets
			}
			if ivReceived != ours.Received {
				t.Errorf("our intervals received %d datagrams in all, the end says %d", ivReceived, ours.Received)
			}
			for _, q := range j.End.RXQueues {
				res.Overflow += int64(q.Dropped) // a full AF_XDP ring
			}
		}
	} else {
		rows := parseRows(t, res.Ours)
		sumRow = endRow(t, rows, "SUM", "receiver")
		ours = lossCounts{sumRow.Packets, sumRow.Lost, sumRow.Total, sumRow.End}
		pps = fmt.Sprintf("%.0f", sumRow.PPS)
		if ours.Received != ours.Total-ours.Lost {
			t.Errorf("our [SUM] receiver line: %d packets, %d/%d lost: want Packets = Total − Lost", ours.Received, ours.Lost, ours.Total)
		}
		var perStream int64
		for _, row := range rows {
			if row.InEnd && row.ID != "SUM" && row.Tag == "receiver" {
				if row.Packets != row.Total-row.Lost || !row.nearRate(row.Packets, row.End) {
					t.Errorf("receiver line %+v: want Packets = Total − Lost and Pkts/s Packets over its window", row)
				}
				perStream += row.Packets
			}
		}
		if perStream != ours.Received {
			t.Errorf("our streams' receiver lines received %d in all, the [SUM] %d", perStream, ours.Received)
		}
		if !iperfReceives {
			// The receiving intervals: their [SUM] lines count what
			// arrived, at its rate, and add up to the total.
			var ivReceived int64
			for _, row := range rows {
				if row.InEnd || row.ID != "SUM" {
					continue
				}
				if !row.Loss || row.Packets != row.Total-row.Lost {
					t.Errorf("receiver's interval line %+v: want Packets = Total − Lost", row)
				}
				ivReceived += row.Packets
				if d := row.End - row.Start; d >= 0.5 && !row.nearRate(row.Packets, d) {
					t.Errorf("interval %.2f-%.2f: %d packets at %.0f/s printed, want %.0f/s", row.Start, row.End, row.Packets, row.PPS, float64(row.Packets)/d)
				}
			}
			// The printer leaves out a last interval that rounds to
			// none ("2.00-2.00 sec"), which may hold the last few
			// datagrams (the JSON run checks that the intervals add up).
			if ivReceived > ours.Received || ivReceived < ours.Received-ours.Received/100 {
				t.Errorf("our interval lines received %d in all, the end block %d", ivReceived, ours.Received)
			}
			res.Overflow += ringDropsText(t, res.Ours)
		}
	}

	// The oracle.
	// What reached the receiver's socket: what the link passed, less
	// what the kernel dropped after it.
	passed := int64(res.Passed) - res.Overflow - res.VethDrops
	var oracle string
	if iperfReceives {
		sr := theirs.End.SumReceived
		want := lossCounts{sr.Packets - sr.LostPackets, sr.LostPackets, sr.Packets, sr.Seconds}
		oracle = fmt.Sprintf("iperf3 received %d, lost %d of %d in %.3f s (%.0f/s)", want.Received, want.Lost, want.Total, want.Seconds, float64(want.Received)/want.Seconds)
		// Our receiver figures are the ones iperf3 sent us: the same.
		if ours.Received != want.Received || ours.Lost != want.Lost || ours.Total != want.Total {
			t.Errorf("ours: received %d, lost %d of %d; iperf3's own: received %d, lost %d of %d", ours.Received, ours.Lost, ours.Total, want.Received, want.Lost, want.Total)
		}
		if !r.JSON && !sumRow.nearRate(want.Received, want.Seconds) {
			t.Errorf("our [SUM] receiver line: %.0f packets/s; iperf3 received %d in %.3f s: %.0f/s", sumRow.PPS, want.Received, want.Seconds, float64(want.Received)/want.Seconds)
		}
		// The end_time iperf3 sends in the results exchange is taken a
		// moment after the window its own report shows.
		if r.JSON && math.Abs(ours.Seconds-want.Seconds) > 10e-3 {
			t.Errorf("our receiver's window %.3f s, iperf3's %.3f s", ours.Seconds, want.Seconds)
		}
		// The lossy link is on iperf3's ingress: what it let through
		// reached iperf3's socket, which counted it unless the buffer
		// was full, or it came after iperf3 stopped counting. iperf3
		// counts until TEST_END: as -s, which xdpio's client sends
		// 100 ms after its last datagram, that is all; as -c -R it
		// sends TEST_END itself as its time is up, and what is in
		// flight then (allow a quarter of a second's worth) is neither
		// received nor lost: the window difference.
		inFlight := int64(0)
		if r.Ours == "server" {
			inFlight = int64(float64(want.Received) / want.Seconds / 4)
		}
		if want.Received > passed || want.Received < passed-inFlight {
			t.Errorf("iperf3 counted %d received; the link passed %d (%d overflowed the socket buffer, veth dropped %d)", want.Received, res.Passed, res.Overflow, res.VethDrops)
		} else if want.Received < passed {
			oracle += fmt.Sprintf(" (%d more arrived after it stopped counting)", passed-want.Received)
		}
	} else {
		// We receive until the sender has stopped: everything the link
		// passed.
		sent := theirs.End.SumSent.Packets
		oracle = fmt.Sprintf("iperf3 sent %d; the link passed %d", sent, res.Passed)
		if res.Overflow+res.VethDrops > 0 {
			oracle += fmt.Sprintf(" (the kernel dropped %d of them on the way)", res.Overflow+res.VethDrops)
		}
		if ours.Received != passed {
			t.Errorf("we received %d datagrams; the link passed %d, of which the kernel dropped %d for a full socket buffer or AF_XDP ring and veth %d", ours.Received, res.Passed, res.Overflow, res.VethDrops)
		}
		if ours.Total > sent {
			t.Errorf("our receiver counts %d sent; iperf3 sent %d", ours.Total, sent)
		}
		if !r.JSON && !sumRow.nearRate(ours.Received, ours.Seconds) {
			t.Errorf("our [SUM] receiver line: %.0f packets/s, want %d received in %.3f s", sumRow.PPS, ours.Received, ours.Seconds)
		}
	}
	if ours.Total == 0 || float64(ours.Lost) <= 0.5*float64(ours.Total) {
		t.Errorf("lost %d of %d: the test needs more than 50%% loss", ours.Lost, ours.Total)
	}
	t.Logf("%s; link dropped %d (%.1f%%). ours: received %d, lost %d of %d (%.1f%%) in %.3f s, %.0f/s, Pkts/s printed %s",
		oracle, res.Dropped, 100*float64(res.Dropped)/float64(max(res.Passed+res.Dropped, 1)),
		ours.Received, ours.Lost, ours.Total, 100*float64(ours.Lost)/float64(max(ours.Total, 1)), ours.Seconds, float64(ours.Received)/ours.Seconds, pps)
}

// ringDropsText is what an AF_XDP receiver's "RX queues of" line says
// the kernel dropped for full rings (0 without the line).
func ringDropsText(t *testing.T, out string) int64 {
	var n int64
	for _, m := range regexp.MustCompile(`\((\d+) dropped by the kernel\)`).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseInt(m[1], 10, 64)
		n += v
	}
	return n
}
