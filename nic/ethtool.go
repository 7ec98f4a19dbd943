package nic

import (
	"errors"

	"github.com/xdpio/xdpio/internal/ethtool"
	"github.com/xdpio/xdpio/internal/genl"
)

// RequestError is the error of one netlink request to the kernel's
// ethtool or netdev family: Family, Op (the message, e.g. "CHANNELS_SET",
// or operation, e.g. "napi-set"), Target (the device), the kernel's
// extended-ack text (Message) and the request attribute it blamed (Attr),
// what is missing (Missing) when NotSupported, and the cause (Err, usually
// the kernel's errno). Use errors.As to read it; it matches
// ErrNotSupported when NotSupported is set.
type RequestError = genl.Error

// ChannelCounts are a device's channel (queue) counts and their maximums,
// as `ethtool -l` shows them. A kind the driver does not have reads 0/0
// ("n/a" in ethtool). Fields: RX, TX, Other, Combined and RXMax, TXMax,
// OtherMax, CombinedMax.
type ChannelCounts = ethtool.Channels

// ChannelsConfig selects the channel counts SetChannels changes: nil
// fields keep their current value. Fields: RX, TX, Other, Combined.
type ChannelsConfig = ethtool.ChannelsConfig

// Channels returns the device's channel counts (`ethtool -l DEV`).
func (d *Device) Channels() (ChannelCounts, error) {
	c, dev, err := d.ethtool("CHANNELS_GET")
	if err != nil {
		return ChannelCounts{}, err
	}
	return c.Channels(dev)
}

// SetChannels changes the counts cfg sets (`ethtool -L DEV rx N …`). The
// kernel rejects counts above the maximums, or a configuration that leaves
// no RX or TX queue, with a message the error carries.
func (d *Device) SetChannels(cfg ChannelsConfig) error {
	c, dev, err := d.ethtool("CHANNELS_SET")
	if err != nil {
		return err
	}
	return c.SetChannels(dev, cfg)
}

// RXQueues returns how many RX queues the device has now: its RX plus
// combined channels (`ethtool -l`), or, for drivers without channel
// reporting, the number of RX queues it was created with. It is the
// number of AF_XDP sockets xsk.Open binds when Config.Queues is nil.
func (d *Device) RXQueues() (int, error) {
	c, dev, err := d.ethtool("count RX queues")
	if err != nil && !errors.Is(err, ErrNotSupported) {
		return 0, err
	}
	return c.RXQueues(dev) // without ethtool netlink (a nil client): rtnetlink's count
}

// MaxRXQueues returns how many RX queues the device can have at most: the
// larger of the RX queues it was created with and its maximum RX plus
// combined channels. An XDP program's socket map needs as many entries.
func (d *Device) MaxRXQueues() (int, error) {
	c, dev, err := d.ethtool("count RX queues")
	if err != nil && !errors.Is(err, ErrNotSupported) {
		return 0, err
	}
	return c.MaxRXQueues(dev)
}

// RingSizes are a device's ring sizes and ring options, as `ethtool -g`
// shows them: RX, RXMini, RXJumbo, TX and their maximums, RXBufLen,
// TCPDataSplit, CQESize, TXPush, RXPush, TXPushBufLen(Max), HDSThresh(Max).
// What the driver does not report reads 0.
type RingSizes = ethtool.Rings

// RingsConfig selects the ring parameters SetRings changes: nil fields
// keep their current value.
type RingsConfig = ethtool.RingsConfig

// TCPDataSplit is the TCP header/data split setting of RingSizes and
// RingsConfig.
type TCPDataSplit = ethtool.TCPDataSplit

// TCP header/data split settings.
const (
	TCPDataSplitUnknown  = ethtool.TCPDataSplitUnknown
	TCPDataSplitDisabled = ethtool.TCPDataSplitDisabled
	TCPDataSplitEnabled  = ethtool.TCPDataSplitEnabled
)

// Rings returns the device's ring sizes (`ethtool -g DEV`). Devices
// without ring parameters (veth) give an error matching ErrNotSupported.
func (d *Device) Rings() (RingSizes, error) {
	c, dev, err := d.ethtool("RINGS_GET")
	if err != nil {
		return RingSizes{}, err
	}
	return c.Rings(dev)
}

// SetRings changes the ring parameters cfg sets (`ethtool -G DEV rx N …`).
func (d *Device) SetRings(cfg RingsConfig) error {
	c, dev, err := d.ethtool("RINGS_SET")
	if err != nil {
		return err
	}
	return c.SetRings(dev, cfg)
}

// RXQueues opens interface ifname in the calling thread's network
// namespace, returns Device.RXQueues and closes it again: for a program
// that needs the count once, before it binds sockets. Hold a Device for
// anything more.
func RXQueues(ifname string) (int, error) {
	d, err := Open(ifname)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	return d.RXQueues()
}
