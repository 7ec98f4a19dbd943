package bench

import "github.com/xdpio/xdpio/internal/cpustat"

// CoreCPU is one core's use over a test in percent of its time, the
// columns of `mpstat -P ALL` (guest time is inside user, as in
// /proc/stat).
type CoreCPU struct {
	// CPU is the core's number, or "all" for the average over all cores
	// (as mpstat names them).
	CPU     string  `json:"cpu"`
	User    float64 `json:"user"`
	Nice    float64 `json:"nice"`
	System  float64 `json:"system"`
	IOWait  float64 `json:"iowait"`
	IRQ     float64 `json:"irq"`
	SoftIRQ float64 `json:"softirq"`
	Steal   float64 `json:"steal"`
	Idle    float64 `json:"idle"`
}

// Busy is the share of the core that was not idle or waiting for I/O.
func (c CoreCPU) Busy() float64 { return cpustat.Core(c).Busy() }

// HostCPU is what one end measured of its machine over a test: the CPU
// use of each core (mpstat -P ALL) and the time the threads that moved the
// datagrams ran (the engine's send or receive loops, each locked to its
// thread). It is not part of iperf3's report.
type HostCPU struct {
	Cores []CoreCPU `json:"cores"`
	// BusySeconds is the CPU time all cores spent busy during the test
	// (user, nice, system, irq, softirq, steal): the whole machine's cost
	// of the test when nothing else runs.
	BusySeconds float64 `json:"busy_seconds"`
	// DataThreadSeconds is the CPU time of the threads that sent or
	// received the test's datagrams (user and system, from
	// CLOCK_THREAD_CPUTIME_ID); 0 in a TCP test, whose bytes move in the
	// TCP stack's own goroutines or the kernel.
	DataThreadSeconds float64 `json:"data_thread_seconds"`
}

// hostCPU is the report's form of a meter's figures.
func hostCPU(u cpustat.Usage) *HostCPU {
	h := &HostCPU{BusySeconds: u.BusySeconds, DataThreadSeconds: u.ThreadSeconds}
	for _, c := range u.Cores {
		h.Cores = append(h.Cores, CoreCPU(c))
	}
	return h
}
