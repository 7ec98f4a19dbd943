package coalesce

import "time"

// Clock is the time source of a Receiver or Transmitter. The zero Options
// use SystemClock; tests inject their own to check batch boundaries and
// the latency bound exactly.
type Clock interface {
	// Now returns monotonic time since an arbitrary origin.
	Now() time.Duration
	// Sleep blocks the calling goroutine for d without watching the socket:
	// the receiver uses it to wait for more frames of an open batch, so it
	// is not woken by each frame that arrives meanwhile.
	Sleep(d time.Duration)
}

// Options are the parts of a Receiver or Transmitter that are not
// ethtool-style parameters. The zero value is right for production.
type Options struct {
	// Clock is the time source; nil means SystemClock.
	Clock Clock
	// IdleWait caps one wait in the kernel for the first frame of a batch,
	// so a cancelled context is noticed within it (closing the socket ends
	// the wait at once). Default 100ms.
	IdleWait time.Duration
}

func (o *Options) setDefaults() {
	if o.Clock == nil {
		o.Clock = SystemClock()
	}
	if o.IdleWait <= 0 {
		o.IdleWait = 100 * time.Millisecond
	}
}
