package coalesce

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidParams is matched (errors.Is) by errors about a parameter out
// of range; the text names the parameter and its value.
var ErrInvalidParams = errors.New("invalid coalescing parameter")

// ErrBatchHeld is returned by Receiver.Next when the batch of the previous
// call still holds frames: hand them back first (Release, Transmit, Free).
var ErrBatchHeld = errors.New("previous batch still holds frames")

// MaxUsecs is the largest rx-usecs or tx-usecs accepted (one second).
const MaxUsecs = 1_000_000

// Params are software RX coalescing parameters for one socket (one
// queue), named after their `ethtool -C` counterparts. The zero value
// delivers every frame as soon as possible.
type Params struct {
	// RXUsecs bounds how long the first frame of a batch waits (µs) before
	// the batch is handed to the application. 0 delivers as soon as
	// possible. With Adaptive, it is the largest value the moderation may
	// choose.
	RXUsecs int
	// RXFrames hands a batch over as soon as it holds this many frames,
	// before RXUsecs passed. A batch may hold more: whatever the RX ring
	// held when it was read, up to BatchSize (per socket, for a
	// GroupReceiver, which counts the frames of all its sockets together).
	// 0 or anything above BatchSize means BatchSize; 1 delivers as soon as
	// possible.
	RXFrames int
	// Adaptive lets the receiver pick rx-usecs/rx-frames from a profile
	// table by the measured packet rate and cost (adaptive-rx), within the
	// bounds RXUsecs and RXFrames set (RXUsecs 0 with Adaptive means 64µs).
	Adaptive bool
	// BatchSize is the capacity of the batch Next returns (descriptors).
	// Default 256.
	BatchSize int
}

// DefaultAdaptiveUsecs is the rx-usecs bound Adaptive uses when RXUsecs is 0.
const DefaultAdaptiveUsecs = 64

func (p *Params) setDefaults() {
	if p.BatchSize == 0 {
		p.BatchSize = 256
	}
	if p.Adaptive && p.RXUsecs == 0 {
		p.RXUsecs = DefaultAdaptiveUsecs
	}
	if p.RXFrames == 0 || p.RXFrames > p.BatchSize {
		p.RXFrames = p.BatchSize
	}
}

func (p Params) validate() error { return validate("rx", p.RXUsecs, p.RXFrames, p.BatchSize) }

// validate checks one direction's usecs, frames and batch size, the same
// rules for RX and TX; dir names them as ethtool does ("rx-usecs").
func validate(dir string, usecs, frames, batch int) error {
	if usecs < 0 || usecs > MaxUsecs {
		return fmt.Errorf("%s-usecs %d: must be between 0 and %d: %w", dir, usecs, MaxUsecs, ErrInvalidParams)
	}
	if frames < 0 {
		return fmt.Errorf("%s-frames %d: must not be negative: %w", dir, frames, ErrInvalidParams)
	}
	if batch < 0 || batch > 1<<16 {
		return fmt.Errorf("batch size %d: must be between 1 and 65536 (0: default 256): %w", batch, ErrInvalidParams)
	}
	return nil
}

// TXParams are software TX coalescing parameters for one socket (one TX
// queue), named after `ethtool -Q … --coalesce tx-usecs/tx-frames`. The
// zero value kicks the kernel for every submission.
type TXParams struct {
	// TXUsecs bounds how long a submitted frame waits (µs) before it is put
	// on the TX ring and the kernel is kicked. 0 sends at once.
	TXUsecs int
	// TXFrames sends as soon as this many frames are pending. 0 or anything
	// above BatchSize means BatchSize.
	TXFrames int
	// Adaptive lets the transmitter pick tx-usecs from the table
	// Profiles(TXUsecs, TXFrames) by the measured packet rate and kicks per
	// packet (adaptive-tx); TXUsecs is the bound (0 with Adaptive means
	// 64µs).
	Adaptive bool
	// BatchSize caps TXFrames: once this many frames are pending, they are
	// flushed (one Submit of a larger batch puts all of it on the TX ring
	// first). Default 256.
	BatchSize int
}

func (p *TXParams) setDefaults() {
	if p.BatchSize == 0 {
		p.BatchSize = 256
	}
	if p.Adaptive && p.TXUsecs == 0 {
		p.TXUsecs = DefaultAdaptiveUsecs
	}
	if p.TXFrames == 0 || p.TXFrames > p.BatchSize {
		p.TXFrames = p.BatchSize
	}
}

func (p TXParams) validate() error { return validate("tx", p.TXUsecs, p.TXFrames, p.BatchSize) }

func usecs(n int) time.Duration { return time.Duration(n) * time.Microsecond }
