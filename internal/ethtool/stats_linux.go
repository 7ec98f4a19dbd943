//go:build linux

package ethtool

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ssStats is ETH_SS_STATS, the string set naming a driver's counters.
const ssStats = 1

// DriverStats returns the driver's own counters of dev, in the driver's
// order, as `ethtool -S DEV` prints them: their names from string set
// ETH_SS_STATS (STRSET_GET) and their values from the ETHTOOL_GSTATS
// ioctl, which has no netlink message. The ioctl runs in the calling
// thread's network namespace. A driver that keeps none (lo) gives an
// error matching ErrNotSupported.
func (c *Client) DriverStats(dev Device) ([]Stat, error) {
	const op = "GSTATS"
	// The driver may count other than the names read before the ioctl
	// (a channel count changed in between). Kernels since 6.x then
	// answer n_stats 0 and write no values; older ones write as many as
	// the driver counts, past the buffer: gstats's buffer ends at a page
	// the kernel cannot write, so that they fail with EFAULT instead. In
	// both cases the names are read again.
	for range 3 {
		names, err := c.StringSet(dev, ssStats)
		if err != nil && !errors.Is(err, errNoStringSet) {
			return nil, err
		}
		if len(names) == 0 {
			return nil, &Error{Family: family, Op: op, Target: dev.target(), NotSupported: true,
				Missing: "driver statistics (ethtool -S) by the driver of " + dev.String(), Err: unix.EOPNOTSUPP}
		}
		vals, err := gstats(dev, op, len(names))
		if errors.Is(err, errStatsChanged) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out := make([]Stat, len(names))
		for i, n := range names {
			out[i] = Stat{Name: n, Value: vals[i]}
		}
		return out, nil
	}
	return nil, &Error{Family: family, Op: op, Target: dev.target(), Err: fmt.Errorf("the driver's statistics kept changing in number while read")}
}

// errNoStringSet says a STRSET_GET reply lacks the set asked for: the
// device has no such set (lo has no ETH_SS_STATS).
var errNoStringSet = errors.New("missing")

// errStatsChanged says the driver counted other than n statistics;
// errMoreStats that it counted more than the buffer holds, and the
// kernel's write stopped at the guard page.
var (
	errStatsChanged = errors.New("number of statistics changed")
	errMoreStats    = fmt.Errorf("%w: more than the buffer holds", errStatsChanged)
)

// gstats runs ETHTOOL_GSTATS for n values: struct ethtool_stats (cmd,
// n_stats, then n_stats u64) in anonymous memory that ends at a page
// mapped without access.
func gstats(dev Device, op string, n int) ([]uint64, error) {
	size := 8 + 8*n
	page := unix.Getpagesize()
	data := (size + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, data+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, &Error{Family: family, Op: op, Target: dev.target(), Err: fmt.Errorf("mmap: %w", err)}
	}
	defer unix.Munmap(mem)
	if err := unix.Mprotect(mem[data:], unix.PROT_NONE); err != nil {
		return nil, &Error{Family: family, Op: op, Target: dev.target(), Err: fmt.Errorf("mprotect: %w", err)}
	}
	buf := mem[data-size : data]
	*(*uint32)(unsafe.Pointer(&buf[0])) = unix.ETHTOOL_GSTATS
	*(*uint32)(unsafe.Pointer(&buf[4])) = uint32(n)
	err = ethtoolIoctl(dev, op, unsafe.Pointer(&buf[0]))
	if errno, ok := err.(unix.Errno); ok {
		switch errno {
		case unix.EFAULT:
			return nil, errMoreStats // it reached the guard page
		case unix.EOPNOTSUPP:
			return nil, &Error{Family: family, Op: op, Target: dev.target(), NotSupported: true,
				Missing: "driver statistics (ethtool -S) by the driver of " + dev.String(), Err: errno}
		}
		return nil, &Error{Family: family, Op: op, Target: dev.target(), Err: errno}
	}
	if err != nil {
		return nil, err
	}
	if got := *(*uint32)(unsafe.Pointer(&buf[4])); int(got) != n {
		return nil, errStatsChanged
	}
	vals := make([]uint64, n)
	for i := range vals {
		vals[i] = *(*uint64)(unsafe.Pointer(&buf[8+8*i]))
	}
	return vals, nil
}
