//go:build linux

package xsk

import (
	"fmt"
	"net"

	"github.com/xdpio/xdpio/internal/netdev"
)

// KernelFeatures probes the running kernel. It needs the same privileges as
// Open; without them it returns the error.
func KernelFeatures() (Features, error) {
	var f Features
	try := func(cfg UMEMConfig) (bool, error) {
		cfg.NumFrames = 4
		u, err := NewUMEM(cfg)
		if err != nil {
			return false, err
		}
		u.Close()
		return true, nil
	}
	if _, err := try(UMEMConfig{}); err != nil {
		return f, err
	}
	f.UnalignedChunks, _ = try(UMEMConfig{Unaligned: true, FrameSize: 3000})
	f.TxMetadata, _ = try(UMEMConfig{TxMetadata: true})
	if f.TxMetadata {
		f.TxSoftwareChecksum, _ = try(UMEMConfig{TxSoftwareChecksum: true})
	}
	if _, err := kfuncID("bpf_xdp_metadata_rx_hash"); err == nil {
		f.RxHash = true
	}
	return f, nil
}

// DeviceFeaturesOf asks the kernel what ifname's driver offers to XDP and
// AF_XDP (netdev dev-get). A kernel without the netdev family (before
// 6.3) gives an error matching ErrNotSupported.
func DeviceFeaturesOf(ifname string) (DeviceFeatures, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return DeviceFeatures{}, &OpError{Op: "device features", Ifname: ifname, Queue: -1, Err: fmt.Errorf("%w: %w", ErrNoDevice, err)}
	}
	c, err := netdev.Dial()
	if err != nil {
		return DeviceFeatures{}, &OpError{Op: "device features", Ifname: ifname, Ifindex: ifi.Index, Queue: -1, Err: err}
	}
	defer c.Close()
	dev, err := c.Dev(ifi.Index)
	if err != nil {
		return DeviceFeatures{}, &OpError{Op: "device features", Ifname: ifname, Ifindex: ifi.Index, Queue: -1, Err: err}
	}
	return DeviceFeatures{
		Native:      dev.XDPFeatures&netdev.XDPActBasic != 0,
		ZeroCopy:    dev.XDPFeatures&netdev.XDPActXSKZeroCopy != 0,
		ZCMaxSegs:   dev.XDPZCMaxSegs,
		MultiBuffer: dev.XDPFeatures&netdev.XDPActRxSG != 0,
		RxHash:      dev.XDPRxMetadataFeatures&netdev.XDPRxMetadataHash != 0,
		TxChecksum:  dev.XSKFeatures&netdev.XSKFlagTxChecksum != 0,
		TxTimestamp: dev.XSKFeatures&netdev.XSKFlagTxTimestamp != 0,
	}, nil
}
