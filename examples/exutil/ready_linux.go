//go:build linux

package exutil

import (
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// xdpAttachedMulti is XDP_ATTACHED_MULTI of linux/if_link.h: programs in
// more than one mode (package nl stops at XDP_ATTACHED_HW).
const xdpAttachedMulti = 4

// attachOf returns where the kernel runs the XDP program of the interface
// named ifname, as Ready spells it: "driver attach", "generic attach",
// "offloaded attach", "several attach modes", "no XDP program", or
// "unknown attach" when the kernel cannot be asked.
func attachOf(ifname string) string {
	l, err := netlink.LinkByName(ifname)
	if err != nil || l.Attrs().Xdp == nil {
		return "unknown attach"
	}
	switch l.Attrs().Xdp.AttachMode {
	case nl.XDP_ATTACHED_NONE:
		return "no XDP program"
	case nl.XDP_ATTACHED_DRV:
		return "driver attach"
	case nl.XDP_ATTACHED_SKB:
		return "generic attach"
	case nl.XDP_ATTACHED_HW:
		return "offloaded attach"
	case xdpAttachedMulti:
		return "several attach modes"
	}
	return "unknown attach"
}
