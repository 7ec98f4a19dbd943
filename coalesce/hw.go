package coalesce

import (
	"fmt"

	"github.com/xdpio/xdpio/internal/ethtool"
)

// ErrNotSupported is matched (errors.Is) by errors of Get and Set when the
// device's driver has no hardware coalescing or lacks a parameter; the
// error text names it.
var ErrNotSupported = ethtool.ErrNotSupported

// Device names a network interface by Name, by Index, or both.
type Device = ethtool.Device

// HW are hardware interrupt-coalescing parameters, as `ethtool -c` shows
// them. Each field is a pointer: nil in Get's result means the driver does
// not support the parameter; nil in Set's argument means "leave as is".
// Fields: RXUsecs, RXMaxFrames, RXUsecsIRQ, RXMaxFramesIRQ, TXUsecs,
// TXMaxFrames, TXUsecsIRQ, TXMaxFramesIRQ, StatsBlockUsecs, UseAdaptiveRX,
// UseAdaptiveTX, PktRateLow, RXUsecsLow, RXMaxFramesLow, TXUsecsLow,
// TXMaxFramesLow, PktRateHigh, RXUsecsHigh, RXMaxFramesHigh, TXUsecsHigh,
// TXMaxFramesHigh, RateSampleInterval, UseCQEModeTX, UseCQEModeRX,
// TXAggrMaxBytes, TXAggrMaxFrames, TXAggrTimeUsecs, RXProfile, TXProfile.
type HW = ethtool.Coalesce

// IRQModeration is one entry of a DIM profile (HW.RXProfile/TXProfile).
type IRQModeration = ethtool.IRQModeration

// Get returns dev's hardware coalescing parameters (`ethtool -c DEV`).
// Devices without coalescing (veth) give an error matching
// ErrNotSupported.
func Get(dev Device) (HW, error) {
	c, err := ethtool.Dial()
	if err != nil {
		return HW{}, err
	}
	defer c.Close()
	return c.Coalesce(dev)
}

// Set changes the non-nil parameters of p on dev (`ethtool -C DEV …`) and
// leaves the others as they are. It first reads which parameters the
// driver supports and fails, before changing anything, with an error
// matching ErrNotSupported that names the first unsupported one; a value
// the driver refuses fails with the kernel's message.
func Set(dev Device, p HW) error {
	c, err := ethtool.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	cur, err := c.Coalesce(dev)
	if err != nil {
		return err
	}
	if name := Unsupported(cur, p); name != "" {
		return &ethtool.Error{Family: "ethtool", Op: "COALESCE_SET", Target: dev.String(), Attr: name, NotSupported: true,
			Missing: "coalescing parameter " + name + " (the driver does not report it)",
			Err:     fmt.Errorf("device supports %s", SupportedNames(cur))}
	}
	return c.SetCoalesce(dev, p)
}

// Unsupported returns the uapi name (ETHTOOL_A_COALESCE_*) of the first
// parameter set in p that supported (a Get result) lacks, or "".
func Unsupported(supported, p HW) string {
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

// SupportedNames lists the uapi names of the parameters set in supported
// (a Get result), comma-separated.
func SupportedNames(supported HW) string {
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

// MaxQueues bounds the queue numbers GetQueues and SetQueues accept (the
// kernel's MAX_NUM_QUEUE for the per-queue ioctl).
const MaxQueues = ethtool.MaxQueueCoalesce

// GetQueues returns the hardware coalescing parameters of each queue in
// queues (strictly ascending), as `ethtool -Q DEV queue_mask M
// --show-coalesce` shows them. It uses the ETHTOOL_PERQUEUE ioctl (there
// is no netlink message for per-queue coalescing); parameters the driver
// does not support for the device are nil. Drivers without per-queue
// coalescing give an error matching ErrNotSupported.
func GetQueues(dev Device, queues []int) ([]HW, error) {
	c, err := ethtool.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.QueueCoalesce(dev, queues)
}

// SetQueues changes the non-nil parameters of p on each queue in queues
// and keeps the others (read, modify, write, as `ethtool -Q … --coalesce`
// does). The per-queue ioctl has no CQE modes, TX aggregation or DIM
// profiles; those, and parameters the driver does not support, fail with
// an error matching ErrNotSupported that names them.
func SetQueues(dev Device, queues []int, p HW) error {
	c, err := ethtool.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SetQueueCoalesce(dev, queues, p)
}
