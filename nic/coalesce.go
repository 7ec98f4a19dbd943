package nic

import (
	"fmt"

	"github.com/xdpio/xdpio/internal/ethtool"
)

// Coalesce are hardware interrupt-coalescing parameters, as `ethtool -c`
// shows them. Each field is a pointer: nil in Coalesce's result means the
// driver does not support the parameter; nil in SetCoalesce's argument
// means "leave as is". Fields: RXUsecs, RXMaxFrames, RXUsecsIRQ,
// RXMaxFramesIRQ, TXUsecs, TXMaxFrames, TXUsecsIRQ, TXMaxFramesIRQ,
// StatsBlockUsecs, UseAdaptiveRX, UseAdaptiveTX, PktRateLow, RXUsecsLow,
// RXMaxFramesLow, TXUsecsLow, TXMaxFramesLow, PktRateHigh, RXUsecsHigh,
// RXMaxFramesHigh, TXUsecsHigh, TXMaxFramesHigh, RateSampleInterval,
// UseCQEModeTX, UseCQEModeRX, TXAggrMaxBytes, TXAggrMaxFrames,
// TXAggrTimeUsecs, RXProfile, TXProfile.
type Coalesce = ethtool.Coalesce

// IRQModeration is one entry of a DIM profile (Coalesce.RXProfile and
// TXProfile).
type IRQModeration = ethtool.IRQModeration

// Coalesce returns the device's hardware coalescing parameters (`ethtool
// -c DEV`). Devices without coalescing (veth) give an error matching
// ErrNotSupported.
func (d *Device) Coalesce() (Coalesce, error) {
	c, dev, err := d.ethtool("COALESCE_GET")
	if err != nil {
		return Coalesce{}, err
	}
	return c.Coalesce(dev)
}

// SetCoalesce changes the non-nil parameters of p on the device (`ethtool
// -C DEV …`) and leaves the others as they are. It first reads which
// parameters the driver supports and fails, before changing anything,
// with an error matching ErrNotSupported that names the first unsupported
// one; a value the driver refuses fails with the kernel's message.
func (d *Device) SetCoalesce(p Coalesce) error {
	c, dev, err := d.ethtool("COALESCE_SET")
	if err != nil {
		return err
	}
	cur, err := c.Coalesce(dev)
	if err != nil {
		return err
	}
	if name := UnsupportedCoalesce(cur, p); name != "" {
		return &RequestError{Family: "ethtool", Op: "COALESCE_SET", Target: dev.String(), Attr: name, NotSupported: true,
			Missing: "coalescing parameter " + name + " (the driver does not report it)",
			Err:     fmt.Errorf("device supports %s", SupportedCoalesce(cur))}
	}
	return c.SetCoalesce(dev, p)
}

// UnsupportedCoalesce returns the uapi name (ETHTOOL_A_COALESCE_*) of the
// first parameter set in p that supported (a Coalesce result) lacks, or
// "".
func UnsupportedCoalesce(supported, p Coalesce) string {
	have := map[uint16]bool{}
	for _, a := range ethtool.CoalesceSetAttrs(supported) {
		have[a] = true
	}
	for _, a := range ethtool.CoalesceSetAttrs(p) {
		if !have[a] {
			return ethtool.CoalesceAttrName(a)
		}
	}
	return ""
}

// SupportedCoalesce lists the uapi names of the parameters set in
// supported (a Coalesce result), comma-separated.
func SupportedCoalesce(supported Coalesce) string {
	s := ""
	for i, a := range ethtool.CoalesceSetAttrs(supported) {
		if i > 0 {
			s += ", "
		}
		s += ethtool.CoalesceAttrName(a)
	}
	if s == "" {
		return "no parameters"
	}
	return s
}

// MaxCoalesceQueues bounds the queue numbers QueueCoalesce and
// SetQueueCoalesce accept (the kernel's MAX_NUM_QUEUE for the per-queue
// ioctl).
const MaxCoalesceQueues = ethtool.MaxQueueCoalesce

// QueueCoalesce returns the hardware coalescing parameters of each queue
// in queues (strictly ascending), as `ethtool -Q DEV queue_mask M
// --show-coalesce` shows them. It uses the ETHTOOL_PERQUEUE ioctl (there
// is no netlink message for per-queue coalescing); parameters the driver
// does not support for the device are nil. Drivers without per-queue
// coalescing give an error matching ErrNotSupported.
func (d *Device) QueueCoalesce(queues []int) ([]Coalesce, error) {
	c, dev, err := d.ethtool("PERQUEUE")
	if err != nil {
		return nil, err
	}
	return c.QueueCoalesce(dev, queues)
}

// SetQueueCoalesce changes the non-nil parameters of p on each queue in
// queues and keeps the others (read, modify, write, as `ethtool -Q …
// --coalesce` does). The per-queue ioctl has no CQE modes, TX aggregation
// or DIM profiles; those, and parameters the driver does not support,
// fail with an error matching ErrNotSupported that names them.
func (d *Device) SetQueueCoalesce(queues []int, p Coalesce) error {
	c, dev, err := d.ethtool("PERQUEUE")
	if err != nil {
		return err
	}
	return c.SetQueueCoalesce(dev, queues, p)
}
