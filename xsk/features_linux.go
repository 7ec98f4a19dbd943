//go:build linux

package xsk

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
