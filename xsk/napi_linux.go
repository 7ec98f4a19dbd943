//go:build linux

package xsk

import (
	"fmt"
	"os"

	"github.com/xdpio/xdpio/internal/napictl"
	"github.com/xdpio/xdpio/internal/netdev"
)

// napiDeferral holds the deferral Open applied and the netdev client that
// restores it.
type napiDeferral struct {
	c *netdev.Client
	h *napictl.Holder
}

func (n *napiDeferral) Close() error {
	err := n.h.Close()
	n.c.Close()
	return err
}

func (n *napiDeferral) NAPIs() []uint32 {
	var ids []uint32
	for _, e := range n.h.Entries() {
		ids = append(ids, e.NAPI)
	}
	return ids
}

// applyNAPIDeferral sets cfg on the NAPI instances of the RX queues.
func applyNAPIDeferral(ifname string, ifindex int, queues []int, cfg NAPIDeferral) (napiHolder, error) {
	c, err := netdev.Dial()
	if err != nil {
		return nil, &OpError{Op: "NAPI deferral", Queue: -1, Err: err}
	}
	var ids []uint32
	seen := map[uint32]bool{}
	for _, q := range queues {
		nq, err := c.Queue(ifindex, netdev.QueueRX, uint32(q))
		if err != nil {
			c.Close()
			return nil, &OpError{Op: "NAPI deferral", Queue: q, Err: err}
		}
		if nq.NAPIID == 0 {
			c.Close()
			return nil, &OpError{Op: "NAPI deferral", Queue: q, Err: fmt.Errorf(
				"%w: the driver reports no NAPI instance for the queue (veth does not)", ErrNotSupported)}
		}
		if !seen[nq.NAPIID] {
			seen[nq.NAPIID] = true
			ids = append(ids, nq.NAPIID)
		}
	}
	h, err := napictl.Apply(c, napictl.Request{Ifname: ifname, Ifindex: ifindex, NAPIs: ids,
		Settings: napictl.Settings{DeferHardIRQs: cfg.DeferHardIRQs, GROFlushTimeout: cfg.GROFlushTimeout, IRQSuspendTimeout: cfg.IRQSuspendTimeout}})
	if err != nil {
		c.Close()
		return nil, &OpError{Op: "NAPI deferral", Queue: -1, Err: err}
	}
	return &napiDeferral{c: c, h: h}, nil
}

// restoreStaleNAPI restores NAPI deferral a crashed process left on the
// device, when a record of it exists. It is best effort: Open goes on.
func restoreStaleNAPI(ifname string, ifindex int) {
	if _, err := os.Stat(napictl.Path("", ifname, ifindex)); err != nil {
		return
	}
	c, err := netdev.Dial()
	if err != nil {
		return
	}
	defer c.Close()
	napictl.RestoreStale(c, "", ifname, ifindex)
}
