//go:build linux

package xsk

import (
	"fmt"
	"net"

	"github.com/xdpio/xdpio/nic"
)

// napiDeferral holds the deferral Open applied (package nic's) and the
// device it came from, which restores it on Close.
type napiDeferral struct {
	dev *nic.Device
	df  *nic.Deferral
}

func (n *napiDeferral) Close() error {
	err := n.df.Close()
	n.dev.Close()
	return err
}

func (n *napiDeferral) NAPIs() []uint32 { return n.df.NAPIs() }

// applyNAPIDeferral sets cfg on the NAPI instances of the RX queues.
func applyNAPIDeferral(ifname string, queues []int, cfg NAPIDeferral) (napiHolder, error) {
	dev, err := nic.Open(ifname)
	if err != nil {
		return nil, &OpError{Op: "NAPI deferral", Queue: -1, Err: err}
	}
	df, err := dev.ApplyDeferral(queues, nic.DeferralSettings{DeferHardIRQs: cfg.DeferHardIRQs, GROFlushTimeout: cfg.GROFlushTimeout, IRQSuspendTimeout: cfg.IRQSuspendTimeout})
	if err != nil {
		dev.Close()
		return nil, &OpError{Op: "NAPI deferral", Queue: -1, Err: err}
	}
	return &napiDeferral{dev: dev, df: df}, nil
}

// restoreStaleNAPI restores NAPI deferral a crashed process left on the
// device, when a record of it exists. It is best effort: Open goes on.
func restoreStaleNAPI(ifname string, ifindex int) {
	if !nic.DeferralRecorded(ifname, ifindex) {
		return
	}
	dev, err := nic.Open(ifname)
	if err != nil {
		return
	}
	defer dev.Close()
	dev.RestoreDeferral()
}

// rxQueues returns the interface's current number of RX queues: what
// `ethtool -l` reports (RX plus combined channels), or, for drivers without
// channel reporting, the number of RX queues the device was created with.
func rxQueues(ifname string) (int, error) {
	n, err := nic.RXQueues(ifname)
	if err != nil {
		return 0, &OpError{Op: "count queues of", Ifname: ifname, Queue: -1, Err: err}
	}
	return n, nil
}

// maxQueues returns how many RX queues the device can have at most.
func maxQueues(ifindex int) (int, error) {
	ifi, err := net.InterfaceByIndex(ifindex)
	if err != nil {
		return 0, &OpError{Op: "count queues of", Ifindex: ifindex, Queue: -1, Err: fmt.Errorf("%w: %w", ErrNoDevice, err)}
	}
	dev, err := nic.Open(ifi.Name)
	if err != nil {
		return 0, err
	}
	defer dev.Close()
	return dev.MaxRXQueues()
}
