// Package coalesce batches packet delivery the way NIC interrupt
// coalescing does, and tunes a device's hardware coalescing.
//
// Hardware coalescing (`ethtool -c`/`-C`) is read with Get and changed
// with Set over ethtool netlink. HW holds every parameter the kernel
// defines (rx/tx usecs and frames and their irq, low and high variants,
// adaptive rx/tx, packet-rate thresholds, sample interval, stats block
// interval, CQE modes, TX aggregation and the DIM profiles). Get leaves
// the parameters the driver does not support nil; Set sends only the
// non-nil ones, so everything else stays as it is, and a parameter the
// driver does not support fails with an error matching ErrNotSupported
// that names it. Both run in the calling thread's network namespace.
//
// Per-queue hardware coalescing (`ethtool -Q DEV queue_mask M --coalesce
// …`) exists only as the ETHTOOL_PERQUEUE ioctl, not over netlink.
// GetQueues and SetQueues use it behind the same types and error rules;
// the ioctl has no CQE modes, TX aggregation or DIM profiles.
package coalesce
