package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/xdpio/xdpio/offload"
)

// checksumSummary counts what `pcap checksum` did; every frame is in
// exactly one count.
type checksumSummary struct {
	Frames          int `json:"frames"`
	Filled          int `json:"filled"`           // transport checksum (and IPv4 header checksum) written
	IPv4Only        int `json:"ipv4_header_only"` // IPv4 header checksum written; no transport checksum to fill (fragment, ESP, unknown protocol)
	Unchanged       int `json:"unchanged"`        // nothing to fill: not IP, or IPv6 without a known transport checksum
	Malformed       int `json:"malformed"`        // written unchanged: headers cannot be parsed
	Truncated       int `json:"truncated"`        // written unchanged: the capture kept fewer bytes than the frame had
	UnsupportedLink int `json:"unsupported_link"` // written unchanged: not Ethernet
}

func newPcapChecksumCmd(g *globals) *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "checksum IN OUT",
		Short: "Fill in the IPv4 header and TCP/UDP/UDP-Lite/ICMP/ICMPv6 checksums of every frame in a capture",
		Long: `Copy a pcap or pcapng file, filling in the checksums of every frame (Ethernet,
Linux cooked SLL/SLL2 as written by tcpdump -i any, raw IP) as xdpio's
software TX checksum offload does: the IPv4 header checksum and the TCP, UDP,
UDP-Lite, ICMP or ICMPv6 checksum (UDP over IPv4 always gets one). Useful for
captures taken on a sender whose NIC computes checksums (they show as bad in
Wireshark) and to check the offload code with your own tools.

Frames that cannot be filled are written unchanged and counted: malformed
headers (named on stderr), frames truncated by the capture's snap length,
other link types. The output has the input's format unless --format
says otherwise; it is written to a temporary file and renamed into place.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPcapChecksum(g, args[0], args[1], format)
		},
	}
	c.Flags().StringVar(&format, "format", "", "output format: pcap or pcapng (default: the input's)")
	return c
}

func runPcapChecksum(g *globals, in, out, format string) error {
	r, w, err := openTransform("pcap checksum", in, out, format)
	if err != nil {
		return err
	}
	defer r.Close()
	var sum checksumSummary
	for i := 1; ; i++ {
		data, ci, lt, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			w.abort()
			return fmt.Errorf("pcap checksum: frame %d: %w", i, err)
		}
		sum.Frames++
		frame, l3, ok := asEthernet(data, lt)
		switch {
		case !ok:
			sum.UnsupportedLink++
		case len(data) < ci.Length:
			sum.Truncated++
		default:
			filled, err := offload.FillChecksum(frame)
			if err == nil && filled != 0 && l3 >= 0 {
				copy(data[l3:], frame[offload.EthernetLen:]) // a cooked or raw IP packet
			}
			switch {
			case err != nil:
				sum.Malformed++
				fmt.Fprintf(g.stderr, "xdpio: pcap checksum: frame %d written unchanged: %v\n", i, err)
			case filled&offload.FilledL4 != 0:
				sum.Filled++
			case filled&offload.FilledIPv4 != 0:
				sum.IPv4Only++
			default:
				sum.Unchanged++
			}
		}
		if err := w.Write(ci, lt, data); err != nil {
			w.abort()
			return fmt.Errorf("pcap checksum: frame %d: %w", i, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("pcap checksum: %w", err)
	}
	if g.json {
		return writeJSON(g.stdout, map[string]any{"input": in, "output": out, "format": w.format, "summary": sum})
	}
	fmt.Fprintf(g.stdout, "%d frames: %d filled, %d IPv4 header only, %d unchanged (nothing to fill), %d malformed, %d truncated, %d unsupported link type\n",
		sum.Frames, sum.Filled, sum.IPv4Only, sum.Unchanged, sum.Malformed, sum.Truncated, sum.UnsupportedLink)
	return nil
}
