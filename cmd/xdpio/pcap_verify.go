package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/spf13/cobra"

	"github.com/xdpio/xdpio/offload"
)

// verifyFrameJSON is one frame of `pcap verify --json`.
type verifyFrameJSON struct {
	Index     int       `json:"index"`
	Timestamp time.Time `json:"timestamp"`
	Length    int       `json:"length"`
	Captured  int       `json:"captured"`
	Status    string    `json:"status"` // ok, bad, malformed, l4_skipped, no_l4_checksum, not_ip, truncated, unsupported_link
	EtherType string    `json:"ethertype,omitempty"`
	Proto     *uint8    `json:"proto,omitempty"`
	L3        string    `json:"l3,omitempty"`
	L4        string    `json:"l4,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	// PartialChecksum: a bad transport checksum that holds the
	// pseudo-header sum, as a Linux CHECKSUM_PARTIAL packet does before
	// the device (or software) completes it.
	PartialChecksum bool   `json:"partial_checksum,omitempty"`
	Text            string `json:"text"`
}

// verifySummary counts frames by status; every frame is in exactly one.
type verifySummary struct {
	Frames          int `json:"frames"`
	OK              int `json:"ok"`
	Bad             int `json:"bad"`
	Malformed       int `json:"malformed"`
	L4Skipped       int `json:"l4_skipped"`
	NoL4Checksum    int `json:"no_l4_checksum"`
	NotIP           int `json:"not_ip"`
	Truncated       int `json:"truncated"`
	UnsupportedLink int `json:"unsupported_link"`
	// PartialChecksum counts the bad frames whose transport checksum
	// field holds only the pseudo-header sum (captured before TX
	// checksum offload filled it in).
	PartialChecksum int `json:"partial_checksum"`
}

// partialHint explains frames with partial checksums and what to do.
const partialHint = "checksum field holds only the pseudo-header sum: captured before TX checksum offload filled it in (CHECKSUM_PARTIAL: veth, or a capture on the sending host); fill it with 'xdpio pcap checksum IN OUT', or capture with TX checksum offload off ('xdpio features set DEV tx-checksumming off')"

// isPartialChecksum tells whether frame's transport checksum field holds
// the pseudo-header sum that Linux seeds a CHECKSUM_PARTIAL packet with:
// offload.PreparePartial writes exactly that into a copy.
func isPartialChecksum(frame []byte) bool {
	c := append([]byte(nil), frame...)
	start, off, err := offload.PreparePartial(c)
	if err != nil || start+off+2 > len(frame) {
		return false
	}
	return frame[start+off] == c[start+off] && frame[start+off+1] == c[start+off+1]
}

func (s *verifySummary) add(status string) {
	s.Frames++
	switch status {
	case "ok":
		s.OK++
	case "bad":
		s.Bad++
	case "malformed":
		s.Malformed++
	case "l4_skipped":
		s.L4Skipped++
	case "no_l4_checksum":
		s.NoL4Checksum++
	case "not_ip":
		s.NotIP++
	case "truncated":
		s.Truncated++
	case "unsupported_link":
		s.UnsupportedLink++
	}
}

// errVerifyFailed is returned (exit status 1) when a capture has frames
// with bad checksums or malformed headers.
var errVerifyFailed = errors.New("checksum verification failed")

func newPcapVerifyCmd(g *globals) *cobra.Command {
	var quiet bool
	c := &cobra.Command{
		Use:   "verify IN",
		Short: "Check the IPv4 header and TCP/UDP/UDP-Lite/ICMP/ICMPv6 checksums of every frame in a capture",
		Long: `Check the checksums of every frame in a pcap or pcapng file, as xdpio's
software RX checksum offload checks received frames, and print one verdict
per frame, then a summary. Link types:
Ethernet, Linux cooked (SLL and SLL2, as written by tcpdump -i any), raw IP.

Statuses: ok (every checksum the frame carries is right), bad (a wrong
checksum), malformed (truncated or inconsistent headers; never counted as a
bad checksum), l4_skipped (fragments, ESP: the transport checksum cannot be
checked from one frame), no_l4_checksum (no transport checksum, or UDP over
IPv4 with checksum 0), not_ip, truncated (the capture kept fewer bytes than
the frame had: snap length), unsupported_link (another link type).

Frames captured on the sending host before the NIC filled in offloaded
checksums show up as bad, and so does every TCP or UDP frame captured on a
veth (its packets keep CHECKSUM_PARTIAL: the checksum field holds only the
pseudo-header sum); tshark calls them bad too. Such a frame's verdict says
"partial checksum". Fill them in with 'xdpio pcap checksum IN OUT', or
capture with TX checksum offload off ('xdpio features set DEV
tx-checksumming off'), or on the receiving host of a real NIC.

Exit status 1 when any frame is bad or malformed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPcapVerify(g, args[0], quiet)
		},
	}
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only bad and malformed frames, and the summary")
	return c
}

func runPcapVerify(g *globals, path string, quiet bool) error {
	r, err := openCapture(path)
	if err != nil {
		return fmt.Errorf("pcap verify: %w", err)
	}
	defer r.Close()
	var sum verifySummary
	var frames []verifyFrameJSON
	for i := 1; ; i++ {
		data, ci, lt, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("pcap verify: frame %d: %w", i, err)
		}
		fj := verifyFrame(data, ci.Length, lt)
		fj.Index, fj.Timestamp, fj.Length, fj.Captured = i, ci.Timestamp.UTC(), ci.Length, len(data)
		sum.add(fj.Status)
		if fj.PartialChecksum {
			sum.PartialChecksum++
		}
		if quiet && fj.Status != "bad" && fj.Status != "malformed" {
			continue
		}
		if g.json {
			frames = append(frames, fj)
		} else {
			fmt.Fprintf(g.stdout, "%6d  %-10s %s\n", i, fj.Status, fj.Text)
		}
	}
	if g.json {
		if frames == nil {
			frames = []verifyFrameJSON{}
		}
		if err := writeJSON(g.stdout, map[string]any{"file": path, "format": r.Format, "frames": frames, "summary": sum}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(g.stdout, "%d frames: %d ok, %d bad, %d malformed, %d l4 skipped, %d without l4 checksum, %d not ip, %d truncated, %d unsupported link type\n",
			sum.Frames, sum.OK, sum.Bad, sum.Malformed, sum.L4Skipped, sum.NoL4Checksum, sum.NotIP, sum.Truncated, sum.UnsupportedLink)
		if sum.PartialChecksum > 0 {
			fmt.Fprintf(g.stdout, "%d of the bad frames carry a partial checksum: %s\n", sum.PartialChecksum, partialHint)
		}
	}
	if sum.Bad > 0 || sum.Malformed > 0 {
		note := ""
		if sum.PartialChecksum > 0 {
			note = fmt.Sprintf(" (%d with a partial checksum, from TX checksum offload: see above)", sum.PartialChecksum)
		}
		return fmt.Errorf("pcap verify %s: %w: %d bad%s, %d malformed of %d frames", path, errVerifyFailed, sum.Bad, note, sum.Malformed, sum.Frames)
	}
	return nil
}

// verifyFrame classifies one captured frame of original length length.
func verifyFrame(data []byte, length int, lt layers.LinkType) verifyFrameJSON {
	var fj verifyFrameJSON
	frame, _, ok := asEthernet(data, lt)
	switch {
	case !ok:
		fj.Status, fj.Text = "unsupported_link", fmt.Sprintf("link type %v is not Ethernet, Linux cooked or raw IP", lt)
		return fj
	case len(data) < length:
		fj.Status, fj.Text = "truncated", fmt.Sprintf("capture kept %d of %d bytes: not verified", len(data), length)
		return fj
	}
	res := offload.VerifyRX(frame)
	fj.Text = res.String()
	if res.EtherType != 0 {
		fj.EtherType = fmt.Sprintf("0x%04x", res.EtherType)
	}
	fj.L3, fj.L4 = res.L3.String(), res.L4.String()
	fj.Reason = res.Reason.String()
	switch {
	case res.Malformed():
		fj.Status = "malformed"
		return fj
	case res.Bad():
		fj.Status = "bad"
		if isPartialChecksum(frame) {
			fj.PartialChecksum = true
			fj.Text += "; partial checksum: " + partialHint
		}
	case res.EtherType != offload.EtherTypeIPv4 && res.EtherType != offload.EtherTypeIPv6:
		fj.Status = "not_ip"
		fj.L3, fj.L4 = "", ""
		return fj
	case res.L4 == offload.VerdictOK:
		fj.Status = "ok"
	case res.L4 == offload.VerdictSkipped:
		fj.Status = "l4_skipped"
	default:
		fj.Status = "no_l4_checksum"
	}
	p := res.Proto
	fj.Proto = &p
	return fj
}
