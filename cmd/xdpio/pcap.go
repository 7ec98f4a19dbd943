package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/spf13/cobra"

	"github.com/xdpio/xdpio/offload"
)

// pcapSubcommands lists the constructors of the `xdpio pcap` subcommands.
var pcapSubcommands = []func(g *globals) *cobra.Command{newPcapSegmentCmd, newPcapVerifyCmd, newPcapChecksumCmd}

// newPcapCmd builds `xdpio pcap`, the parent of the capture-processing
// subcommands (segment, verify, checksum).
func newPcapCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "pcap",
		Short: "Run the software offloads over a capture file (pcap or pcapng): segment, verify, checksum",
		Args:  cobra.NoArgs,
	}
	for _, mk := range pcapSubcommands {
		c.AddCommand(mk(g))
	}
	return c
}

// Capture file formats.
const (
	formatPcap   = "pcap"
	formatPcapng = "pcapng"
)

// pcapngMagic is the block type of a pcapng section header block, the first
// four bytes of every pcapng file (the same in either byte order).
var pcapngMagic = []byte{0x0a, 0x0d, 0x0d, 0x0a}

// captureReader reads packets from a classic pcap or a pcapng file; the
// format is detected from the file's first bytes.
type captureReader struct {
	// Format is formatPcap or formatPcapng.
	Format string
	f      *os.File
	pcap   *pcapgo.Reader
	ng     *pcapgo.NgReader
}

// openCapture opens a pcap or pcapng file for reading.
func openCapture(path string) (*captureReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open capture: %w", err)
	}
	br := bufio.NewReaderSize(f, 1<<16)
	magic, err := br.Peek(4)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open capture %s: file too short for a pcap or pcapng header: %w", path, err)
	}
	r := &captureReader{f: f}
	if !bytes.Equal(magic, pcapngMagic) && !isPcapMagic(magic) {
		f.Close()
		return nil, fmt.Errorf("open capture %s: not a pcap or pcapng file (it starts with %q)", path, magic)
	}
	if bytes.Equal(magic, pcapngMagic) {
		r.Format = formatPcapng
		r.ng, err = pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
	} else {
		r.Format = formatPcap
		r.pcap, err = pcapgo.NewReader(br)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("open capture %s: the file ends inside its %s header (truncated?)", path, r.Format)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open capture %s: %w", path, err)
	}
	return r, nil
}

// isPcapMagic tells whether b starts a classic pcap file: the magic
// number for microsecond or nanosecond timestamps, in either byte order.
func isPcapMagic(b []byte) bool {
	for _, m := range []uint32{0xa1b2c3d4, 0xa1b23c4d} {
		if binary.LittleEndian.Uint32(b) == m || binary.BigEndian.Uint32(b) == m {
			return true
		}
	}
	return false
}

// Next returns the next packet, its capture information and its link
// type, or io.EOF after the last one. data is the reader's own copy.
func (r *captureReader) Next() (data []byte, ci gopacket.CaptureInfo, lt layers.LinkType, err error) {
	if r.ng != nil {
		data, ci, err = r.ng.ReadPacketData()
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = errTruncated
		}
		if err != nil {
			return nil, ci, 0, err
		}
		intf, ierr := r.ng.Interface(ci.InterfaceIndex)
		if ierr != nil {
			return nil, ci, 0, fmt.Errorf("read capture: packet on unknown interface %d: %w", ci.InterfaceIndex, ierr)
		}
		return data, ci, intf.LinkType, nil
	}
	data, ci, err = r.pcap.ReadPacketData()
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = errTruncated
	}
	return data, ci, r.pcap.LinkType(), err
}

// errTruncated is a capture that ends inside a packet record.
var errTruncated = errors.New("the capture ends inside a packet record (a truncated file?)")

// Close closes the file.
func (r *captureReader) Close() error { return r.f.Close() }

// captureWriter writes packets in the format of the capture they were read
// from (or the one asked for), to a temporary file that Close renames into
// place, so a failed run leaves no half-written output.
type captureWriter struct {
	format string
	src    *captureReader
	path   string
	f      *os.File
	bw     *bufio.Writer
	pcap   *pcapgo.Writer
	ng     *pcapgo.NgWriter
	ngIDs  map[int]int // input interface index → output interface ID
}

// createCapture creates path for packets read from src, in format
// (formatPcap, formatPcapng, or "" for src's format).
// openTransform opens in for reading and out for writing in the same
// format (or format), for a command op that rewrites a capture. Usage
// errors stay usage errors; others are prefixed with op.
func openTransform(op, in, out, format string) (*captureReader, *captureWriter, error) {
	r, err := openCapture(in)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	w, err := createCapture(out, format, r)
	if err != nil {
		r.Close()
		var ue *usageError
		if errors.As(err, &ue) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	return r, w, nil
}

func createCapture(path, format string, src *captureReader) (*captureWriter, error) {
	if format == "" {
		format = src.Format
	}
	if format != formatPcap && format != formatPcapng {
		return nil, usagef("invalid format %q: must be pcap or pcapng", format)
	}
	if in, err := src.f.Stat(); err == nil {
		if out, err := os.Stat(path); err == nil && os.SameFile(in, out) {
			return nil, usagef("output %s is the input file", path)
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, fmt.Errorf("create capture: %w", err)
	}
	w := &captureWriter{format: format, src: src, path: path, f: f, bw: bufio.NewWriterSize(f, 1<<16), ngIDs: map[int]int{}}
	if format == formatPcap {
		snap, lt, nanos := uint32(262144), layers.LinkTypeEthernet, true
		if src.pcap != nil {
			snap, lt = src.pcap.Snaplen(), src.pcap.LinkType()
			nanos = src.pcap.Resolution() == gopacket.TimestampResolutionNanosecond
		} else if intf, err := src.ng.Interface(0); err == nil {
			lt = intf.LinkType
			if intf.SnapLength != 0 {
				snap = intf.SnapLength
			}
		}
		if nanos {
			w.pcap = pcapgo.NewWriterNanos(w.bw)
		} else {
			w.pcap = pcapgo.NewWriter(w.bw)
		}
		if err := w.pcap.WriteFileHeader(snap, lt); err != nil {
			w.abort()
			return nil, fmt.Errorf("create capture %s: %w", path, err)
		}
	}
	return w, nil
}

// Write appends one packet read from the source with link type lt.
func (w *captureWriter) Write(ci gopacket.CaptureInfo, lt layers.LinkType, data []byte) error {
	if w.pcap != nil {
		if err := w.pcap.WritePacket(ci, data); err != nil {
			return fmt.Errorf("write capture %s: %w", w.path, err)
		}
		return nil
	}
	id, err := w.ngInterface(ci.InterfaceIndex, lt)
	if err != nil {
		return fmt.Errorf("write capture %s: %w", w.path, err)
	}
	ci.InterfaceIndex = id
	if err := w.ng.WritePacket(ci, data); err != nil {
		return fmt.Errorf("write capture %s: %w", w.path, err)
	}
	return nil
}

// ngInterface returns the output interface ID for input interface idx,
// describing it (from the source's interface block when it has one) on
// first use.
func (w *captureWriter) ngInterface(idx int, lt layers.LinkType) (int, error) {
	if id, ok := w.ngIDs[idx]; ok {
		return id, nil
	}
	intf := pcapgo.DefaultNgInterface
	intf.LinkType = lt
	if w.src.ng != nil {
		if in, err := w.src.ng.Interface(idx); err == nil {
			intf.Name, intf.Description, intf.Comment, intf.Filter, intf.OS = in.Name, in.Description, in.Comment, in.Filter, in.OS
			intf.SnapLength = in.SnapLength
		}
	} else if w.src.pcap != nil {
		intf.SnapLength = w.src.pcap.Snaplen()
	}
	var id int
	var err error
	if w.ng == nil {
		w.ng, err = pcapgo.NewNgWriterInterface(w.bw, intf, pcapgo.DefaultNgWriterOptions)
	} else {
		id, err = w.ng.AddInterface(intf)
	}
	if err != nil {
		return 0, err
	}
	w.ngIDs[idx] = id
	return id, nil
}

// Close flushes the output and moves it into place.
func (w *captureWriter) Close() error {
	if w.format == formatPcapng && w.ng == nil {
		// No packets: still write a valid file (section and interface).
		lt := layers.LinkTypeEthernet
		if w.src.pcap != nil {
			lt = w.src.pcap.LinkType()
		}
		if _, err := w.ngInterface(0, lt); err != nil {
			w.abort()
			return fmt.Errorf("write capture %s: %w", w.path, err)
		}
	}
	if w.ng != nil {
		if err := w.ng.Flush(); err != nil {
			w.abort()
			return fmt.Errorf("write capture %s: %w", w.path, err)
		}
	}
	if err := w.bw.Flush(); err != nil {
		w.abort()
		return fmt.Errorf("write capture %s: %w", w.path, err)
	}
	if err := w.f.Chmod(0o644); err != nil {
		w.abort()
		return fmt.Errorf("write capture %s: %w", w.path, err)
	}
	if err := w.f.Close(); err != nil {
		os.Remove(w.f.Name())
		return fmt.Errorf("write capture %s: %w", w.path, err)
	}
	if err := os.Rename(w.f.Name(), w.path); err != nil {
		os.Remove(w.f.Name())
		return fmt.Errorf("write capture %s: %w", w.path, err)
	}
	return nil
}

// abort removes the temporary output.
func (w *captureWriter) abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

// Linux cooked capture headers (what `tcpdump -i any` writes).
const (
	sllLen  = 16 // LINKTYPE_LINUX_SLL: protocol at bytes 14-15
	sll2Len = 20 // LINKTYPE_LINUX_SLL2: protocol at bytes 0-1
)

// asEthernet returns a captured packet as an Ethernet frame for the offload
// functions, and, when frame is a copy, the offset in data of what follows
// the frame's Ethernet header (-1 otherwise). Ethernet frames are returned
// as they are;
// Linux cooked captures (SLL, SLL2) and raw IP get an Ethernet header
// synthesized in a copy, so a caller that fills checksums copies
// frame[EthernetLen:] back to data[l3:]. ok is false for other link types.
// A packet too short for its link header comes back as an empty frame,
// which the offload functions report as malformed.
func asEthernet(data []byte, lt layers.LinkType) (frame []byte, l3 int, ok bool) {
	var proto uint16
	switch lt {
	case layers.LinkTypeEthernet:
		return data, -1, true
	case layers.LinkTypeLinuxSLL:
		if len(data) < sllLen {
			return nil, -1, true
		}
		proto, l3 = binary.BigEndian.Uint16(data[14:]), sllLen
	case layers.LinkTypeLinuxSLL2:
		if len(data) < sll2Len {
			return nil, -1, true
		}
		proto, l3 = binary.BigEndian.Uint16(data[0:]), sll2Len
	case layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		if len(data) == 0 {
			return nil, -1, true
		}
		switch data[0] >> 4 {
		case 4:
			proto = offload.EtherTypeIPv4
		case 6:
			proto = offload.EtherTypeIPv6
		}
	default:
		return nil, -1, false
	}
	frame = make([]byte, offload.EthernetLen+len(data)-l3)
	offload.Ethernet(frame).SetType(proto)
	copy(frame[offload.EthernetLen:], data[l3:])
	return frame, l3, true
}
