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
	// RxUsecs bounds how long the first frame of a batch waits (µs) before
	// the batch is handed to the application. 0 delivers as soon as
	// possible. With Adaptive, it is the largest value the moderation may
	// choose.
	RxUsecs int
	// RxFrames hands a batch over as soon as it holds this many frames,
	// before RxUsecs passed. A batch may hold more: whatever the RX ring
	// held when it was read, up to BatchSize (per socket, for a
	// GroupReceiver, which counts the frames of all its sockets together).
	// 0 or anything above BatchSize means BatchSize; 1 delivers as soon as
	// possible.
	RxFrames int
	// Adaptive lets the receiver pick rx-usecs/rx-frames from a profile
	// table by the measured packet rate and cost (adaptive-rx), within the
	// bounds RxUsecs and RxFrames set (RxUsecs 0 with Adaptive means 64µs).
	Adaptive bool
	// BatchSize is the capacity of the batch Next returns (descriptors).
	// Default 256.
	BatchSize int
}

// DefaultAdaptiveUsecs is the rx-usecs bound Adaptive uses when RxUsecs is 0.
const DefaultAdaptiveUsecs = 64

func (p *Params) setDefaults() {
	if p.BatchSize == 0 {
		p.BatchSize = 256
	}
	if p.Adaptive && p.RxUsecs == 0 {
		p.RxUsecs = DefaultAdaptiveUsecs
	}
	if p.RxFrames == 0 || p.RxFrames > p.BatchSize {
		p.RxFrames = p.BatchSize
	}
}

func (p Params) validate() error { return validate("rx", p.RxUsecs, p.RxFrames, p.BatchSize) }

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

// TxParams are software TX coalescing parameters for one socket (one TX
// queue), named after `ethtool -Q … --coalesce tx-usecs/tx-frames`. The
// zero value kicks the kernel for every submission.
type TxParams struct {
	// TxUsecs bounds how long a submitted frame waits (µs) before it is put
	// on the TX ring and the kernel is kicked. 0 sends at once.
	TxUsecs int
	// TxFrames sends as soon as this many frames are pending. 0 or anything
	// above BatchSize means BatchSize.
	TxFrames int
	// Adaptive lets the transmitter pick tx-usecs from the table
	// Profiles(TxUsecs, TxFrames) by the measured packet rate and kicks per
	// packet (adaptive-tx); TxUsecs is the bound (0 with Adaptive means
	// 64µs).
	Adaptive bool
	// BatchSize caps TxFrames: once this many frames are pending, they are
	// flushed (one Submit of a larger batch puts all of it on the TX ring
	// first). Default 256.
	BatchSize int
}

func (p *TxParams) setDefaults() {
	if p.BatchSize == 0 {
		p.BatchSize = 256
	}
	if p.Adaptive && p.TxUsecs == 0 {
		p.TxUsecs = DefaultAdaptiveUsecs
	}
	if p.TxFrames == 0 || p.TxFrames > p.BatchSize {
		p.TxFrames = p.BatchSize
	}
}

func (p TxParams) validate() error { return validate("tx", p.TxUsecs, p.TxFrames, p.BatchSize) }

func usecs(n int) time.Duration { return time.Duration(n) * time.Microsecond }
