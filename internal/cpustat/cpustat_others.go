//go:build !linux

package cpustat

import "errors"

const clockTicks = 100

func readStat() (Stat, error) { return Stat{}, errors.New("/proc/stat: Linux only") }

func readProcTimes() procTimes { return procTimes{} }

// ThreadClock returns a function that reports 0: only Linux has thread
// clocks.
func ThreadClock() func() float64 { return func() float64 { return 0 } }
