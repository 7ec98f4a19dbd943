//go:build !linux

package bench

import "errors"

const clockTicks = 100

func readProcStat() (cpuStat, error) { return cpuStat{}, errors.New("/proc/stat: Linux only") }

func readProcTimes() procTimes { return procTimes{} }

func threadClock() func() float64 { return func() float64 { return 0 } }
