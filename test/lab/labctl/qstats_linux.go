//go:build linux

package labctl

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

// Values of include/uapi/linux/netdev.h (Linux 6.10 and later).
const (
	netdevCmdQstatsGet     = 12 // NETDEV_CMD_QSTATS_GET
	netdevAQstatsIfindex   = 1  // NETDEV_A_QSTATS_IFINDEX
	netdevAQstatsQType     = 2  // NETDEV_A_QSTATS_QUEUE_TYPE
	netdevAQstatsQID       = 3  // NETDEV_A_QSTATS_QUEUE_ID
	netdevAQstatsScope     = 4  // NETDEV_A_QSTATS_SCOPE
	netdevAQstatsRXPkts    = 8  // NETDEV_A_QSTATS_RX_PACKETS
	netdevQueueTypeRX      = 0  // NETDEV_QUEUE_TYPE_RX
	netdevQstatsScopeQueue = 1  // NETDEV_QSTATS_SCOPE_QUEUE
)

// QueueRXPackets returns the packets each RX queue of dev received, from
// the kernel's per-queue statistics (netdev netlink NETDEV_CMD_QSTATS_GET
// with queue scope, what `ynl --family netdev --dump qstats-get` prints).
// virtio-net reports its per-queue packet counts there and no longer in
// `ethtool -S`.
func QueueRXPackets(dev string, queues int) ([]uint64, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	defer c.Close()
	fam, err := c.GetFamily("netdev")
	if err != nil {
		return nil, fmt.Errorf("queue stats: netdev family: %w", err)
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevAQstatsIfindex, uint32(ifi.Index))
	ae.Uint32(netdevAQstatsScope, netdevQstatsScopeQueue)
	data, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	msgs, err := c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: netdevCmdQstatsGet, Version: fam.Version},
		Data:   data,
	}, fam.ID, netlink.Request|netlink.Dump)
	if err != nil {
		return nil, fmt.Errorf("queue stats of %s: %w", dev, err)
	}
	out := make([]uint64, queues)
	found := make([]bool, queues)
	for _, m := range msgs {
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		var (
			ifindex, qtype, qid = uint32(0), uint32(99), uint32(0)
			pkts                uint64
			havePkts            bool
		)
		for ad.Next() {
			switch ad.Type() {
			case netdevAQstatsIfindex:
				ifindex = ad.Uint32()
			case netdevAQstatsQType:
				qtype = ad.Uint32()
			case netdevAQstatsQID:
				qid = ad.Uint32()
			case netdevAQstatsRXPkts:
				b := ad.Bytes()
				switch len(b) {
				case 4:
					pkts = uint64(binary.NativeEndian.Uint32(b))
				case 8:
					pkts = binary.NativeEndian.Uint64(b)
				}
				havePkts = true
			}
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		if int(ifindex) == ifi.Index && qtype == netdevQueueTypeRX && havePkts && int(qid) < queues {
			out[qid], found[qid] = pkts, true
		}
	}
	for q, ok := range found {
		if !ok {
			return nil, fmt.Errorf("queue stats of %s: no RX packet count for queue %d", dev, q)
		}
	}
	return out, nil
}
