// Package cpustat measures CPU use over an interval the way iperf3 and
// mpstat do, and returns the figures as values: the process's user and
// system time over wall time (iperf3's cpu_util_*), each core's share of
// time from /proc/stat (mpstat -P ALL), the cores' busy seconds, and the
// CPU time of the threads that reported to the Meter (ThreadClock).
//
// Only Linux has /proc/stat and per-thread clocks; elsewhere a Meter
// reports zeros and no cores.
package cpustat
