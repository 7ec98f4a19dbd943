package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
)

// garble overwrites the checksum fields of an untagged frame at the given
// offsets with junk.
func garble(f []byte, offs ...int) []byte {
	g := append([]byte(nil), f...)
	for i, o := range offs {
		g[o], g[o+1] = byte(0x5a+i), byte(0xa5-i)
	}
	return g
}

func TestPcapChecksum(t *testing.T) {
	// Frames whose checksums gopacket computed: after garbling and
	// filling, every byte must be back to what gopacket wrote.
	tcp4 := tcp4Frame(t, "some TCP payload")
	udp6 := udp6Frame(t, "odd-length UDP payload")
	icmp4 := icmp4Frame(t)
	frag := tcp4Frame(t, "first fragment")
	frag[14+6] |= 0x20 // MF
	fixIPv4Checksum(frag)
	malformed := tcp4Frame(t, "x")[:30]
	truncated := udp6Frame(t, strings.Repeat("z", 200))
	in := []pcapFrame{
		{data: garble(tcp4, 14+10, 34+16)},
		{data: garble(udp6, 54+6)},
		{data: garble(icmp4, 14+10, 34+2)},
		{data: garble(frag, 14+10)},
		{data: arpFrame(t)},
		{data: malformed},
		{data: truncated[:100], length: len(truncated)},
	}
	want := [][]byte{tcp4, udp6, icmp4, frag, in[4].data, malformed, truncated[:100]}

	for _, tc := range []struct{ inFormat, flag, outFormat string }{
		{formatPcap, "", formatPcap},
		{formatPcapng, "", formatPcapng},
		{formatPcap, formatPcapng, formatPcapng},
		{formatPcapng, formatPcap, formatPcap},
	} {
		t.Run(tc.inFormat+"-to-"+tc.outFormat, func(t *testing.T) {
			dir := t.TempDir()
			inPath := filepath.Join(dir, "in."+tc.inFormat)
			outPath := filepath.Join(dir, "out."+tc.outFormat)
			writeTestCapture(t, inPath, tc.inFormat, in)
			args := []string{"--json", "pcap", "checksum", inPath, outPath}
			if tc.flag != "" {
				args = append(args, "--format", tc.flag)
			}
			out, stderr, err := runCLI(t, args...)
			if err != nil {
				t.Fatalf("pcap checksum: %v\n%s%s", err, out, stderr)
			}
			if !strings.Contains(stderr, "frame 6 written unchanged") {
				t.Errorf("stderr does not name the malformed frame:\n%s", stderr)
			}
			var doc struct {
				Format  string         `json:"format"`
				Summary map[string]int `json:"summary"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, out)
			}
			wantSum := map[string]int{"frames": 7, "filled": 3, "ipv4_header_only": 1, "unchanged": 1, "malformed": 1, "truncated": 1, "unsupported_link": 0}
			for k, v := range wantSum {
				if doc.Summary[k] != v {
					t.Errorf("summary[%s] = %d, want %d", k, doc.Summary[k], v)
				}
			}
			if doc.Format != tc.outFormat {
				t.Errorf("format %q, want %q", doc.Format, tc.outFormat)
			}

			r, err := openCapture(outPath)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Format != tc.outFormat {
				t.Fatalf("output is %s, want %s", r.Format, tc.outFormat)
			}
			for i := 0; ; i++ {
				data, ci, _, err := r.Next()
				if err == io.EOF {
					if i != len(want) {
						t.Fatalf("%d frames in output, want %d", i, len(want))
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(data, want[i]) {
					t.Errorf("frame %d:\n got % x\nwant % x", i+1, data, want[i])
				}
				if wl := max(in[i].length, len(in[i].data)); ci.Length != wl || !ci.Timestamp.Equal(inTimestamp(i)) {
					t.Errorf("frame %d: length %d time %v, want %d %v", i+1, ci.Length, ci.Timestamp, wl, inTimestamp(i))
				}
			}

			// The filled capture verifies: no bad checksums left (the
			// malformed frame still fails the run).
			out, _, err = runCLI(t, "--json", "pcap", "verify", outPath)
			if !errors.Is(err, errVerifyFailed) {
				t.Fatalf("verify output: %v", err)
			}
			var v struct{ Summary verifySummary }
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatal(err)
			}
			if v.Summary.Bad != 0 || v.Summary.OK != 3 || v.Summary.Malformed != 1 {
				t.Errorf("verify after checksum: %+v", v.Summary)
			}
		})
	}
}

// inTimestamp is the timestamp writeTestCapture gives frame i.
func inTimestamp(i int) time.Time {
	return testEpoch.Add(time.Duration(i) * time.Millisecond)
}

func TestPcapChecksumErrors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	writeTestCapture(t, in, formatPcap, []pcapFrame{{data: tcp4Frame(t, "a")}})
	var ue *usageError
	if _, _, err := runCLI(t, "pcap", "checksum", in, in); !errors.As(err, &ue) {
		t.Errorf("output = input: %v, want a usage error", err)
	}
	if _, _, err := runCLI(t, "pcap", "checksum", in, filepath.Join(dir, "o.pcap"), "--format", "erf"); !errors.As(err, &ue) {
		t.Errorf("--format erf: %v, want a usage error", err)
	}
	if _, _, err := runCLI(t, "pcap", "checksum", in); !errors.As(err, &ue) {
		t.Errorf("one argument: %v, want a usage error", err)
	}
	if _, _, err := runCLI(t, "pcap", "checksum", in, filepath.Join(dir, "no", "such", "dir.pcap")); err == nil {
		t.Error("output in a missing directory: no error")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

// cooked turns an Ethernet frame into a Linux cooked (SLL or SLL2) or raw
// IP packet.
func cooked(lt layers.LinkType, eth []byte) []byte {
	l3 := eth[14:]
	switch lt {
	case layers.LinkTypeLinuxSLL:
		h := []byte{0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, eth[12], eth[13]}
		return append(h, l3...)
	case layers.LinkTypeLinuxSLL2:
		h := []byte{eth[12], eth[13], 0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0}
		return append(h, l3...)
	}
	return append([]byte(nil), l3...)
}

// TestPcapCookedAndRaw runs verify and checksum over captures in the link
// types `tcpdump -i any` (Linux cooked SLL, SLL2) and raw IP tools write.
func TestPcapCookedAndRaw(t *testing.T) {
	tcp4 := tcp4Frame(t, "cooked TCP")
	udp6 := udp6Frame(t, "cooked UDP over IPv6")
	icmp4 := icmp4Frame(t)
	for _, lt := range []layers.LinkType{layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2, layers.LinkTypeRaw} {
		t.Run(lt.String(), func(t *testing.T) {
			dir := t.TempDir()
			good := filepath.Join(dir, "good.pcap")
			writeTestCaptureLink(t, good, formatPcap, lt, []pcapFrame{{data: cooked(lt, tcp4)}, {data: cooked(lt, udp6)}, {data: cooked(lt, icmp4)}})
			if out, _, err := runCLI(t, "pcap", "verify", good); err != nil || strings.Count(out, " ok ") != 3 {
				t.Fatalf("verify gopacket-made %v capture: %v\n%s", lt, err, out)
			}
			want := [][]byte{cooked(lt, tcp4), cooked(lt, udp6), cooked(lt, icmp4)}
			in := filepath.Join(dir, "in.pcapng")
			writeTestCaptureLink(t, in, formatPcapng, lt, []pcapFrame{
				{data: cooked(lt, garble(tcp4, 14+10, 34+16))},
				{data: cooked(lt, garble(udp6, 54+6))},
				{data: cooked(lt, garble(icmp4, 14+10, 34+2))},
				{data: cooked(lt, tcp4)[:3]}, // shorter than any link header
			})
			out, _, err := runCLI(t, "--json", "pcap", "verify", in)
			var v struct{ Summary verifySummary }
			if !errors.Is(err, errVerifyFailed) || json.Unmarshal([]byte(out), &v) != nil || v.Summary.Bad != 3 || v.Summary.Malformed != 1 {
				t.Fatalf("verify garbled %v capture: %v %+v\n%s", lt, err, v.Summary, out)
			}
			outPath := filepath.Join(dir, "out.pcapng")
			if out, stderr, err := runCLI(t, "pcap", "checksum", in, outPath); err != nil || !strings.Contains(out, "4 frames: 3 filled") {
				t.Fatalf("checksum: %v\n%s%s", err, out, stderr)
			}
			r, err := openCapture(outPath)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for i := 0; i < len(want); i++ {
				data, _, got, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				if got != lt || !bytes.Equal(data, want[i]) {
					t.Errorf("packet %d (%v):\n got % x\nwant % x", i+1, got, data, want[i])
				}
			}
		})
	}
}
