//go:build linux

package ethtool

import (
	"github.com/mdlayher/netlink"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Channels returns dev's channel counts (CHANNELS_GET, `ethtool -l`).
func (c *Client) Channels(dev Device) (Channels, error) {
	msgs, err := c.do(request{cmd: unix.ETHTOOL_MSG_CHANNELS_GET, dev: dev})
	if err != nil {
		return Channels{}, err
	}
	b, err := oneReply("CHANNELS_GET", msgs, msgChannelsGetReply)
	if err != nil {
		return Channels{}, &Error{Family: family, Op: "CHANNELS_GET", Target: dev.target(), Err: err}
	}
	ch, err := decodeChannels(b)
	if err != nil {
		return Channels{}, &Error{Family: family, Op: "CHANNELS_GET", Target: dev.target(), Err: err}
	}
	return ch, nil
}

// SetChannels changes the counts set in cfg (CHANNELS_SET, `ethtool -L`);
// the kernel keeps the others.
func (c *Client) SetChannels(dev Device, cfg ChannelsConfig) error {
	_, err := c.do(request{cmd: unix.ETHTOOL_MSG_CHANNELS_SET, dev: dev, encode: encodeChannels(cfg)})
	return err
}

func encodeChannels(cfg ChannelsConfig) func(*netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		putU32(ae, unix.ETHTOOL_A_CHANNELS_RX_COUNT, cfg.RX)
		putU32(ae, unix.ETHTOOL_A_CHANNELS_TX_COUNT, cfg.TX)
		putU32(ae, unix.ETHTOOL_A_CHANNELS_OTHER_COUNT, cfg.Other)
		putU32(ae, unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT, cfg.Combined)
	}
}

func putU32(ae *netlink.AttributeEncoder, typ uint16, v *uint32) {
	if v != nil {
		ae.Uint32(typ, *v)
	}
}

func putU8Bool(ae *netlink.AttributeEncoder, typ uint16, v *bool) {
	if v != nil {
		var b uint8
		if *v {
			b = 1
		}
		ae.Uint8(typ, b)
	}
}

// decodeChannels decodes the attributes of a CHANNELS_GET reply or
// CHANNELS_NTF notification.
func decodeChannels(b []byte) (Channels, error) {
	var ch Channels
	ad, err := newDecoder(b)
	if err != nil {
		return ch, decodeError("CHANNELS_GET", err)
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.ETHTOOL_A_CHANNELS_RX_MAX:
			ch.RXMax = ad.Uint32()
		case unix.ETHTOOL_A_CHANNELS_TX_MAX:
			ch.TXMax = ad.Uint32()
		case unix.ETHTOOL_A_CHANNELS_OTHER_MAX:
			ch.OtherMax = ad.Uint32()
		case unix.ETHTOOL_A_CHANNELS_COMBINED_MAX:
			ch.CombinedMax = ad.Uint32()
		case unix.ETHTOOL_A_CHANNELS_RX_COUNT:
			ch.RX = ad.Uint32()
		case unix.ETHTOOL_A_CHANNELS_TX_COUNT:
			ch.TX = ad.Uint32()
		case unix.ETHTOOL_A_CHANNELS_OTHER_COUNT:
			ch.Other = ad.Uint32()
		case unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT:
			ch.Combined = ad.Uint32()
		}
	}
	if err := ad.Err(); err != nil {
		return Channels{}, decodeError("CHANNELS_GET", err)
	}
	return ch, nil
}

// RXQueues returns how many RX queues dev has now: its RX plus combined
// channels (`ethtool -l`), or, for drivers without channel reporting, the
// number of RX queues the device was created with (rtnetlink's
// IFLA_NUM_RX_QUEUES; 1 when it says none). A nil Client (a kernel
// without ethtool netlink) asks rtnetlink alone.
func (c *Client) RXQueues(dev Device) (int, error) {
	if c != nil {
		if ch, err := c.Channels(dev); err == nil && ch.RX+ch.Combined > 0 {
			return int(ch.RX + ch.Combined), nil
		}
	}
	l, err := link(dev)
	if err != nil {
		return 0, &Error{Family: family, Op: "count RX queues", Target: dev.target(), Err: err}
	}
	return max(l.Attrs().NumRxQueues, 1), nil
}

// MaxRXQueues returns how many RX queues dev can have at most: the larger
// of the RX queues it was created with and its maximum RX plus combined
// channels. A nil Client asks rtnetlink alone.
func (c *Client) MaxRXQueues(dev Device) (int, error) {
	l, err := link(dev)
	if err != nil {
		return 0, &Error{Family: family, Op: "count RX queues", Target: dev.target(), Err: err}
	}
	n := l.Attrs().NumRxQueues
	if c != nil {
		if ch, err := c.Channels(dev); err == nil {
			n = max(n, int(ch.RXMax+ch.CombinedMax))
		}
	}
	return max(n, 1), nil
}

// link looks dev up over rtnetlink in the calling thread's namespace.
func link(dev Device) (vnl.Link, error) {
	if dev.Index > 0 {
		return vnl.LinkByIndex(dev.Index)
	}
	return vnl.LinkByName(dev.Name)
}
