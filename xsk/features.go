package xsk

// Features tells which optional AF_XDP features the running kernel offers.
// It answers by trying them (registering a tiny UMEM, looking up a kfunc in
// the kernel's BTF), not by comparing version numbers, so backports count.
type Features struct {
	// TxMetadata: UMEMs can reserve TX metadata (XDP_UMEM_TX_METADATA_LEN,
	// Linux 6.8), for checksum offload and timestamps.
	TxMetadata bool
	// TxSoftwareChecksum: copy mode computes requested checksums
	// (XDP_UMEM_TX_SW_CSUM, Linux 6.11).
	TxSoftwareChecksum bool
	// RxHash: the XDP program can read the NIC's RSS hash
	// (bpf_xdp_metadata_rx_hash, Linux 6.3); the driver must implement it
	// too, or frames come without a hash (Batch.RxHash reports that).
	RxHash bool
	// UnalignedChunks: UMEMs in unaligned-chunk mode (Linux 5.4).
	UnalignedChunks bool
}

// DeviceFeatures is what one device's driver offers to XDP and AF_XDP, as
// the kernel reports it (netdev dev-get, Linux 6.3): what a bind on that
// device will get, known before Open. package nic has the same and more.
type DeviceFeatures struct {
	// Native: the driver runs XDP programs itself (driver mode), so
	// AttachDriver works and copy mode skips the generic path.
	Native bool
	// ZeroCopy: BindZeroCopy can succeed (xsk-zerocopy); BindAuto gets it.
	ZeroCopy bool
	// ZCMaxSegs is the most fragments of a zero-copy frame: above 1,
	// multi-buffer works in zero-copy mode. 0 when not reported.
	ZCMaxSegs uint32
	// MultiBuffer: the driver's XDP takes frames of several buffers
	// (rx-sg), so SocketConfig.MultiBuffer receives jumbo frames.
	MultiBuffer bool
	// RxHash: the driver hands XDP the NIC's RSS hash (RX metadata
	// "hash"), so ProgramConfig.RxHash delivers one.
	RxHash bool
	// TxChecksum and TxTimestamp: AF_XDP TX metadata the driver
	// honours in zero-copy mode.
	TxChecksum, TxTimestamp bool
}
