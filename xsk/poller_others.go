//go:build !linux

package xsk

import "time"

// WaitRX returns ErrNotSupported.
func (p *Poller) WaitRX(timeout time.Duration) (bool, error) { return false, errOS }

// SleepShort returns ErrNotSupported.
func (p *Poller) SleepShort(d time.Duration) error { return errOS }

// Sleep returns ErrNotSupported.
func (p *Poller) Sleep(d time.Duration) error { return errOS }

type epollBusy struct{}

// BusyPoll returns ErrNotSupported.
func (p *Poller) BusyPoll(cfg BusyPoll) error { return errOS }

// Close does nothing.
func (p *Poller) Close() error { return nil }
