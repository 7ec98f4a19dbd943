//go:build linux

package ethtool

import (
	"fmt"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Notification is one change the kernel multicast on the ethtool
// "monitor" group. Exactly one of the pointer fields is set for the
// kinds this package decodes; others arrive with only Kind and Cmd.
type Notification struct {
	// Cmd is the ETHTOOL_MSG_*_NTF message number.
	Cmd uint8
	// Kind is "channels", "rings", "coalesce", "features", "rss" or
	// "other".
	Kind     string
	Device   Device
	Channels *Channels
	Rings    *Rings
	Coalesce *Coalesce
	RSS      *RSS
	// Features are the device's features after the change, named from
	// the kernel's feature strings.
	Features Features
}

// Monitor receives ethtool notifications: channel, ring, coalescing,
// feature and RSS changes made by anyone in the namespace it was opened
// in. Receive must not be called concurrently; Close may be called at any
// time and unblocks a blocked Receive.
type Monitor struct {
	c      *genetlink.Conn
	client *Client  // for the feature names
	names  []string // ETH_SS_FEATURES, fetched at the first features notification
}

// Monitor opens a separate socket in the calling thread's namespace and
// joins the ethtool "monitor" multicast group.
func (c *Client) Monitor() (*Monitor, error) {
	var group uint32
	for _, g := range c.Family().Groups {
		if g.Name == unix.ETHTOOL_MCGRP_MONITOR_NAME {
			group = g.ID
		}
	}
	if group == 0 {
		return nil, &Error{Family: family, Op: "monitor", NotSupported: true, Missing: `multicast group "monitor"`, Err: unix.EOPNOTSUPP}
	}
	conn, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("ethtool monitor: open socket: %w", err)
	}
	if err := conn.JoinGroup(group); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ethtool monitor: join group %d: %w", group, err)
	}
	return &Monitor{c: conn, client: c}, nil
}

// Receive blocks until notifications arrive, or until deadline when it is
// not zero, and decodes them.
func (m *Monitor) Receive(deadline time.Time) ([]Notification, error) {
	if err := m.c.SetReadDeadline(deadline); err != nil {
		return nil, fmt.Errorf("ethtool monitor: %w", err)
	}
	msgs, _, err := m.c.Receive()
	if err != nil {
		return nil, fmt.Errorf("ethtool monitor: receive: %w", err)
	}
	out := make([]Notification, 0, len(msgs))
	for _, msg := range msgs {
		if msg.Header.Command == msgFeaturesNtf && m.names == nil && m.client != nil {
			// Notifications carry compact bitsets: name the bits with
			// the kernel's feature strings (the same for every device).
			if ad, err := newDecoder(msg.Data); err == nil {
				for ad.Next() {
					if ad.Type() == headerAttr {
						m.names, _ = m.client.StringSet(decodeHeader(ad), ssFeatures)
					}
				}
			}
		}
		n, err := decodeNotification(msg, m.names)
		if err != nil {
			return out, fmt.Errorf("ethtool monitor: %w", err)
		}
		out = append(out, n)
	}
	return out, nil
}

// Close leaves the group and closes the socket.
func (m *Monitor) Close() error { return m.c.Close() }

// decodeNotification decodes one notification message.
func decodeNotification(msg genetlink.Message, featureNames []string) (Notification, error) {
	n := Notification{Cmd: msg.Header.Command, Kind: "other"}
	if ad, err := netlink.NewAttributeDecoder(msg.Data); err == nil {
		for ad.Next() {
			if ad.Type() == headerAttr {
				n.Device = decodeHeader(ad)
			}
		}
	}
	var err error
	switch msg.Header.Command {
	case msgChannelsNtf:
		n.Kind = "channels"
		var ch Channels
		ch, err = decodeChannels(msg.Data)
		n.Channels = &ch
	case msgRingsNtf:
		n.Kind = "rings"
		var r Rings
		r, err = decodeRings(msg.Data)
		n.Rings = &r
	case msgCoalesceNtf:
		n.Kind = "coalesce"
		var co Coalesce
		co, err = decodeCoalesce(msg.Data)
		n.Coalesce = &co
	case msgFeaturesNtf:
		n.Kind = "features"
		n.Features, err = decodeFeatures(msg.Data, featureNames)
	case msgRSSNtf, msgRSSCreateNtf, msgRSSDeleteNtf:
		n.Kind = "rss"
		var r RSS
		r, err = decodeRSS(msg.Data)
		n.RSS = &r
	}
	if err != nil {
		return Notification{}, err
	}
	return n, nil
}
