//go:build linux

package xsk

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// Verdicts runs each frame through the XDP program NewProgram would
// build for cfg, in the kernel's test run (BPF_PROG_RUN; nothing is
// attached), and reports whether the program would redirect it to a
// socket (true) or pass it to the kernel (false). The program is the same
// but for the action when no socket is registered, which is what tells the
// two apart here. Frames must be at least 14 bytes long.
func Verdicts(cfg ProgramConfig, frames [][]byte) ([]bool, error) {
	return verdicts(cfg, nil, frames)
}

// verdicts is Verdicts with the Local set of rules with Rule.Local filled
// from local (nil: left empty).
func verdicts(cfg ProgramConfig, local *Local, frames [][]byte) ([]bool, error) {
	if cfg.UserMap != nil || cfg.UserProgram != nil || cfg.RXHash {
		return nil, invalid("ProgramConfig", "UserMap/UserProgram/RXHash", "Verdicts runs xdpio's own filter only")
	}
	prog, err := checkProgramConfig(cfg)
	if err != nil {
		return nil, err
	}
	cfg.BPF = prog
	p := &Program{}
	defer p.Close()
	if p.xsks, err = newXSKMap(1); err != nil {
		return nil, err
	}
	if hasLocal(cfg.Filter) {
		if p.local, err = newLocalMap(); err != nil {
			return nil, err
		}
		if local != nil {
			if err := p.SetLocal(*local); err != nil {
				return nil, err
			}
		}
	}
	insns, err := buildInstructions(p.maps(), cfg, build{noSocket: xdpTX})
	if err != nil {
		return nil, err
	}
	run, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "xdpio_verdicts",
		Type:         ebpf.XDP,
		Instructions: insns,
		License:      "Dual MIT/GPL",
	})
	if err != nil {
		return nil, bpfError("load program", err)
	}
	defer run.Close()
	out := make([]bool, len(frames))
	for i, f := range frames {
		if len(f) < 14 {
			return nil, invalid(fmt.Sprintf("frame %d", i), len(f), "shorter than an Ethernet header (14 bytes)")
		}
		ret, err := run.Run(&ebpf.RunOptions{Data: f})
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", i, bpfError("BPF_PROG_RUN", err))
		}
		switch ret {
		case xdpTX:
			out[i] = true
		case xdpPass:
		default:
			return nil, fmt.Errorf("frame %d: the program returned %d", i, ret)
		}
	}
	return out, nil
}
