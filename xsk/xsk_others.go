//go:build !linux

package xsk

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// AF_XDP exists only on Linux. On other systems the package builds, so
// that code using it compiles everywhere, and every constructor returns
// ErrNotSupported.

var errOS = fmt.Errorf("AF_XDP on %s: %w", runtime.GOOS, ErrNotSupported)

// NewUMEM returns ErrNotSupported: AF_XDP exists only on Linux.
func NewUMEM(cfg UMEMConfig) (*UMEM, error) { return nil, errOS }

// Close does nothing.
func (u *UMEM) Close() error { return nil }

func (u *UMEM) release() {}

// NewSocket returns ErrNotSupported: AF_XDP exists only on Linux.
func NewSocket(u *UMEM, ifindex, queue int, cfg SocketConfig) (*Socket, error) {
	return nil, errOS
}

func (s *Socket) wakeRX() bool      { return false }
func (s *Socket) busyPolling() bool { return false }
func (s *Socket) kick() error       { return errOS }
func (s *Socket) probeGone() error  { return nil }

// NAPIID returns ErrNotSupported.
func (s *Socket) NAPIID() (int, error) { return 0, errOS }

// Wait returns ErrNotSupported.
func (s *Socket) Wait(timeout time.Duration, tx bool) (bool, error) { return false, errOS }

// Sleep returns ErrNotSupported.
func (s *Socket) Sleep(d time.Duration) error { return errOS }

// Close does nothing.
func (s *Socket) Close() error { return nil }

// Stats returns ErrNotSupported.
func (s *Socket) Stats() (Stats, error) { return Stats{}, errOS }

// Program is an XDP program with its XSKMAP (Linux only).
type Program struct{}

// NewProgram returns ErrNotSupported: XDP exists only on Linux.
func NewProgram(ifindex int, cfg ProgramConfig) (*Program, error) { return nil, errOS }

// Verdicts returns ErrNotSupported: XDP exists only on Linux.
func Verdicts(cfg ProgramConfig, frames [][]byte) ([]bool, error) { return nil, errOS }

// Mode returns AttachAuto.
func (p *Program) Mode() AttachMode { return AttachAuto }

// Register returns ErrNotSupported.
func (p *Program) Register(queue int, s *Socket) error { return errOS }

// RegisterFD returns ErrNotSupported.
func (p *Program) RegisterFD(queue, fd int) error { return errOS }

// Unregister returns ErrNotSupported.
func (p *Program) Unregister(queue int) error { return errOS }

// ProgramID returns ErrNotSupported.
func (p *Program) ProgramID() (uint32, error) { return 0, errOS }

// Close does nothing.
func (p *Program) Close() error { return nil }

// SetLocal returns ErrNotSupported.
func (p *Program) SetLocal(l Local) error { return errOS }

// Err returns nil: off Linux there is no program to detach.
func (p *Program) Err() error { return nil }

// Open returns ErrNotSupported: AF_XDP exists only on Linux.
func Open(ifname string, cfg Config) (*Device, error) { return nil, errOS }

// KernelFeatures returns ErrNotSupported.
func KernelFeatures() (Features, error) { return Features{}, errOS }

// DefaultFrames returns 4096: AF_XDP exists only on Linux.
func DefaultFrames(queues int) int { return 4096 }

// Receive returns ErrNotSupported.
func (d *Device) Receive(ctx context.Context, cfg RunConfig, h Handler) error { return errOS }

// Send returns ErrNotSupported.
func (d *Device) Send(ctx context.Context, cfg RunConfig, f Filler) error { return errOS }

type pollFd struct{}
