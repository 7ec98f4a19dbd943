//go:build linux

package nic

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/xdpio/xdpio/internal/ethtool"
	"github.com/xdpio/xdpio/internal/netdev"
	"golang.org/x/sys/unix"
)

// Device is an open network device: one ethtool and one netdev netlink
// client in the namespace of the thread that called Open. It is safe for
// concurrent use.
type Device struct {
	name   string
	index  int
	netns  uint64 // inode of the namespace Open ran in
	et     *ethtool.Client
	etErr  error // why et is nil: the kernel has no ethtool netlink
	nd     *netdev.Client
	ndErr  error // why nd is nil: the kernel has no netdev family
	closed atomic.Bool

	// noNAPISet hides napi-set, to test the sysfs fallback on kernels
	// that have it.
	noNAPISet bool
}

// Open looks up interface ifname in the calling thread's network namespace
// and opens an ethtool and a netdev netlink client there. A kernel without
// one of the two families (netdev came with Linux 6.3) still opens: the
// methods that need it return an error matching ErrNotSupported.
func Open(ifname string) (*Device, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		var se *os.SyscallError
		if !errors.As(err, &se) { // the kernel listed the interfaces: none has the name
			err = &noDeviceError{ifname, err}
		}
		return nil, &Error{Op: "open", Device: ifname, Err: err}
	}
	ns, err := netnsIno("/proc/thread-self/ns/net")
	if err != nil {
		return nil, &Error{Op: "open", Device: ifname, Err: err}
	}
	d := &Device{name: ifname, index: ifi.Index, netns: ns}
	if d.et, err = ethtool.Dial(); err != nil {
		if !errors.Is(err, ErrNotSupported) {
			return nil, &Error{Op: "open", Device: ifname, Err: err}
		}
		d.etErr = err
	}
	if d.nd, err = netdev.Dial(); err != nil {
		if !errors.Is(err, ErrNotSupported) {
			d.Close()
			return nil, &Error{Op: "open", Device: ifname, Err: err}
		}
		d.ndErr = err
	}
	return d, nil
}

// Close closes the netlink clients. Calls after Close return an error
// matching ErrClosed; Close itself may be called again.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	var err error
	if d.et != nil {
		err = d.et.Close()
	}
	if d.nd != nil {
		if e := d.nd.Close(); err == nil {
			err = e
		}
	}
	return err
}

// Name returns the interface name.
func (d *Device) Name() string { return d.name }

// Index returns the interface index.
func (d *Device) Index() int { return d.index }

func (d *Device) err(op string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Device: d.name, Err: err}
}

// ethtool returns the ethtool client and the device as it names it, or
// the error of operation op when the Device is closed or the kernel has
// no ethtool netlink.
func (d *Device) ethtool(op string) (*ethtool.Client, ethtool.Device, error) {
	dev := ethtool.Device{Index: d.index, Name: d.name}
	switch {
	case d.closed.Load():
		return nil, dev, d.err(op, ErrClosed)
	case d.et == nil:
		return nil, dev, d.etErr
	}
	return d.et, dev, nil
}

// netdev returns the netdev client, or the error of operation op when the
// Device is closed or the kernel has no netdev family.
func (d *Device) netdev(op string) (*netdev.Client, error) {
	switch {
	case d.closed.Load():
		return nil, d.err(op, ErrClosed)
	case d.nd == nil:
		return nil, d.err(op, d.ndErr)
	}
	return d.nd, nil
}

// Queues returns the device's RX and TX queues with the NAPI instance,
// IRQ and AF_XDP binding of each.
func (d *Device) Queues() ([]Queue, error) {
	nl, err := d.netdev("queues")
	if err != nil {
		return nil, err
	}
	qs, err := nl.Queues(d.index)
	if err != nil {
		return nil, d.err("queues", err)
	}
	irq := map[uint32]int{}
	if napis, err := nl.NAPIs(d.index); err == nil {
		for _, n := range napis {
			irq[n.ID] = n.IRQ
		}
	}
	out := make([]Queue, 0, len(qs))
	for _, q := range qs {
		typ := RX
		if q.Type == netdev.QueueTX {
			typ = TX
		}
		nq := Queue{Type: typ, ID: int(q.ID), NAPIID: q.NAPIID, IRQ: -1, XSK: q.XSK}
		if v, ok := irq[q.NAPIID]; ok && q.NAPIID != 0 {
			nq.IRQ = v
		}
		out = append(out, nq)
	}
	return out, nil
}

func fromNetdev(n netdev.NAPI) NAPI {
	out := NAPI{ID: n.ID, IRQ: n.IRQ, PID: n.PID, NAPISettings: NAPISettings{
		DeferHardIRQs: n.DeferHardIRQs, GROFlushTimeout: n.GROFlushTimeout, IRQSuspendTimeout: n.IRQSuspendTimeout,
	}}
	if n.Threaded != nil {
		out.Threaded = n.Threaded.String()
	}
	return out
}

// NAPIs returns the selected NAPI instances of the device. When napi-get
// does not report defer-hard-irqs or gro-flush-timeout (before Linux
// 6.13), they are read from the device-wide sysfs files.
func (d *Device) NAPIs(sel Selector) ([]NAPI, error) {
	nl, err := d.netdev("get NAPIs")
	if err != nil {
		return nil, err
	}
	napis, err := nl.NAPIs(d.index)
	if err != nil {
		return nil, d.err("get NAPIs", err)
	}
	queues := map[uint32][]int{}
	byQueue := map[int]uint32{}
	if qs, err := nl.Queues(d.index); err == nil {
		for _, q := range qs {
			if q.Type == netdev.QueueRX && q.NAPIID != 0 {
				queues[q.NAPIID] = append(queues[q.NAPIID], int(q.ID))
				byQueue[int(q.ID)] = q.NAPIID
			}
		}
	}
	if len(napis) == 0 {
		return nil, d.err("get NAPIs", &notFound{d.name + " has no NAPI instance (veth gets them with GRO on or an XDP program attached)"})
	}
	var out []NAPI
	for _, n := range napis {
		switch sel.kind {
		case 1:
			if n.ID != sel.v {
				continue
			}
		case 2:
			if byQueue[int(sel.v)] != n.ID || byQueue[int(sel.v)] == 0 {
				continue
			}
		}
		nn := fromNetdev(n)
		nn.Queues = queues[n.ID]
		out = append(out, nn)
	}
	if len(out) == 0 {
		switch sel.kind {
		case 1:
			return nil, d.err("get NAPIs", &notFound{fmt.Sprintf("no NAPI %d", sel.v)})
		case 2:
			if _, err := nl.Queue(d.index, netdev.QueueRX, sel.v); err != nil {
				return nil, d.err("get NAPIs", fmt.Errorf("no RX queue %d: %w", sel.v, err))
			}
			return nil, d.err("get NAPIs", &notFound{fmt.Sprintf("RX queue %d has no NAPI instance: the driver does not link queues to NAPIs (veth does not); select by NAPI id", sel.v)})
		}
	}
	if needsSysfs(out) {
		if s, err := readSysfs(d.name, d.index, d.netns); err == nil {
			for i := range out {
				if out[i].DeferHardIRQs == nil {
					out[i].DeferHardIRQs = s.DeferHardIRQs
				}
				if out[i].GROFlushTimeout == nil {
					out[i].GROFlushTimeout = s.GROFlushTimeout
				}
			}
		}
	}
	return out, nil
}

func needsSysfs(ns []NAPI) bool {
	for _, n := range ns {
		if n.DeferHardIRQs == nil || n.GROFlushTimeout == nil {
			return true
		}
	}
	return false
}

// notFound is an error that matches unix.ENOENT without printing it.
type notFound struct{ msg string }

func (e *notFound) Error() string { return e.msg }
func (e *notFound) Unwrap() error { return unix.ENOENT }

// SetNAPI changes the settings of the selected NAPI instances and returns
// them before and after. Without napi-set in the kernel, the settings of
// all NAPIs go to the device-wide sysfs files (NAPIChange.Fallback says
// so); narrower selections and irq-suspend-timeout are then
// ErrNotSupported.
func (d *Device) SetNAPI(sel Selector, s NAPISettings) (NAPIChange, error) {
	if s.IsZero() {
		return NAPIChange{}, d.err("set NAPI", fmt.Errorf("nothing to set: %w", unix.EINVAL))
	}
	nl, err := d.netdev("set NAPI")
	if err != nil {
		return NAPIChange{}, err
	}
	before, err := d.NAPIs(sel)
	if err != nil {
		return NAPIChange{}, err
	}
	ch := NAPIChange{Before: before}
	cfg := netdev.NAPIConfig{DeferHardIRQs: s.DeferHardIRQs, GROFlushTimeout: s.GROFlushTimeout, IRQSuspendTimeout: s.IRQSuspendTimeout}
	if d.napiSetOK(nl, s) {
		for _, n := range before {
			if err := nl.SetNAPI(n.ID, cfg); err != nil {
				return ch, d.err("set NAPI", err)
			}
		}
	} else {
		if s.IRQSuspendTimeout != nil {
			return ch, &Error{Op: "set NAPI", Device: d.name, NotSupported: true,
				Err: fmt.Errorf("irq-suspend-timeout: the kernel's netdev family has no napi-set with it (Linux 6.13), and sysfs has no such file")}
		}
		if sel.kind != 0 {
			return ch, &Error{Op: "set NAPI", Device: d.name, NotSupported: true,
				Err: fmt.Errorf("%s: the kernel's netdev family has no napi-set (Linux 6.13); the sysfs fallback is device-wide: select all NAPIs", sel)}
		}
		path, err := writeSysfs(d.name, d.index, d.netns, s)
		if err != nil {
			return ch, d.err("set NAPI", err)
		}
		ch.Fallback = "device-wide sysfs " + path + " (the kernel has no netdev napi-set)"
	}
	after, err := d.NAPIs(sel)
	if err != nil {
		return ch, err
	}
	ch.After = after
	return ch, nil
}

func (d *Device) napiSetOK(nl *netdev.Client, s NAPISettings) bool {
	if d.noNAPISet {
		return false
	}
	if s.DeferHardIRQs != nil && !nl.SupportsAttr(netdev.CmdNAPISet, netdev.AttrNAPIDeferHardIRQs) {
		return false
	}
	if s.GROFlushTimeout != nil && !nl.SupportsAttr(netdev.CmdNAPISet, netdev.AttrNAPIGROFlushTimeout) {
		return false
	}
	if s.IRQSuspendTimeout != nil && !nl.SupportsAttr(netdev.CmdNAPISet, netdev.AttrNAPIIRQSuspendTimeout) {
		return false
	}
	return true
}

// QueueStats returns a snapshot of the per-queue counters.
func (d *Device) QueueStats() (Snapshot, error) {
	nl, err := d.netdev("queue stats")
	if err != nil {
		return Snapshot{}, err
	}
	rows, err := nl.QStats(d.index)
	if err != nil {
		return Snapshot{}, d.err("queue stats", err)
	}
	s := Snapshot{Time: time.Now(), Source: StatsQstats}
	for _, r := range rows {
		typ := RX
		if r.Type == netdev.QueueTX {
			typ = TX
		}
		q := QueueStats{Type: typ, Queue: int(r.ID), Counters: map[string]uint64{}}
		for _, c := range r.Reported() {
			v, _ := r.Get(c)
			q.Counters[c.String()] = v
		}
		s.Queues = append(s.Queues, q)
	}
	return s, nil
}

// XDPFeatures returns what the device offers to XDP and AF_XDP.
func (d *Device) XDPFeatures() (XDPFeatures, error) {
	nl, err := d.netdev("XDP features")
	if err != nil {
		return XDPFeatures{}, err
	}
	dev, err := nl.Dev(d.index)
	if err != nil {
		return XDPFeatures{}, d.err("XDP features", err)
	}
	return XDPFeatures{
		XDP:         netdev.FlagNames(dev.XDPFeatures, netdev.XDPActNames),
		Native:      dev.XDPFeatures&netdev.XDPActBasic != 0,
		MultiBuffer: dev.XDPFeatures&netdev.XDPActRXSG != 0,
		ZeroCopy:    dev.XDPFeatures&netdev.XDPActXSKZeroCopy != 0,
		ZCMaxSegs:   dev.XDPZCMaxSegs,
		RXMetadata:  netdev.FlagNames(dev.XDPRxMetadataFeatures, netdev.XDPRxMetadataNames),
		RXHash:      dev.XDPRxMetadataFeatures&netdev.XDPRxMetadataHash != 0,
		XSK:         netdev.FlagNames(dev.XSKFeatures, netdev.XSKFlagNames),
		TXChecksum:  dev.XSKFeatures&netdev.XSKFlagTXChecksum != 0,
		TXTimestamp: dev.XSKFeatures&netdev.XSKFlagTXTimestamp != 0,
	}, nil
}
