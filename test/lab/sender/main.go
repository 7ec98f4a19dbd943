//go:build linux

// Command sender is the host side of the hardware lab's traffic: it runs in
// the lab's network namespace, listens on a unix socket that qemu connects
// the guest's control port to, and for each labctl.Request writes the
// requested frames into the tap device behind the guest's virtio-net NIC
// (AF_PACKET), so that the NIC's RSS spreads them over its RX queues.
//
// Usage (test/lab/run starts it):
//
//	sender -listen ctl.sock -ifname xlab0 [-gap 100us]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/test/lab/labctl"
	"golang.org/x/sys/unix"
)

func main() {
	listen := flag.String("listen", "", "unix socket path to listen on (qemu's chardev connects to it)")
	ifname := flag.String("ifname", "", "tap interface to write frames into")
	dstMAC := flag.String("dst-mac", labctl.GuestMAC, "destination MAC address (the guest NIC's)")
	gap := flag.Duration("gap", 100*time.Microsecond, "pause between frames, so the emulated guest keeps up")
	flag.Parse()
	if *listen == "" || *ifname == "" {
		fmt.Fprintln(os.Stderr, "sender: -listen and -ifname are required")
		os.Exit(2)
	}
	// run serves until it fails.
	log.Fatalf("sender: %v", run(*listen, *ifname, *dstMAC, *gap))
}

type tx struct {
	fd       int
	ifindex  int
	src, dst net.HardwareAddr
	gap      time.Duration
	received atomic.Int64 // frames from the guest's MAC address
}

// listen counts the frames the guest transmits into the tap (its source
// MAC address is the guest's), from a packet socket of its own.
func (t *tx) listen() error {
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: t.ifindex}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("bind packet socket: %w", err)
	}
	// A large buffer: the guest's zero-copy sender may burst.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if errors.Is(err, unix.EINTR) {
					continue
				}
				log.Printf("sender: receive: %v", err)
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			if n >= 12 && bytes.Equal(buf[6:12], t.dst) {
				t.received.Add(1)
			}
		}
	}()
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func run(path, ifname, dstMAC string, gap time.Duration) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	dst, err := net.ParseMAC(dstMAC)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	t := &tx{fd: fd, ifindex: ifi.Index, src: ifi.HardwareAddr, dst: dst, gap: gap}
	if err := t.listen(); err != nil {
		return err
	}
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	log.Printf("sender: listening on %s, writing into %s (%s > %s)", path, ifname, t.src, t.dst)
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		log.Printf("sender: control port connected")
		serve(c, t)
		log.Printf("sender: control port closed")
	}
}

func serve(c net.Conn, t *tx) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req labctl.Request
		rep := labctl.Reply{}
		if err := json.Unmarshal(line, &req); err != nil {
			// A guest that reopened the port may leave a partial line.
			rep.Error = fmt.Sprintf("bad request %q: %v", line, err)
		} else {
			rep.ID = req.ID
			rep.Sent, err = t.do(req)
			if err != nil {
				rep.Error = err.Error()
			}
		}
		b, _ := json.Marshal(rep)
		if _, err := c.Write(append(b, '\n')); err != nil {
			return
		}
	}
}

func (t *tx) do(req labctl.Request) (int, error) {
	switch req.Op {
	case "ping":
		return 0, nil
	case "received":
		return int(t.received.Load()), nil
	case "send":
	default:
		return 0, fmt.Errorf("unknown op %q", req.Op)
	}
	count := max(req.Count, 1)
	if len(req.Flows) > labctl.MaxFlows || count > labctl.MaxCount {
		return 0, fmt.Errorf("%d flows × %d frames: at most %d flows and %d frames each", len(req.Flows), count, labctl.MaxFlows, labctl.MaxCount)
	}
	frames := make([][]byte, 0, len(req.Flows)*count)
	for i := 0; i < count; i++ {
		for _, f := range req.Flows {
			b, err := labctl.Frame(f, t.src, t.dst, uint32(i))
			if err != nil {
				return 0, err
			}
			frames = append(frames, b)
		}
	}
	sa := &unix.SockaddrLinklayer{Ifindex: t.ifindex, Halen: 6}
	copy(sa.Addr[:], t.dst)
	gap := t.gap
	switch {
	case req.Gap < 0:
		gap = 0
	case req.Gap > 0:
		gap = time.Duration(req.Gap)
	}
	sent := 0
	for _, b := range frames {
		for {
			err := unix.Sendto(t.fd, b, 0, sa)
			if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				return sent, fmt.Errorf("send frame %d: %w", sent, err)
			}
			break
		}
		sent++
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	log.Printf("sender: request %d: %d frames of %d flows", req.ID, sent, len(req.Flows))
	return sent, nil
}
