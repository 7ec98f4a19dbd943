//go:build linux

package xsk

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
)

// checkFree returns an error wrapping ErrBusy that names the XDP program
// already attached to the interface, if any that xdpio cannot share it
// with under share: a libxdp dispatcher is no conflict unless share is
// ShareExclusive.
func checkFree(ifindex int, share Share) error {
	a, ifname, err := attachedProgram(netns.None(), ifindex)
	if err != nil || a == nil {
		return err
	}
	if a.name == dispatcherName && share != ShareExclusive {
		return nil
	}
	return busyError(ifname, a, share)
}

// busyError says which program holds the interface and what to do.
func busyError(ifname string, a *attachedXDP, share Share) error {
	if a.name == dispatcherName {
		return fmt.Errorf("%w: another XDP program is attached to %s: id %d name %q in %s mode, libxdp's multi-program dispatcher (xdp-loader, xdp-filter), "+
			"which xdpio joins unless ProgramConfig.Share is ShareExclusive (it is %v); leave Share at ShareAuto to join it, or unload its programs (xdp-loader unload %s --all)",
			ErrBusy, ifname, a.id, a.name, a.modeName, share, ifname)
	}
	owner := fmt.Sprintf("detach it (ip link set dev %s xdp off)", ifname)
	if l, ok := xdpLink(a.id); ok {
		if a.name == "xdpio_redirect" {
			return fmt.Errorf("%w: xdpio's own program (id %d, %s mode) is attached to %s, held by bpf_link %d of another Device, in this process or another: "+
				"it goes when that Device is closed or its process exits; a queue takes one socket, but two Devices can split the queues (Config.Queues) "+
				"when both open with ProgramConfig.Share = ShareDispatcher: each is then one program of a libxdp dispatcher", ErrBusy, a.id, a.modeName, ifname, l)
		}
		owner = fmt.Sprintf("it is held by bpf_link %d, which `ip link set xdp off` cannot detach: it goes when the process that holds the link closes it or exits", l)
	}
	return fmt.Errorf("%w: another XDP program is attached to %s: id %d name %q in %s mode; %s; "+
		"or let it redirect to xdpio's sockets: pass its XSKMAP as ProgramConfig.UserMap and have it call bpf_redirect_map(map, rx_queue_index, XDP_PASS); "+
		"a libxdp dispatcher (xdp-loader) would let both run",
		ErrBusy, ifname, a.id, a.name, a.modeName, owner)
}

// xdpLink returns the ID of the bpf_link that attaches program prog, if
// one does (a program attached over netlink has none).
func xdpLink(prog ebpf.ProgramID) (link.ID, bool) {
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err == nil && info.Type == link.XDPType && info.Program == prog {
			return it.ID, true
		}
	}
	return 0, false
}
