package xsk

// Features tells which optional AF_XDP features the running kernel offers.
// It answers by trying them (registering a tiny UMEM, looking up a kfunc in
// the kernel's BTF), not by comparing version numbers, so backports count.
type Features struct {
	// TXMetadata: UMEMs can reserve TX metadata (XDP_UMEM_TX_METADATA_LEN,
	// Linux 6.8), for checksum offload and timestamps.
	TXMetadata bool
	// TXSoftwareChecksum: copy mode computes requested checksums
	// (XDP_UMEM_TX_SW_CSUM, Linux 6.11).
	TXSoftwareChecksum bool
	// RXHash: the XDP program can read the NIC's RSS hash
	// (bpf_xdp_metadata_rx_hash, Linux 6.3); the driver must implement it
	// too, or frames come without a hash (Batch.RXHash reports that).
	RXHash bool
	// UnalignedChunks: UMEMs in unaligned-chunk mode (Linux 5.4).
	UnalignedChunks bool
}
