//go:build linux

package nic

import (
	"fmt"

	"github.com/xdpio/xdpio/internal/napictl"
	"github.com/xdpio/xdpio/internal/netdev"
)

// Deferral is NAPI deferral ApplyDeferral set. The Device it came from
// must stay open until Close, which restores the originals.
type Deferral struct {
	h *napictl.Holder
}

// ApplyDeferral sets s on the NAPI instances of the RX queues (each once,
// when queues share one), after recording their values in DeferralDir.
// A queue without a NAPI instance the driver reports (veth) gives an
// error matching ErrNotSupported, and nothing is changed.
func (d *Device) ApplyDeferral(queues []int, s DeferralSettings) (*Deferral, error) {
	nl, err := d.netdev("NAPI deferral")
	if err != nil {
		return nil, err
	}
	var ids []uint32
	seen := map[uint32]bool{}
	for _, q := range queues {
		nq, err := nl.Queue(d.index, netdev.QueueRX, uint32(q))
		if err != nil {
			return nil, d.err(fmt.Sprintf("NAPI deferral on queue %d", q), err)
		}
		if nq.NAPIID == 0 {
			return nil, d.err(fmt.Sprintf("NAPI deferral on queue %d", q), fmt.Errorf(
				"%w: the driver reports no NAPI instance for the queue (veth does not)", ErrNotSupported))
		}
		if !seen[nq.NAPIID] {
			seen[nq.NAPIID] = true
			ids = append(ids, nq.NAPIID)
		}
	}
	h, err := napictl.Apply(nl, napictl.Request{Ifname: d.name, Ifindex: d.index, NAPIs: ids, Settings: s})
	if err != nil {
		return nil, d.err("NAPI deferral", err)
	}
	return &Deferral{h: h}, nil
}

// NAPIs returns the NAPI instances the deferral is set on.
func (df *Deferral) NAPIs() []uint32 {
	var ids []uint32
	for _, e := range df.h.Entries() {
		ids = append(ids, e.NAPI)
	}
	return ids
}

// Close puts the original values back and removes the record.
func (df *Deferral) Close() error { return df.h.Close() }

// RestoreDeferral puts back the NAPI settings that a process which died
// while holding deferral on the device left (its record in DeferralDir),
// and leaves live holders' alone.
func (d *Device) RestoreDeferral() (DeferralReport, error) {
	nl, err := d.netdev("restore NAPI deferral")
	if err != nil {
		return DeferralReport{}, err
	}
	rep, err := napictl.RestoreStale(nl, "", d.name, d.index)
	return rep, d.err("restore NAPI deferral", err)
}
