//go:build linux

package nic

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Stats returns the device's counters from the best source it has, and
// says which in Snapshot.Source: the kernel's per-queue statistics
// (QueueStats, StatsQstats); for a driver without them, the driver's own
// per-queue counters of `ethtool -S` (StatsDriver: veth); for a driver
// that keeps no per-queue counters at all, the device's totals
// (StatsDevice: lo). The last two are read in the calling thread's
// network namespace, which must be the one the Device was opened in.
func (d *Device) Stats() (Snapshot, error) {
	s, err := d.QueueStats()
	if err == nil && len(s.Queues) > 0 || err != nil && !errors.Is(err, ErrNotSupported) {
		return s, err
	}
	const op = "driver statistics"
	ns, err := netnsIno("/proc/thread-self/ns/net")
	if err != nil {
		return Snapshot{}, d.err(op, err)
	}
	if ns != d.netns {
		return Snapshot{}, d.err(op, fmt.Errorf("the device has no netdev qstats, and ethtool -S and /proc/net/dev answer for the calling thread's network namespace, not the one the device was opened in"))
	}
	if c, dev, err := d.ethtool(op); err == nil {
		st, err := c.DriverStats(dev)
		if err != nil && !errors.Is(err, ErrNotSupported) {
			return Snapshot{}, d.err(op, err)
		}
		if qs := driverQueueStats(st); len(qs) > 0 {
			return Snapshot{Time: time.Now(), Source: StatsDriver, Queues: qs}, nil
		}
	} else if !errors.Is(err, ErrNotSupported) {
		return Snapshot{}, err
	}
	b, err := os.ReadFile("/proc/thread-self/net/dev")
	if err != nil {
		return Snapshot{}, d.err(op, err)
	}
	now := time.Now()
	m, found, err := parseProcNetDev(b, d.name)
	if err != nil {
		return Snapshot{}, d.err(op, err)
	}
	if !found {
		return Snapshot{}, d.err(op, fmt.Errorf("/proc/net/dev has no line for %s", d.name))
	}
	return Snapshot{Time: now, Source: StatsDevice, Queues: []QueueStats{{Type: WholeDevice, Queue: -1, Counters: m}}}, nil
}
