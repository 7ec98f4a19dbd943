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
	f.TXMetadata, _ = try(UMEMConfig{TXMetadata: true})
	if f.TXMetadata {
		f.TXSoftwareChecksum, _ = try(UMEMConfig{TXSoftwareChecksum: true})
	}
	if _, err := kfuncID("bpf_xdp_metadata_rx_hash"); err == nil {
		f.RXHash = true
	}
	return f, nil
}
