package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/spf13/cobra"

	"github.com/xdpio/xdpio/offload"
)

// segmentSummary counts what `pcap segment` did; every input packet is in
// exactly one of the counts after Packets.
type segmentSummary struct {
	Packets         int `json:"packets"`          // packets read
	TCPSplit        int `json:"tcp_split"`        // TCP super-packets split
	UDPSplit        int `json:"udp_split"`        // UDP super-datagrams split (--udp)
	Unchanged       int `json:"unchanged"`        // written unchanged: fits in one segment, or not TCP (UDP with --udp)
	Malformed       int `json:"malformed"`        // written unchanged: TCP/UDP headers that do not parse
	Truncated       int `json:"truncated"`        // written unchanged: the capture kept fewer bytes than the frame had
	UnsupportedLink int `json:"unsupported_link"` // written unchanged: not Ethernet
	Segments        int `json:"segments"`         // frames the split packets became
	Written         int `json:"written"`          // packets written
}

func newPcapSegmentCmd(g *globals) *cobra.Command {
	var (
		mss     int
		udp     bool
		fixedID bool
		format  string
	)
	c := &cobra.Command{
		Use:   "segment --mss N IN OUT",
		Short: "Split every TCP super-packet in a capture into MSS-sized segments, as TSO/GSO would",
		Long: `Copy a pcap or pcapng file, replacing every TCP super-packet (an Ethernet
frame, optionally VLAN-tagged, with IPv4 or IPv6 and a TCP payload larger
than --mss) by the segments xdpio's software segmentation makes of it: the
way Linux GSO and a TSO NIC cut it, with per-segment sequence numbers, IPv4
IDs, lengths, flags (CWR first, FIN/PSH last) and IPv4 and TCP checksums.
With --udp, UDP datagrams larger than --mss are split as UDP GSO
(UDP_SEGMENT) does.

Segments take the timestamp of their super-packet. Packets that need no
split, or cannot be split, are written unchanged and counted: malformed
headers (named on stderr), frames truncated by the snap length, non-Ethernet
link types. Captures of a sender with TSO on hold such super-packets; open
the output in Wireshark to see what went on the wire. The output has the
input's format unless --format says otherwise; it is written to a temporary
file and renamed into place.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if mss < 1 || mss > 65535 {
				return usagef("invalid --mss %d: must be between 1 and 65535", mss)
			}
			opts := offload.SegmentOptions{MSS: mss, FixedID: fixedID}
			return runPcapSegment(g, args[0], args[1], format, opts, udp)
		},
	}
	c.Flags().IntVar(&mss, "mss", 0, "largest TCP payload per segment, in bytes (required; 1448 for MTU 1500 with timestamps)")
	c.Flags().BoolVar(&udp, "udp", false, "also split UDP datagrams larger than --mss, as UDP GSO does")
	c.Flags().BoolVar(&fixedID, "fixed-id", false, "keep the IPv4 ID of every segment equal to the super-packet's (TSO with MANGLEID)")
	c.Flags().StringVar(&format, "format", "", "output format: pcap or pcapng (default: the input's)")
	return c
}

func runPcapSegment(g *globals, in, out, format string, opts offload.SegmentOptions, udp bool) error {
	r, w, err := openTransform("pcap segment", in, out, format)
	if err != nil {
		return err
	}
	defer r.Close()
	var sum segmentSummary
	var segs [][]byte
	write := func(ci gopacket.CaptureInfo, lt layers.LinkType, data []byte) error {
		sum.Written++
		return w.Write(ci, lt, data)
	}
	for i := 1; ; i++ {
		data, ci, lt, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			w.abort()
			return fmt.Errorf("pcap segment: packet %d: %w", i, err)
		}
		sum.Packets++
		var split bool
		switch {
		case lt != layers.LinkTypeEthernet:
			sum.UnsupportedLink++
		case ci.CaptureLength < ci.Length || len(data) < ci.Length:
			sum.Truncated++
		default:
			split, segs, err = segmentPacket(segs[:0], data, opts, udp)
			switch {
			case err != nil:
				sum.Malformed++
				fmt.Fprintf(g.stderr, "xdpio: pcap segment: packet %d written unchanged: %v\n", i, err)
			case split && segmentIsUDP(data, opts):
				sum.UDPSplit++
			case split:
				sum.TCPSplit++
			default:
				sum.Unchanged++
			}
		}
		if !split {
			if err := write(ci, lt, data); err != nil {
				w.abort()
				return fmt.Errorf("pcap segment: %w", err)
			}
			continue
		}
		for _, s := range segs {
			sci := ci
			sci.CaptureLength, sci.Length = len(s), len(s)
			if err := write(sci, lt, s); err != nil {
				w.abort()
				return fmt.Errorf("pcap segment: %w", err)
			}
		}
		sum.Segments += len(segs)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("pcap segment: %w", err)
	}
	if g.json {
		return writeJSON(g.stdout, sum)
	}
	fmt.Fprintf(g.stdout, "%d packets read: %d TCP and %d UDP super-packets split into %d segments, %d unchanged",
		sum.Packets, sum.TCPSplit, sum.UDPSplit, sum.Segments, sum.Unchanged)
	if n := sum.Malformed + sum.Truncated + sum.UnsupportedLink; n > 0 {
		fmt.Fprintf(g.stdout, ", %d not splittable (%d malformed, %d truncated, %d not Ethernet)", n, sum.Malformed, sum.Truncated, sum.UnsupportedLink)
	}
	fmt.Fprintf(g.stdout, "; %d packets written to %s\n", sum.Written, out)
	return nil
}

// segmentPacket splits data if it is a TCP (or, with udp, UDP) packet with
// more than one MSS of payload. It returns split false, and no error, for
// packets that are not TCP/UDP or need no split; an error for TCP/UDP
// packets whose headers do not parse.
func segmentPacket(dst [][]byte, data []byte, opts offload.SegmentOptions, udp bool) (bool, [][]byte, error) {
	n, _, err := offload.SegmentCount(data, opts)
	if err == nil {
		if n < 2 {
			return false, dst, nil
		}
		dst, err = offload.Segment(dst, data, opts)
		return err == nil, dst, err
	}
	if !errors.Is(err, offload.ErrWrongProtocol) {
		return false, dst, err
	}
	if !udp {
		return false, dst, nil
	}
	n, _, err = offload.SegmentUDPCount(data, opts)
	if err != nil {
		if errors.Is(err, offload.ErrWrongProtocol) {
			return false, dst, nil
		}
		return false, dst, err
	}
	if n < 2 {
		return false, dst, nil
	}
	dst, err = offload.SegmentUDP(dst, data, opts)
	return err == nil, dst, err
}

// segmentIsUDP reports whether data parses as a UDP packet (for the
// summary).
func segmentIsUDP(data []byte, opts offload.SegmentOptions) bool {
	_, _, err := offload.SegmentUDPCount(data, opts)
	return err == nil
}
