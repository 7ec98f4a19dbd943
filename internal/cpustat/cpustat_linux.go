//go:build linux

package cpustat

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

func readStat() (Stat, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Stat{}, err
	}
	return Parse(data)
}

func readProcTimes() procTimes {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return procTimes{}
	}
	return procTimes{user: tvSeconds(ru.Utime), system: tvSeconds(ru.Stime)}
}

func tvSeconds(tv unix.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// ThreadClock locks the calling goroutine to its thread and returns a
// function that unlocks it and reports the thread's CPU time since.
func ThreadClock() func() float64 {
	runtime.LockOSThread()
	start := threadCPUSeconds()
	return func() float64 {
		d := threadCPUSeconds() - start
		runtime.UnlockOSThread()
		return d
	}
}

func threadCPUSeconds() float64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}
